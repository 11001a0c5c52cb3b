"""The review's first screen: what this `up` will do, ahead of what merely exists.

Written to REVIEW.md in the plan folder, printed first by `python -m components.plan`, and kept in plan.json
(`review`). With `--compare` the changes since the earlier plan come first (each node's steps that run, with why;
releases before -> after; other objects; acceptance); without it, the plan is read as a first `up`: per node, the
steps that do work, and the standing steps (an upgrade's, a removal's, the kubelet restarts) counted, not listed, as
on a first `up` they only check. Then acceptance, the platform's releases and every warning.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..config.acceptance import loopback_fabric
from ..config.derived import acceptance_wanted, multi_node_fabric, tested_nodes
from ..config.spec import Spec
from ..render.acceptance import (
    multi_node_runs,
    needs_drivers,
    node_groups,
    plan_tests,
    with_level,
)
from .diff import PlanDiff, render

STANDING = {
    "upgrade": "prints ok while every node runs the stack's version (components/render/upgrade.py)",
    "removal": "runs only when its node leaves the stack",
    "restart": "restarts a kubelet only where its tuning changed",
}


def standing_kind(step: str) -> str | None:
    """Which standing step a step is, or None for one that does work on a first `up`."""
    if step.startswith("upgrade-") or step in ("etcd-snapshot", "upgrade-kubelet"):
        return "upgrade"
    if step.endswith("drain-on-removal"):
        return "removal"
    if step == "kubelet-restart":
        return "restart"
    return None


def _nodes(per_node: Mapping[str, Sequence[str]]) -> list[str]:
    work_total = 0
    standing: Counter[str] = Counter()
    rows = []
    for node, steps in per_node.items():
        short = [s.removeprefix(f"{node}-") for s in steps]
        work = [s for s in short if standing_kind(s) is None]
        kinds = Counter(k for s in short if (k := standing_kind(s)) is not None)
        standing.update(kinds)
        work_total += len(work)
        counted = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
        rows.append(f"  {node:<14} {len(work):>3} do work: {' '.join(work)}" + (f"  [+{counted}]" if counted else ""))
    total = sum(standing.values())
    lines = [
        f"nodes: {len(per_node)}, {work_total} steps do work; {total} standing steps only check on this up"
        + (f" ({', '.join(f'{kind} {n}' for kind, n in sorted(standing.items()))})" if total else ""),
        *rows,
    ]
    lines += [f"  [{kind}: {why}]" for kind, why in STANDING.items() if standing[kind]]
    return lines


def _acceptance(section: Mapping[str, Any] | None) -> list[str]:
    if not section:
        return []
    due = section.get("due") or {}
    lines = [f"acceptance: level {section['level']}, covers {', '.join(section['nodes']) or 'no node'}"]
    if due:
        for node, why in due.items():
            lines.append(f"  tests {node}: {'; '.join(why)}")
    else:
        lines.append("  tests no node on this up (every node keeps its last result)")
    if section.get("dueDecidedDuringUp"):
        lines.append("  and any recorded node whose driver changed: its GPU preflight reads the driver during up")
    for floor in section.get("floors") or []:
        gbps = f">= {floor['gbps']:g} GB/s" if floor.get("gbps") else "no floor"
        lines.append(f"  floor {floor['test']} {floor['gpuModel']} over {floor['fabric']}: {gbps} ({floor['source']})")
    groups = section.get("multiNodeGroups") or []
    if groups:
        lines.append(f"  all-reduce groups: {' | '.join(', '.join(g) for g in groups)}")
    images = section.get("images") or {}
    lines.append(f"  images: {', '.join(f'{k} {v}' for k, v in images.items())}")
    return lines


def _llm_routing(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per LLM endpoint: the request a client sends, then the route, what it sends to, and what serves."""
    if not rows:
        return []
    lines = [f"LLM endpoints ({len(rows)}): a client POSTs to the Gateway's address"]
    for row in rows:
        chat = next((p for p in row["paths"] if p.endswith("/chat/completions")), row["paths"][0])
        lines += [
            f"  {row['endpoint']} (model {row['model']}): {chat} on Gateway {row['gateway']}",
            f"    route {row['route']} -> {row['backend']} -> {row['workload']}",
            f"    also /v1/chat/completions with {row['header']}; other paths (/v1/models) -> {row['other']}",
        ]
    return lines


def review(
    *,
    stack: str,
    at: str | None,
    per_node: Mapping[str, Sequence[str]],
    releases: Sequence[tuple[str, str, str, str]],
    acceptance: Mapping[str, Any] | None,
    llm_routing: Sequence[Mapping[str, Any]] = (),
    bundle: Mapping[str, Any] | None = None,
    warnings: Sequence[str],
    deployed: bool,
    diff: PlanDiff | None = None,
    compared_with: str | None = None,
) -> list[str]:
    """The first screen, as lines."""
    lines = [f"What `up` does: stack {stack}" + (f", planned at {at}" if at else "")]
    if diff is not None:
        lines += ["", *render(diff, f"changes since {compared_with}").splitlines()]
    elif deployed:
        lines += [
            "",
            "a deployment is recorded (--stack-outputs), but no earlier plan is compared: give --compare <the last up's"
            " plan folder> to see what changes; below is what the stack holds",
            "",
            *_nodes(per_node),
        ]
    else:
        lines += ["", "no deployment given (--stack-outputs): planned as a first up, every step below runs", ""]
        lines += _nodes(per_node)
    if diff is None and releases:
        installed = ", ".join(f"{name} {version}" for name, _, version, _ in releases)
        lines += ["", f"releases ({len(releases)}): {installed}"]
    accepted = _acceptance(acceptance)
    if accepted and diff is None:
        lines += ["", *accepted]
    if bundle and diff is None:
        counts = ", ".join(f"{n} {kind}" for kind, n in (bundle.get("counts") or {}).items())
        lines += ["", f"bundle: {bundle['lock']}: {counts}; digests {bundle['digests']}"]
        if bundle.get("seed"):
            lines += [
                f"  air gap: seed {bundle['seed']} checks every item, then serves images at {bundle['registry']}"
                f" ({', '.join(bundle['registries'])}) and packages, charts and files at {bundle['files']};"
                " every node's package sources and containerd hosts.toml name the seed, mirror-only"
                + (", after Spegel's host on each node" if bundle.get("spegel") else "")
            ]
    routed = _llm_routing(llm_routing)
    if routed and diff is None:
        lines += ["", *routed]
    if diff is None and warnings:
        lines += ["", f"warnings ({len(warnings)})", *(f"  {w}" for w in warnings)]
    return lines


def acceptance_review(spec: Spec, previous: Mapping[str, Any] | None) -> dict[str, Any]:
    """What acceptance does on this `up`, from the stack and the last deployment's `acceptance` output alone: the
    nodes it tests and why, the level, the tests, each floor with its source, the images. Where a node's retest
    hangs on its driver (a recorded node, whose GPU preflight reads the driver during `up`), the review says so
    instead of guessing."""
    settings = spec.acceptance
    tested = tested_nodes(spec.nodes, settings.nodes)
    drivers_needed = needs_drivers(spec.nodes, spec.acceptance, previous)
    plan = plan_tests(spec, previous, None)
    if drivers_needed:
        # Each recorded node's driver taken as unchanged: what is due then is due whatever the drivers are.
        plan = plan_tests(spec, previous, dict(plan.recorded_drivers))
    acceptance = with_level(spec, settings.level).acceptance.acceptance_spec()
    floors = []
    fabric = multi_node_fabric(spec)
    for model in sorted({n.gpu.model for n in tested if n.gpu is not None}):
        for test, on in (("loopback", loopback_fabric(model)), ("all-reduce", fabric)):
            if test == "all-reduce" and not multi_node_runs(spec):
                continue
            floor = acceptance.floor_for(test, model, on)  # type: ignore[arg-type]
            floors.append(
                {
                    "test": test,
                    "gpuModel": model,
                    "fabric": on,
                    "gbps": floor.gbps if floor else None,
                    "source": floor.source if floor else "no floor: reported, not judged",
                }
            )
    groups = [list(g.nodes) for g in node_groups(spec.nodes, spec.kueue, settings.nodes) if len(g.nodes) > 1]
    return {
        "enabled": acceptance_wanted(spec),
        "level": settings.level,
        "nodes": [n.name for n in tested],
        "due": {name: list(why) for name, why in sorted(plan.due.items())},
        "dueDecidedDuringUp": drivers_needed,
        "retest": settings.retest,
        "floors": floors,
        "multiNodeGroups": groups if multi_node_runs(spec) else [],
        "images": {"dcgm": settings.dcgm_image, "ncclTests": settings.nccl_tests_image},
    }
