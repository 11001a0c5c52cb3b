"""The air-gap bundle's lockfile as the plan holds it: each item by kind and name with its digest, what a stack needs
that a lockfile lacks, and what changed between two (components/airgap writes lockfiles)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.airgap import AirGapSpec, bundle_lock
from ..config.nodes import NodeSpec


def lock_items(lock: Mapping[str, Any]) -> dict[str, dict[str, str | None]]:
    """Each item of a lockfile by kind and name -> its digest."""
    return {
        "chart": {f"{c['name']}@{c['version']}": c.get("digest") for c in lock.get("charts") or []},
        "image": {i["reference"]: i.get("digest") for i in lock.get("images") or []},
        "package": {
            f"{family}:{p['name']}" + (f"={p['version']}" if p.get("version") else ""): p.get("digest")
            for family, items in (lock.get("packages") or {}).items()
            for p in items
        },
        "file": {f["url"]: f.get("digest") for f in lock.get("files") or []},
    }


def missing(needed: Mapping[str, Any], bundle: Mapping[str, Any]) -> list[str]:
    """What the stack needs that the bundle's lockfile does not hold, one line per item."""
    have = lock_items(bundle)
    return [
        f"{kind} {name}"
        for kind, items in lock_items(needed).items()
        for name in sorted(items)
        if name not in have[kind]
    ]


def lock_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Items added, removed, or whose digest changed, one line each: `+ image ...`, `- chart ...`, `~ ...`."""
    return items_diff(lock_items(old), lock_items(new))


def items_diff(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines: list[str] = []
    for kind in after:
        for name in sorted(set(before[kind]) | set(after[kind])):
            if name not in before[kind]:
                lines.append(f"+ {kind} {name}")
            elif name not in after[kind]:
                lines.append(f"- {kind} {name}")
            elif before[kind][name] != after[kind][name]:
                lines.append(f"~ {kind} {name}: {before[kind][name]} -> {after[kind][name]}")
    return lines


def plan_section(lock: Mapping[str, Any], name: str) -> dict[str, Any]:
    """What plan.json keeps of a lockfile: its name, counts, and every item with its digest."""
    items = lock_items(lock)
    filled = sum(1 for kind in items.values() for digest in kind.values() if digest)
    return {
        "lock": name,
        "counts": dict(lock.get("counts") or {}),
        "digests": f"{filled} of {sum(len(kind) for kind in items.values())} filled",
        "items": items,
    }


def section_changes(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[str]:
    """The bundle lines of a plan diff: items added, removed, or whose digest changed."""
    if not old and not new:
        return []
    if not old or not new:
        return [f"bundle lockfile {'given' if new else 'no longer given'}: {(new or old or {}).get('lock')}"]
    return items_diff(old["items"], new["items"])


def air_gap_section(air_gap: AirGapSpec, nodes: tuple[NodeSpec, ...], *, spegel: bool) -> dict[str, Any]:
    """plan_section of the stack's own lockfile (airGap.lockfile), where the seed serves it, and whether Spegel's
    host comes before the seed's in the nodes' hosts.toml."""
    lock = bundle_lock(air_gap.lockfile)
    seed = next((n for n in nodes if n.name == air_gap.seed), None)
    host = seed.host if seed is not None else air_gap.seed
    return {
        **plan_section(lock.document, air_gap.lockfile),
        "seed": air_gap.seed,
        "registry": f"http://{host}:{air_gap.registry_port}",
        "files": f"http://{host}:{air_gap.files_port}",
        "registries": list(lock.registries),
        "spegel": spegel,
    }
