"""Kueue settings: the release, team queues with quotas per flavor, the cohort, priorities, the topology."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from . import checks
from .nodes import DERIVED_NODE_LABELS
from .schema import LabelText, Problems, join_path, setting

CPU_FLAVOR = "cpu"
"""The ResourceFlavor of CPU-only work (no node labels: any node a pod tolerates)."""

GPU_RESOURCE = "nvidia.com/gpu"
GPU_RESOURCE_PREFIX = "nvidia.com/"

_RESOURCE_NAME = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
_BINARY: dict[str, int] = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Decimal | int] = {
    "m": Decimal("0.001"),
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
_QUANTITY = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?", re.ASCII)


def parse_quantity(value: str) -> Decimal | None:
    """A Kubernetes quantity as a number (None when it is not one): "500m" -> 0.5, "4Gi" -> 4294967296."""
    match = _QUANTITY.fullmatch(value)
    if not match:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    return Decimal(number) * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def resource_quantity_problem(name: str, quantity: str) -> str | None:
    """What is wrong with one `resource: quantity` entry of a quota, or None."""
    if not _RESOURCE_NAME.fullmatch(name) or len(name) > 253:
        return "is not a resource name"
    amount = parse_quantity(quantity)
    if amount is None:
        return f'"{quantity}" is not a quantity such as 32, 500m, 256Gi'
    if name.startswith(GPU_RESOURCE_PREFIX) and amount % 1:
        return f'"{quantity}": devices are counted in whole units'
    return None


SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
DEFAULT_PRIORITY_CLASSES = {"production": 1000, "research": 500, "best-effort": 100}


def flavor_name(gpu_model: str) -> str:
    """The ResourceFlavor of a GPU model: "H100-SXM-80GB" -> "h100-sxm-80gb"."""
    return re.sub(r"[^a-z0-9]+", "-", gpu_model.lower()).strip("-")


@dataclass(frozen=True)
class QuotaSpec:
    flavor: str = setting(
        doc=f"ResourceFlavor: `{CPU_FLAVOR}`, or a GPU model's flavor (the model lowercased, e.g. h100-sxm-80gb).",
        check=checks.k8s_name,
    )
    nominal: Mapping[str, str] = setting(
        doc="Nominal quota per resource, e.g. {cpu: 64, memory: 512Gi, nvidia.com/gpu: 16}."
    )
    borrowing_limit: Mapping[str, str] = setting(
        default_factory=dict,
        doc="Most the team may borrow from the cohort above its nominal quota, per resource (unset: no limit).",
    )
    lending_limit: Mapping[str, str] = setting(
        default_factory=dict,
        doc="Most of its nominal quota the team lends to the cohort, per resource (unset: all of it).",
    )

    def validate(self, path: str, problems: Problems) -> None:
        if not self.nominal:
            problems.error(join_path(path, "nominal"), "must name at least one resource")
        for key, resources in (
            ("nominal", self.nominal),
            ("borrowingLimit", self.borrowing_limit),
            ("lendingLimit", self.lending_limit),
        ):
            for name, quantity in resources.items():
                if message := resource_quantity_problem(name, quantity):
                    problems.error(join_path(join_path(path, key), name), message)
        for key, limits in (("borrowingLimit", self.borrowing_limit), ("lendingLimit", self.lending_limit)):
            for name in limits:
                if name not in self.nominal:
                    problems.error(join_path(join_path(path, key), name), "has no nominal quota to limit")
        for name, lending in self.lending_limit.items():
            nominal, lent = parse_quantity(self.nominal.get(name, "")), parse_quantity(lending)
            if nominal is not None and lent is not None and lent > nominal:
                problems.error(
                    join_path(join_path(path, "lendingLimit"), name),
                    f"({lending}) is more than the nominal quota ({self.nominal[name]})",
                )


@dataclass(frozen=True)
class PreemptionSpec:
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = setting(
        "LowerPriority", doc="Preempt the team's own lower-priority workloads to admit a higher-priority one."
    )
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = setting(
        "Any", doc="Preempt workloads that borrowed this team's quota, to get it back."
    )
    borrow_within_cohort: Literal["Never", "LowerPriority"] = setting(
        "Never", doc="Preempt other teams' lower-priority workloads while borrowing."
    )

    def validate(self, path: str, problems: Problems) -> None:
        if self.reclaim_within_cohort == "Never" and self.borrow_within_cohort != "Never":
            problems.error(
                join_path(path, "borrowWithinCohort"),
                f'"{self.borrow_within_cohort}" needs reclaimWithinCohort other than "Never" (Kueue rejects it)',
            )


@dataclass(frozen=True)
class TeamSpec:
    name: str = setting(doc="Team name: its ClusterQueue and its LocalQueue.", check=checks.k8s_name)
    quotas: tuple[QuotaSpec, ...] = setting(doc="Quotas per flavor; Kueue tries the flavors in this order.")
    namespace: str | None = setting(
        None, doc="Namespace the team submits jobs in, created for it (default: the team name).", check=checks.k8s_name
    )
    fair_sharing_weight: str | None = setting(
        None, doc="Fair-sharing weight (with kueue.fairSharing; default 1, 0 = borrow last).", check=checks.quantity
    )
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = setting(
        "BestEffortFIFO", doc="`StrictFIFO`: a workload that does not fit blocks the ones behind it."
    )
    preemption: PreemptionSpec = setting(default_factory=PreemptionSpec, doc="Preemption policy.")

    @property
    def queue_namespace(self) -> str:
        return self.namespace or self.name

    def validate(self, path: str, problems: Problems) -> None:
        if not self.quotas:
            problems.error(join_path(path, "quotas"), "must give at least one flavor's quota")
        seen: dict[str, int] = {}
        for i, quota in enumerate(self.quotas):
            if quota.flavor in seen:
                problems.error(
                    join_path(join_path(path, "quotas"), i) + ".flavor",
                    f'"{quota.flavor}" is already given in quotas[{seen[quota.flavor]}]',
                )
            seen.setdefault(quota.flavor, i)
        cpu = next((q for q in self.quotas if q.flavor == CPU_FLAVOR), None)
        if cpu is not None:
            for name, quantity in cpu.nominal.items():
                if name.startswith(GPU_RESOURCE_PREFIX) and parse_quantity(quantity):
                    i = self.quotas.index(cpu)
                    problems.error(
                        f"{join_path(path, 'quotas')}[{i}].nominal.{name}",
                        f"({quantity}): the {CPU_FLAVOR} flavor has no GPUs",
                    )


@dataclass(frozen=True)
class GpuInventorySpec:
    model: str = setting(doc="GPU model; its flavor is the model lowercased.", check=checks.gpu_model)
    count: int = setting(
        doc="Devices of this model in the cluster (after time-slicing and MIG).", check=checks.between(1, 100000)
    )
    resource: str = setting(
        GPU_RESOURCE,
        doc="Resource the devices are requested as.",
        check=lambda v: (
            None
            if v.startswith(GPU_RESOURCE_PREFIX) and _RESOURCE_NAME.fullmatch(v)
            else "is not an nvidia.com/ resource"
        ),
    )
    node_labels: Mapping[str, LabelText] = setting(
        default_factory=dict,
        doc="Labels of these GPU nodes (default: mlcluster.io/gpu-model=<model>), e.g."
        " cloud.google.com/gke-accelerator: nvidia-h100-80gb.",
        check=checks.labels,
    )


HOSTNAME_LEVEL = "hostname"
HOSTNAME_LABEL = "kubernetes.io/hostname"
"""The node itself: always the last topology level, a label every kubelet sets on its own node."""
TOPOLOGY_LABEL_PREFIX = "topology.mlcluster.io/"
TOPOLOGY_MAX_LEVELS = 16
"""The Topology CRD's levels maxItems, the hostname level included."""
TAS_MIN_KUEUE = (0, 14)
"""Topology-Aware Scheduling is beta, on by default, from Kueue 0.14; before, a feature gate the chart leaves off."""
_MINOR_VERSION = re.compile(r"v?(\d+)\.(\d+)\.", re.ASCII)


def release_minor(version: str) -> tuple[int, int] | None:
    """(major, minor) of a pinned chart version (Kueue's, the Trainer's), or None when it is not one."""
    match = _MINOR_VERSION.match(version)
    return (int(match.group(1)), int(match.group(2))) if match else None


@dataclass(frozen=True)
class TopologySpec:
    levels: tuple[str, ...] = setting(
        doc="Topology levels of the GPU nodes, coarsest first, e.g. [block, rack]; each GPU node names its"
        " domain per level in nodes[].topology. The node itself (kubernetes.io/hostname) is always the last"
        " level, added when not given.",
        check=checks.each(checks.k8s_name),
    )
    node_labels: Mapping[str, str] = setting(
        default_factory=dict,
        doc=f"Node label key of a level (default: {TOPOLOGY_LABEL_PREFIX}<level>), e.g."
        " {zone: topology.kubernetes.io/zone}; mode `existing`: the labels the provider sets.",
    )
    training_level: str = setting(
        "rack", doc="Level whose one domain the stack's training workloads ask Kueue to place all their pods in."
    )
    training_placement: Literal["preferred", "required"] = setting(
        "preferred",
        doc="`preferred`: Kueue places a training workload in one trainingLevel domain when one has room, else"
        " over as few as it can; `required`: the workload waits until one domain has room for all its pods.",
    )

    def level_labels(self) -> dict[str, str]:
        """Level name -> node label key, coarsest first, the hostname level last."""
        labels = {level: self._label_of(level) for level in self.levels}
        if HOSTNAME_LABEL not in labels.values():
            labels[HOSTNAME_LEVEL] = HOSTNAME_LABEL
        return labels

    def domain_levels(self) -> dict[str, str]:
        """The levels a node names its domain in (all but the node itself), with their label keys."""
        return {level: label for level, label in self.level_labels().items() if label != HOSTNAME_LABEL}

    def validate(self, path: str, problems: Problems) -> None:
        levels_path = join_path(path, "levels")
        if not self.levels:
            problems.error(levels_path, "must name at least one level, coarsest first, e.g. [block, rack]")
        if len(self.level_labels()) > TOPOLOGY_MAX_LEVELS:
            problems.error(
                levels_path,
                f"makes {len(self.level_labels())} levels with the node's own ({HOSTNAME_LEVEL}) last: Kueue's"
                f" Topology takes at most {TOPOLOGY_MAX_LEVELS}",
            )
        seen: dict[str, int] = {}
        for i, level in enumerate(self.levels):
            if level in seen:
                problems.error(f"{levels_path}[{i}]", f'"{level}" is already levels[{seen[level]}]')
            seen.setdefault(level, i)
        labels_path = join_path(path, "nodeLabels")
        for level, label in self.node_labels.items():
            if level not in self.levels:
                declared = ", ".join(dict.fromkeys(self.levels)) or "none"
                problems.error(join_path(labels_path, level), f"is not a level in levels ({declared})")
            elif level == HOSTNAME_LEVEL and label != HOSTNAME_LABEL:
                problems.error(join_path(labels_path, level), f"is the node itself: always {HOSTNAME_LABEL}")
            elif message := checks.label_key(label):
                problems.error(join_path(labels_path, level), f"{label!r} {message}")
            elif label in DERIVED_NODE_LABELS:
                problems.error(
                    join_path(labels_path, level),
                    f"{label!r} is a label mlcluster sets from {DERIVED_NODE_LABELS[label]}: a level needs a label"
                    " of its own (the GPU flavors select nodes by it)",
                )
        given = {level: self._label_of(level) for level in self.levels}
        owner: dict[str, str] = {}
        for i, level in enumerate(self.levels):
            label = given[level]
            where = join_path(labels_path, level) if level in self.node_labels else f"{levels_path}[{i}]"
            if label == HOSTNAME_LABEL and i != len(self.levels) - 1:
                problems.error(
                    where,
                    f'"{level}" is the node itself ({HOSTNAME_LABEL}), which Kueue takes only as the last level;'
                    " it is added last when not given: remove it here",
                )
            if label in owner and owner[label] != level:
                problems.error(where, f"{label!r} is already the node label of level {owner[label]!r}")
            owner.setdefault(label, level)
        known = list(self.level_labels())
        if self.levels and self.training_level not in known:
            problems.error(
                join_path(path, "trainingLevel"), f'"{self.training_level}" is not a level ({", ".join(known)})'
            )

    def _label_of(self, level: str) -> str:
        default = HOSTNAME_LABEL if level == HOSTNAME_LEVEL else TOPOLOGY_LABEL_PREFIX + level
        return self.node_labels.get(level, default)


@dataclass(frozen=True)
class WaitForPodsReadySpec:
    """Kueue's all-or-nothing admission (config.kueue.x-k8s.io/v1beta2 `waitForPodsReady`): an admitted workload
    whose pods are not all ready in time is evicted and requeued, so a gang never holds part of the quota."""

    enabled: bool = setting(
        True,
        doc="Evict and requeue an admitted workload whose pods are not all ready within `timeout` (gang"
        " scheduling; the AI-conformance MUST gang_scheduling). false: a gang that fits only in part holds its quota.",
    )
    timeout: str = setting(
        "10m",
        doc="How long an admitted workload may take for all its pods to be ready (image pulls of large ML images"
        " included) before Kueue evicts it with reason PodsReadyTimeout.",
        check=checks.positive_duration,
    )
    recovery_timeout: str | None = setting(
        None,
        doc="How long a running workload may stay with a pod not ready (a pod lost and replaced) before it is"
        " evicted and requeued (unset: Kueue's default, the value of `timeout`; `0s`: never).",
        check=checks.duration,
    )
    requeuing_timestamp: Literal["Eviction", "Creation"] = setting(
        "Eviction",
        doc="Where an evicted workload goes back in its queue: `Eviction` (the back) or `Creation` (its old place).",
    )
    backoff_base_seconds: int = setting(
        60, doc="First requeue delay; each further requeue doubles it (plus jitter).", check=checks.between(1, 86400)
    )
    backoff_max_seconds: int = setting(3600, doc="Longest requeue delay.", check=checks.between(1, 604800))
    backoff_limit_count: int | None = setting(
        None,
        doc="Requeues before the workload is deactivated (spec.active: false); unset: requeued without end.",
        check=checks.between(0, 2147483647),
    )

    def validate(self, path: str, problems: Problems) -> None:
        if self.backoff_base_seconds > self.backoff_max_seconds:
            problems.error(
                join_path(path, "backoffBaseSeconds"),
                f"({self.backoff_base_seconds}) is more than backoffMaxSeconds ({self.backoff_max_seconds})",
            )
        if checks.duration(self.timeout) is None and checks.duration_seconds(self.timeout) <= 0:
            problems.error(join_path(path, "timeout"), "must be more than 0s")


@dataclass(frozen=True)
class KueueSpec:
    enabled: bool = setting(True, doc="Install Kueue for team queues and GPU quotas.")
    version: str = setting("0.19.2", doc="Kueue chart version.", check=checks.pinned_chart_version)
    namespace: str = setting("kueue-system", doc="Namespace of the release.", check=checks.k8s_name)
    cohort: str | None = setting(
        None,
        doc="Cohort every team's ClusterQueue joins, so teams borrow each other's idle quota (unset: teams are"
        " isolated, and GPU quotas may not add up to more than the nodes have).",
        check=checks.k8s_name,
    )
    fair_sharing: bool = setting(False, doc="Share borrowed capacity by the teams' fairSharingWeight.")
    teams: tuple[TeamSpec, ...] = setting((), doc="Teams: a ClusterQueue, a namespace and a LocalQueue each.")
    priority_classes: Mapping[str, int] = setting(
        default_factory=lambda: dict(DEFAULT_PRIORITY_CLASSES),
        doc="WorkloadPriorityClasses, name: value (higher is admitted first and may preempt lower); jobs pick"
        " one with the label kueue.x-k8s.io/priority-class.",
        check=lambda m: next((f"has an invalid name {k!r}" for k in m if checks.k8s_name(k)), None),
    )
    inventory: tuple[GpuInventorySpec, ...] = setting(
        (), doc="GPUs of an existing cluster (mode `existing`; in mode kubeadm the nodes are the inventory)."
    )
    wait_for_pods_ready: WaitForPodsReadySpec = setting(
        default_factory=WaitForPodsReadySpec,
        doc="All-or-nothing admission: a workload whose pods are not all ready in time is evicted and requeued"
        " with backoff (docs/kueue.md, Gang scheduling).",
    )
    topology: TopologySpec | None = setting(
        None,
        doc="Topology-Aware Scheduling: the datacenter levels (block, rack) the GPU nodes sit in; the GPU flavors"
        " then carry a Topology and the stack's training workloads ask for one trainingLevel domain"
        " (docs/kueue.md, Topology).",
    )

    def validate(self, path: str, problems: Problems) -> None:
        teams = join_path(path, "teams")
        for attr, label in (("name", "name"), ("queue_namespace", "namespace")):
            seen: dict[str, int] = {}
            for i, team in enumerate(self.teams):
                value = getattr(team, attr)
                if value in seen:
                    problems.error(f"{teams}[{i}].{label}", f'"{value}" is already used by teams[{seen[value]}]')
                seen.setdefault(value, i)
        # The program creates each team's namespace: it must not be one that exists already or that Kueue runs in.
        taken = {*SYSTEM_NAMESPACES, self.namespace}
        for i, team in enumerate(self.teams):
            if team.queue_namespace in taken:
                key = "namespace" if team.namespace else "name"
                problems.error(f"{teams}[{i}].{key}", f'"{team.queue_namespace}" is a namespace the team cannot own')
        for i, team in enumerate(self.teams):
            for j, quota in enumerate(team.quotas):
                for key, limits in (("borrowingLimit", quota.borrowing_limit), ("lendingLimit", quota.lending_limit)):
                    if limits and self.cohort is None:
                        problems.error(
                            f"{teams}[{i}].quotas[{j}].{key}", "needs kueue.cohort (no cohort, no borrowing)"
                        )
            if team.fair_sharing_weight is not None and not self.fair_sharing:
                problems.warn(f"{teams}[{i}].fairSharingWeight", "has no effect unless kueue.fairSharing is true")
        models: dict[str, int] = {}
        for i, item in enumerate(self.inventory):
            name = flavor_name(item.model)
            if name in models or name == CPU_FLAVOR or not name:
                problems.error(
                    f"{join_path(path, 'inventory')}[{i}].model",
                    f'"{item.model}" gives flavor "{name}", which is already taken',
                )
            models.setdefault(name, i)
        minor = release_minor(self.version)
        if self.topology is not None and minor is not None and minor < TAS_MIN_KUEUE:
            problems.error(
                join_path(path, "topology"),
                f"needs Kueue >= {'.'.join(map(str, TAS_MIN_KUEUE))} (Topology-Aware Scheduling beta, on by default);"
                f" kueue.version is {self.version}",
            )
