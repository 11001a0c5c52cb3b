"""Where a controller's pods can run: taints vs tolerations, nodeSelector and required node affinity vs labels.

Pure data in, data out, the way kube-scheduler filters nodes (TaintToleration, NodeAffinity); preferred terms,
resources and topology spread are left out: they decide among nodes, not whether there is one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import checks
from ..config.derived import BLOCKING_EFFECTS, GPU_TAINT, fault_mode, node_taints
from ..config.spec import Spec
from .kubeadm import registered_labels

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


def _kubelet_labels(name: str) -> dict[str, str]:
    """Labels every node gets from the kubelet itself (amd64 assumed: the stack does not say)."""
    return {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}


ADDED_ON_GPU_NODES = {
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "nvidia.com/gpu.present": "true",
}
"""Labels Node Feature Discovery (PCI vendor 10de) and the GPU Operator put on GPU nodes once they run."""

ADDED_BY_NVSENTINEL = {
    "nvsentinel.dgxc.nvidia.com/dcgm.version": "4.x",
    "nvsentinel.dgxc.nvidia.com/driver.installed": "true",
    "nvsentinel.dgxc.nvidia.com/kata.enabled": "false",
}
"""Labels NVSentinel's labeler puts on GPU nodes (GPU fault handling on): the GPU Operator's DCGM is 4.x, its
driver is installed, and mlcluster runs no Kata containers."""

OTHER_HOSTS_VARIANTS = {
    "gpu-health-monitor-dcgm-3.x": "gpu-health-monitor-dcgm-4.x",
    "syslog-health-monitor-kata": "syslog-health-monitor-regular",
}
"""NVSentinel DaemonSets for hosts a stack does not have (DCGM 3.x, Kata containers) -> the sibling that runs on
ours instead: a variant without a node is expected when its sibling has nodes."""

CONTROLLER_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob")


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...] = field(default=())


def stack_nodes(spec: Spec) -> list[Node]:
    """The nodes a stack's pods meet: declared (kubeadm) or, for an existing cluster, the pools assumed there."""
    if spec.cluster.mode == "kubeadm":
        nodes = []
        for node in spec.nodes:
            labels = {**_kubelet_labels(node.name), **registered_labels(spec.kueue, node)}
            if node.is_control_plane:
                labels[CONTROL_PLANE_LABEL] = ""
            if node.gpu is not None:
                labels.update(ADDED_ON_GPU_NODES)
                if fault_mode(spec) != "off":
                    labels.update(ADDED_BY_NVSENTINEL)
            nodes.append(Node(node.name, labels, tuple(checks.parse_taint(t) for t in node_taints(spec.nodes, node))))
        return nodes
    defaults = spec.cluster.defaults
    gpu_labels = {**_kubelet_labels("gpu-pool"), **ADDED_ON_GPU_NODES}
    if defaults.gpu_node_label:
        gpu_labels[defaults.gpu_node_label] = "gpu"
    gpu_taints = (checks.parse_taint(GPU_TAINT),) if defaults.gpu_taint else ()
    # A managed cluster's system pool: untainted (docs/scheduling.md states the assumption).
    return [Node("system-pool", _kubelet_labels("system-pool")), Node("gpu-pool", gpu_labels, gpu_taints)]


def pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod template's spec of a workload controller, or None for anything else."""
    kind = obj.get("kind")
    if kind not in CONTROLLER_KINDS:
        return None
    spec = obj.get("spec") or {}
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    return ((spec.get("template") or {}).get("spec")) or {}


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint["effect"]:
            continue
        operator = toleration.get("operator") or "Equal"
        key = toleration.get("key") or ""
        if operator == "Exists" and (not key or key == taint["key"]):
            return True
        if operator == "Equal" and key == taint["key"] and (toleration.get("value") or "") == taint.get("value", ""):
            return True
    return False


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], list(expression.get("values") or [])
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and labels[key].isdigit() and values and str(values[0]).isdigit():
        return int(labels[key]) > int(values[0]) if operator == "Gt" else int(labels[key]) < int(values[0])
    return False


def _term_matches(term: Mapping[str, Any], node: Node) -> bool:
    expressions = list(term.get("matchExpressions") or [])
    fields = [{**f, "key": "metadata.name"} for f in term.get("matchFields") or []]
    if not expressions and not fields:
        return False  # an empty term matches no node
    by_field = {"metadata.name": node.name}
    return all(_expression_matches(e, node.labels) for e in expressions) and all(
        _expression_matches(f, by_field) for f in fields
    )


def refusal(spec: Mapping[str, Any], node: Node) -> str | None:
    """Why the scheduler would not place this pod spec on the node, or None when it fits."""
    for taint in node.taints:
        if taint["effect"] in BLOCKING_EFFECTS and not tolerates(spec.get("tolerations") or [], taint):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"taint {taint['key']}{value}:{taint['effect']} not tolerated"
    for key, value in (spec.get("nodeSelector") or {}).items():
        if node.labels.get(key) != value:
            return f"nodeSelector {key}={value} not on the node"
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is not None and not any(_term_matches(t, node) for t in required.get("nodeSelectorTerms") or []):
        return "no required nodeAffinity term matches"
    return None


def controller_name(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{obj['kind']}/{namespace + '/' if namespace else ''}{metadata.get('name')}"


def placement(objects: Iterable[Mapping[str, Any]], nodes: Sequence[Node]) -> dict[str, list[str]]:
    """Each workload controller -> the nodes its pods can run on (empty: nowhere)."""
    table: dict[str, list[str]] = {}
    for obj in objects:
        spec = pod_spec(obj)
        if spec is not None:
            table[controller_name(obj)] = [n.name for n in nodes if refusal(spec, n) is None]
    return table
