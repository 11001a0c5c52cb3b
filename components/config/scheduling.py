"""Which taints our nodes carry, and what the platform's controllers must tolerate to have a node to run on.

The rules (docs/scheduling.md):
- Nodes (kubeadm): a dedicated control plane carries the control-plane taint; a GPU node carries the GPU taint,
  except when no node would be free of it: then control planes that also work (`roles: [control-plane, worker]`,
  the one-node lab) stay untainted, because CoreDNS and calico-kube-controllers tolerate only the control-plane
  taint and nothing of ours can give them more.
- Platform controllers (cert-manager, Kueue, KServe, the Trainer, metrics-server, storage, the GPU Operator's own
  Deployment, CPU deployments): when no node is free of taints, they tolerate the GPU taint, through their charts'
  values and our manifests. The control-plane taint is never tolerated for them: a stack where every node is a
  dedicated control plane is refused.
- Existing clusters: we do not see the nodes; a node pool without taints is assumed (docs/scheduling.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import checks
from .schema import Problems

if TYPE_CHECKING:
    from .spec import NodeSpec, Spec

CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane:NoSchedule"
GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
"""PreferNoSchedule only steers; these two keep a pod that does not tolerate them off the node."""


def _declared_taints(node: NodeSpec) -> list[str]:
    taints = list(node.taints)
    if node.is_control_plane and "worker" not in node.roles and CONTROL_PLANE_TAINT not in taints:
        taints.append(CONTROL_PLANE_TAINT)
    return taints


def _is_gpu_taint(taint: str) -> bool:
    return taint.startswith("nvidia.com/gpu")


def _gets_gpu_taint(node: NodeSpec) -> bool:
    return node.gpu is not None or any(_is_gpu_taint(t) for t in node.taints)


def blocking(taints: list[str]) -> list[str]:
    return [t for t in taints if checks.parse_taint(t)["effect"] in BLOCKING_EFFECTS]


def gpu_taint_spared(spec: Spec) -> bool:
    """True when no node would be free of the GPU taint: working control planes then go without it."""
    return bool(spec.nodes) and all(_gets_gpu_taint(n) for n in spec.nodes)


def node_taints(spec: Spec, node: NodeSpec) -> list[str]:
    """The taints a kubeadm node registers with (kubeadm nodeRegistration.taints)."""
    taints = _declared_taints(node)
    if node.gpu is None or any(_is_gpu_taint(t) for t in taints):
        return taints
    if gpu_taint_spared(spec) and node.is_control_plane and "worker" in node.roles:
        return taints
    return [*taints, GPU_TAINT]


def platform_tolerations(spec: Spec) -> list[dict[str, str]]:
    """What every platform controller tolerates: nothing while a node is untainted, else the GPU taint."""
    if spec.cluster.mode != "kubeadm" or not spec.nodes:
        return []
    if any(not blocking(node_taints(spec, n)) for n in spec.nodes):
        return []
    return [checks.toleration_of(GPU_TAINT)]


def _needs_a_worker(spec: Spec) -> bool:
    """Whether the stack installs anything that tolerates no control-plane taint (the GPU Operator's pods do)."""
    layers = (spec.kueue, spec.kserve, spec.kubeflow, spec.storage)
    return any(layer.enabled for layer in layers) or spec.workloads.any_enabled


def validate_scheduling(spec: Spec, problems: Problems) -> None:
    """Refuse a kubeadm stack where cluster housekeeping or the platform's controllers could run nowhere."""
    if spec.cluster.mode != "kubeadm" or not spec.nodes:
        return
    taints = {n.name: blocking(node_taints(spec, n)) for n in spec.nodes}
    # CoreDNS and calico-kube-controllers tolerate the control-plane taint and nothing else we set.
    if not any(set(t) <= {CONTROL_PLANE_TAINT} for t in taints.values()):
        problems.error(
            "nodes",
            "no node can run CoreDNS and calico-kube-controllers (they tolerate only the control-plane taint):"
            " give a control-plane node roles [control-plane, worker] (it then stays free of the GPU taint),"
            " or add a node without gpu and without taints",
        )
        return
    tolerated = {GPU_TAINT} if platform_tolerations(spec) else set()
    if _needs_a_worker(spec) and not any(set(t) <= tolerated for t in taints.values()):
        problems.error(
            "nodes",
            "no node can run the platform's controllers (cert-manager, Kueue, KServe, the Trainer, ...): every"
            " node is a dedicated control plane or carries its own taints; give one node the worker role"
            " (roles [control-plane, worker]) or add a worker without taints",
        )
