"""The stack's GPUs per Kueue flavor, and the teams' quotas checked against them at preview.

Capacity is what the device plugin will advertise, so what Kueue can admit without pods waiting for devices:
  - a node without MIG: `count` x time-slicing replicas of `nvidia.com/gpu`;
  - a node with `migConfig: all-<profile>` (one profile on every GPU, NVIDIA's standard configs):
    `count` x slices per GPU x replicas, as `nvidia.com/mig-<profile>` (migStrategy mixed) or
    `nvidia.com/gpu` (migStrategy single); with migStrategy none the GPUs count whole;
  - any other migConfig (custom mig-parted layouts): not checked, with a warning.
In mode `existing` the stack has no nodes; `kueue.inventory` declares the GPUs instead (none declared: no GPU
flavors, and a GPU quota is an error).  CPU and memory quotas are not checked: the spec does not know node sizes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .kueue import CPU_FLAVOR, GPU_RESOURCE, GPU_RESOURCE_PREFIX, flavor_name, parse_quantity
from .schema import Problems
from .serving import EndpointSpec

if TYPE_CHECKING:
    from .spec import NodeSpec, Spec

MIG_SLICES_PER_GPU: Mapping[str, int] = {
    # NVIDIA MIG user guide, "Supported MIG Profiles": the most instances of one profile on one GPU.
    # A100 40GB
    "1g.5gb": 7, "1g.5gb+me": 1, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1,
    # A100 80GB, H100 80GB (1g.10gb also exists on the A100 40GB with 4 per GPU: give that model no migConfig)
    "1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1,
    # H100 94GB (NVL)
    "1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1,
    # H200 141GB (as `nvidia-smi mig -lgip` lists them on an H200)
    "1g.18gb": 7, "1g.18gb+me": 1, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1,
    # A30 24GB
    "1g.6gb": 4, "2g.12gb": 2, "4g.24gb": 1,
}  # fmt: skip


@dataclass
class GpuFlavor:
    """One GPU model: the nodes (or declared inventory) behind its ResourceFlavor and what they provide."""

    name: str
    model: str
    nodes: list[NodeSpec] = field(default_factory=list)
    capacity: Counter[str] = field(default_factory=Counter)
    """resource -> devices Kueue can admit."""
    terms: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    """resource -> how the capacity adds up ("8 H100-SXM-80GB" -> number of nodes)."""
    unchecked: bool = False
    """A node's devices cannot be counted (custom MIG layout): the flavor's GPU quotas are not checked."""
    node_labels: Mapping[str, str] = field(default_factory=dict)
    """Declared labels (mode existing); in mode kubeadm they come from the nodes."""

    def explain(self, resource: str) -> str:
        parts = []
        for term, nodes in sorted(self.terms[resource].items()):
            parts.append(f"{nodes} node{'s' if nodes != 1 else ''} × {term}" if nodes else term)
        return " + ".join(parts)


def _node_capacity(spec: Spec, node: NodeSpec, path: str, problems: Problems) -> tuple[str, int, str] | None:
    """(resource, devices, how) one GPU node adds to its flavor, or None when it cannot be known."""
    assert node.gpu is not None
    gpu = node.gpu
    replicas = gpu.time_slicing_replicas or spec.gpu_operator.time_slicing_replicas or 1
    resource, per_gpu, how = GPU_RESOURCE, 1, f"{gpu.count} {gpu.model}"
    if gpu.mig_config and spec.gpu_operator.mig_strategy != "none":
        profile = gpu.mig_config.removeprefix("all-")
        slices = MIG_SLICES_PER_GPU.get(profile) if gpu.mig_config.startswith("all-") else None
        if slices is None:
            problems.warn(
                f"{path}.gpu.migConfig",
                f'"{gpu.mig_config}" is not a single-profile all-<profile> layout: Kueue quotas on this node\'s'
                " MIG devices are not checked against it",
            )
            return None
        per_gpu = slices
        if spec.gpu_operator.mig_strategy == "mixed":
            resource = f"{GPU_RESOURCE_PREFIX}mig-{profile}"
        how += f" × {slices} {profile} slices"
    if replicas > 1:
        how += f" × {replicas} time-slicing replicas"
    return resource, gpu.count * per_gpu * replicas, how


def gpu_flavors(spec: Spec, problems: Problems | None = None) -> dict[str, GpuFlavor]:
    """GPU flavors by name: from the nodes' gpu sections (kubeadm) or kueue.inventory (existing)."""
    problems = problems if problems is not None else Problems()
    flavors: dict[str, GpuFlavor] = {}
    if spec.cluster.mode == "existing":
        for i, item in enumerate(spec.kueue.inventory):
            flavor = flavors.setdefault(
                flavor_name(item.model), GpuFlavor(flavor_name(item.model), item.model, node_labels=item.node_labels)
            )
            flavor.capacity[item.resource] += item.count
            flavor.terms[item.resource][f"kueue.inventory[{i}]: {item.count} {item.model}"] = 0
        return flavors
    for i, node in enumerate(spec.nodes):
        if node.gpu is None:
            continue
        path = f"nodes[{i}]"
        if "worker" not in node.roles:
            problems.warn(f"{path}.gpu", "is on a control-plane-only node, which runs no workloads: not in any flavor")
            continue
        name = flavor_name(node.gpu.model)
        flavor = flavors.setdefault(name, GpuFlavor(name, node.gpu.model))
        if flavor.model != node.gpu.model:
            problems.error(
                f"{path}.gpu.model",
                f'"{node.gpu.model}" and "{flavor.model}" both give flavor "{name}": name models distinctly',
            )
        flavor.nodes.append(node)
        provided = _node_capacity(spec, node, path, problems)
        if provided is None:
            flavor.unchecked = True
            continue
        resource, devices, how = provided
        flavor.capacity[resource] += devices
        flavor.terms[resource][how] += 1
    return flavors


def check_inventory(spec: Spec, problems: Problems) -> None:
    """GPU quotas against the GPUs: over-commit without a cohort and unknown flavors are errors, idle GPUs warn."""
    kueue = spec.kueue
    if spec.cluster.mode == "kubeadm" and kueue.inventory:
        problems.error("kueue.inventory", "is for mode existing: in mode kubeadm the nodes' gpu sections are it")
    flavors = gpu_flavors(spec, problems)
    known = ", ".join([CPU_FLAVOR, *sorted(flavors)])
    asked: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    for i, team in enumerate(kueue.teams):
        for j, quota in enumerate(team.quotas):
            path = f"kueue.teams[{i}].quotas[{j}]"
            if quota.flavor == CPU_FLAVOR:
                continue
            flavor = flavors.get(quota.flavor)
            if flavor is None:
                where = (
                    "no node in the stack has this GPU model"
                    if spec.cluster.mode == "kubeadm"
                    else "is not in kueue.inventory (mode existing: declare the cluster's GPUs there)"
                )
                problems.error(f"{path}.flavor", f'"{quota.flavor}": {where} (flavors: {known})')
                continue
            for resource, quantity in quota.nominal.items():
                if not resource.startswith(GPU_RESOURCE_PREFIX):
                    continue
                devices = int(parse_quantity(quantity) or 0)
                if resource not in flavor.capacity and not flavor.unchecked:
                    have = ", ".join(f"{r} {n}" for r, n in sorted(flavor.capacity.items())) or "nothing"
                    problems.error(
                        f"{path}.nominal.{resource}",
                        f"({quantity}): no node of flavor {flavor.name} provides {resource} (they provide {have})",
                    )
                    continue
                asked[(flavor.name, resource)].append((team.name, devices))
    # GPUs that pods outside Kueue hold are spoken for: not "in no team's quota" (one count for both checks).
    outside = sum(unqueued_gpus(spec).values())
    for flavor in flavors.values():
        if flavor.unchecked:
            continue
        for resource in sorted(flavor.capacity):
            teams = asked.get((flavor.name, resource), [])
            held = 0
            if resource == GPU_RESOURCE:
                held = min(outside, max(flavor.capacity[resource] - sum(d for _, d in teams), 0))
                outside -= held
            _compare(flavor, resource, teams, kueue.cohort, problems, held_outside=held)
    _check_unqueued(spec, flavors, asked, problems)


def unqueued_gpus(spec: Spec) -> dict[str, int]:
    """GPUs pods outside Kueue always hold: endpoints and deployments at minReplicas, the sample notebook."""
    held: dict[str, int] = {}
    if spec.kserve.enabled:
        for kind, items in (("endpoint", spec.kserve.endpoints), ("deployment", spec.kserve.deployments)):
            for item in items:
                if item.gpus:
                    # An endpoint with versions (a canary) is one InferenceService per version, each at minReplicas.
                    copies = len(item.isvc_names()) if isinstance(item, EndpointSpec) else 1
                    held[f"{kind} {item.name}"] = item.gpus * item.min_replicas * copies
    if spec.workloads.notebook:
        held["notebook"] = 1
    return held


def _check_unqueued(
    spec: Spec,
    flavors: dict[str, GpuFlavor],
    asked: dict[tuple[str, str], list[tuple[str, int]]],
    problems: Problems,
) -> None:
    """Kueue admits against its quotas alone: GPUs held outside it must not also be promised to the teams."""
    held = unqueued_gpus(spec)
    checked = [f for f in flavors.values() if not f.unchecked and GPU_RESOURCE in f.capacity]
    if not held or not checked:
        return
    capacity = sum(f.capacity[GPU_RESOURCE] for f in checked)
    promised = sum(d for f in checked for _, d in asked.get((f.name, GPU_RESOURCE), []))
    outside = sum(held.values())
    if promised + outside > capacity:
        who = ", ".join(f"{name} {n}" for name, n in sorted(held.items()))
        problems.warn(
            "kueue.teams",
            f"nominal {GPU_RESOURCE} quotas promise {promised} of the {capacity} GPUs, but {outside} are held outside"
            f" Kueue ({who}): admitted jobs may wait for {promised + outside - capacity} GPUs; lower the quotas by"
            " that much",
        )


def _compare(
    flavor: GpuFlavor,
    resource: str,
    teams: list[tuple[str, int]],
    cohort: str | None,
    problems: Problems,
    *,
    held_outside: int = 0,
) -> None:
    capacity = flavor.capacity[resource]
    total = sum(devices for _, devices in teams)
    have = f"the {capacity} the nodes have ({flavor.explain(resource)})"
    if total > capacity:
        shares = " + ".join(f"{team} {devices}" for team, devices in teams)
        head = f"nominal {resource} quotas of flavor {flavor.name} add up to {total} ({shares}), more than {have}"
        if cohort is None:
            problems.error(
                "kueue.teams",
                f"{head}: over-committed by {total - capacity} with no cohort; lower the quotas or set kueue.cohort",
            )
        else:
            problems.warn(
                "kueue.teams",
                f"{head}: cohort {cohort} may admit workloads whose pods then wait for {total - capacity} devices",
            )
    elif total + held_outside < capacity:
        besides = f", besides {held_outside} held by pods outside Kueue," if held_outside else ""
        problems.warn(
            "kueue.teams",
            f"{capacity - total - held_outside} of the {capacity} {resource} of flavor {flavor.name}"
            f" ({flavor.explain(resource)}){besides} are in no team's nominal quota"
            + (": no team can use them without a cohort" if cohort is None else f": cohort {cohort} cannot lend them"),
        )
