"""Where each GPU node sits in the datacenter (block, rack), as Kueue's Topology-Aware Scheduling reads it.

The operator's inventory (DCIM, or LLDP neighbours of each server's NIC) names each node's domains in
`nodes[].topology`; `kueue.topology` declares the levels and the node label of each. A node's topology becomes
node labels set by its kubelet at join, so a GPU node of a topology-aware flavor must name every level: Kueue
places topology-aware pods only on nodes with every level's label. Without `kueue.topology` (a stack
that only bootstraps the nodes, whose platform stack declares it) a node's topology is labels under
topology.mlcluster.io/, the defaults that declaration reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import checks
from .kueue import HOSTNAME_LABEL, HOSTNAME_LEVEL, TOPOLOGY_LABEL_PREFIX, TopologySpec, release_minor
from .schema import Problems, join_path

if TYPE_CHECKING:
    from .spec import NodeSpec, Spec


def topology_labels(spec: Spec, node: NodeSpec) -> dict[str, str]:
    """The node labels of a node's topology (label key -> domain), set at join with the node's own labels."""
    topology = spec.kueue.topology
    if topology is None:
        # The two-stack split: the nodes' stack labels them, the platform stack (mode existing) declares the
        # Topology over the same default labels.
        return {TOPOLOGY_LABEL_PREFIX + level: domain for level, domain in node.topology.items()}
    levels = topology.domain_levels()
    return {levels[level]: domain for level, domain in node.topology.items() if level in levels}


def validate_topology(spec: Spec, problems: Problems) -> None:
    """nodes[].topology against kueue.topology: declared levels only, every level on a GPU node, labels the
    kubelet may set on its own node (mode kubeadm), and no node label that a topology level also sets."""
    topology = spec.kueue.topology
    if spec.cluster.mode != "kubeadm":
        return
    if topology is None:
        # Labels only (kueue.topology is declared where Kueue is, e.g. the platform stack of a two-stack split).
        for i, node in enumerate(spec.nodes):
            for level in node.topology:
                where = join_path(f"nodes[{i}].topology", level)
                if level == HOSTNAME_LEVEL:
                    problems.error(where, f"is the node itself: the kubelet sets {HOSTNAME_LABEL}")
                elif checks.k8s_name(level):
                    label = f"{TOPOLOGY_LABEL_PREFIX}<level>"
                    problems.error(where, f"is not a level name such as rack (it becomes the label {label})")
        return
    _validate_kubelet_labels(topology, problems)
    _validate_trainer(spec, problems)
    levels = topology.domain_levels()
    declared = ", ".join(levels) or "none"
    for i, node in enumerate(spec.nodes):
        path = f"nodes[{i}]"
        for level in node.topology:
            if level not in levels:
                why = (
                    f"is the node itself: the kubelet sets {HOSTNAME_LABEL}"
                    if topology.level_labels().get(level) == HOSTNAME_LABEL
                    else f"is not a level of kueue.topology.levels ({declared})"
                )
                problems.error(join_path(f"{path}.topology", level), why)
        for level, label in levels.items():
            if label in node.labels:
                problems.error(
                    join_path(f"{path}.labels", label),
                    f"is the node label of topology level {level}: give it as topology.{level} instead",
                )
        if node.gpu is None or "worker" not in node.roles:
            # Not in a GPU flavor, so not in the Topology's domains: its topology (if any) is only labels.
            continue
        missing = [level for level in levels if level not in node.topology]
        if missing:
            problems.error(
                f"{path}.topology",
                f"misses level(s) {', '.join(missing)}: a GPU node names its domain at every level of"
                f" kueue.topology.levels ({declared}): Kueue places topology-aware pods only on nodes with"
                " every level's label",
            )


def _validate_kubelet_labels(topology: TopologySpec, problems: Problems) -> None:
    """The kubelet labels its node at join (--node-labels): NodeRestriction lets it set only some prefixes. The
    default labels (topology.mlcluster.io/<level>) are allowed, so only a label given in nodeLabels can fail."""
    for level, label in topology.domain_levels().items():
        if level in topology.node_labels and not checks.label_key(label) and not checks.kubelet_may_set_label(label):
            message = checks.kubelet_label_problem(label).replace("has label ", "is ", 1)
            problems.error(f"kueue.topology.nodeLabels.{level}", message)


TRAINJOB_TAS_MIN_TRAINER = (2, 1)
"""Kueue reads a TrainJob's topology request off the JobSet the Trainer's runtime builds, from Trainer 2.1."""


def _validate_trainer(spec: Spec, problems: Problems) -> None:
    training, kubeflow = spec.workloads.training, spec.kubeflow
    if not (spec.kueue.enabled and training.enabled and training.train_job and kubeflow.enabled):
        return
    minor = release_minor(kubeflow.version)
    if minor is not None and minor < TRAINJOB_TAS_MIN_TRAINER:
        problems.error(
            "kubeflow.version",
            f"is {kubeflow.version}: the training TrainJob's topology request (kueue.topology) needs Kubeflow"
            f" Trainer >= {'.'.join(map(str, TRAINJOB_TAS_MIN_TRAINER))}",
        )
