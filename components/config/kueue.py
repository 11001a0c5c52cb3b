"""Kueue settings."""

from __future__ import annotations

from dataclasses import dataclass

from . import checks
from .schema import setting


@dataclass(frozen=True)
class KueueSpec:
    enabled: bool = setting(True, doc="Install Kueue for team queues and GPU quotas.")
    version: str = setting("0.19.2", doc="Kueue chart version.", check=checks.pinned_chart_version)
    namespace: str = setting("kueue-system", doc="Namespace of the release.", check=checks.k8s_name)
