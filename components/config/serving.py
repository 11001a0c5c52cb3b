"""Model serving (KServe, cert-manager) settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import checks
from .schema import setting


@dataclass(frozen=True)
class KserveSpec:
    enabled: bool = setting(True, doc="Install KServe (and cert-manager) for model serving.")
    version: str = setting("v0.20.0", doc="KServe chart version.", check=checks.pinned_chart_version)
    namespace: str = setting("kserve", doc="Namespace of the release.", check=checks.k8s_name)
    cert_manager_version: str = setting(
        "v1.21.1", doc="cert-manager chart version (installed before KServe).", check=checks.pinned_chart_version
    )
    deployment_mode: Literal["Standard", "Knative"] = setting(
        "Standard", doc="`Standard`: Deployments + HPA, no Knative. `Knative`: scale-to-zero, installs Knative."
    )
