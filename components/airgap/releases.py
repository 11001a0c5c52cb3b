"""The Helm releases a stack installs, read from the program's offline run, with the values each is given.

Values only the GPU preflight can decide are `[computed]` in a preview: a release is then listed once per value
they can take, so that what it may pull is known before any node is reached; nothing else may be unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pulumi.output import Unknown

from ..plan.engine import RecordedResource
from ..render.gpu_operator import driver_root

RELEASE = "kubernetes:helm.sh/v3:Release"

PREFLIGHT_DECIDED: dict[tuple[str, tuple[str, ...]], Callable[[bool], Any]] = {
    ("gpu-operator", ("driver", "enabled")): lambda enabled: enabled,
    ("nvidia-dra-driver-gpu", ("nvidiaDriverRoot",)): driver_root,
}
"""Where preview leaves a value to the GPU preflight: (chart, value path) -> the value for a driver decision."""


def chart_directory(release: RecordedResource) -> str:
    """A release's chart name: the last path segment of its name or `oci://` reference."""
    return str(release.inputs["chart"]).rstrip("/").rsplit("/", 1)[-1]


def _unknown_paths(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(value, Unknown):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _unknown_paths(v, (*path, str(k)))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _unknown_paths(v, (*path, str(i)))]
    return []


def _with(values: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy with one value replaced; only the maps along the path are copied (Unknowns cannot be)."""
    head, *rest = path
    return {**values, head: _with(values[head], tuple(rest), value) if rest else value}


def release_values(resource: RecordedResource) -> list[tuple[bool | None, dict[str, Any]]]:
    """The values a release was given, once per preflight decision when preview could not know it."""
    values = dict(resource.raw_inputs.get("values") or {})
    chart = chart_directory(resource)
    unknown = _unknown_paths(values)
    undecided = [p for p in unknown if (chart, p) not in PREFLIGHT_DECIDED]
    if undecided:
        raise ValueError(f"{resource.name}: values unknown at preview beyond the preflight's: {undecided}")
    if not unknown:
        return [(None, values)]
    out: list[tuple[bool | None, dict[str, Any]]] = []
    for enabled in (True, False):
        decided = values
        for path in unknown:
            decided = _with(decided, path, PREFLIGHT_DECIDED[(chart, path)](enabled))
        out.append((enabled, decided))
    return out
