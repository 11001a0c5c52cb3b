"""A Helm release as pure data, so values can be rendered, reviewed and checked against upstream."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def tolerating(values: Mapping[str, Any], paths: Sequence[str], tolerations: Sequence[Any]) -> dict[str, Any]:
    """`values` with `tolerations` appended at each dotted path (a chart's own list, given, is kept first)."""
    # Maps along each path are copied, nothing else: values may hold Outputs, which cannot be deep-copied.
    out = dict(values)
    for path in paths if tolerations else ():
        *parents, last = path.split(".")
        target = out
        for key in parents:
            target[key] = dict(target.get(key) or {})
            target = target[key]
        target[last] = [*target.get(last, []), *tolerations]
    return out
