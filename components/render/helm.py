"""A Helm release as pure data, so values can be rendered, reviewed and checked against upstream."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ChartRelease:
    name: str
    chart: str
    """`oci://...` reference, or a chart name in `repository`."""
    version: str
    namespace: str
    values: Mapping[str, Any] = field(default_factory=dict)
    repository: str | None = None
    timeout_seconds: int = 600
    upstream_chart: str = ""
    """Directory name under ../shared/fixtures/upstream/charts whose values.yaml the values must fit."""
