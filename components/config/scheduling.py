"""Which taints our nodes carry, and what the platform's controllers must tolerate to have a node to run on.

The rules (docs/scheduling.md):
- Nodes (kubeadm): a dedicated control plane carries the control-plane taint; a GPU node carries the GPU taint,
  except when no node would be free of it: then control planes go without it, because CoreDNS and
  calico-kube-controllers tolerate only the control-plane taint and nothing of ours can give them more.
- Platform controllers (cert-manager, Kueue, KServe, the Trainer, metrics-server, storage, the GPU Operator's own
  Deployment, CPU deployments): nothing while a node is untainted; else the GPU taint when a node carries only
  that; else the control-plane taint (every node a dedicated control plane). Through chart values and our manifests.
- A stack whose every node carries taints of its own (nodes[].taints) is refused.
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
    # A malformed taint is reported by its own check (nodes[].taints); here it counts as blocking.
    return [t for t in taints if checks.taint(t) or checks.parse_taint(t)["effect"] in BLOCKING_EFFECTS]


def gpu_taint_spared(spec: Spec) -> bool:
    """True when no node would be free of the GPU taint: working control planes then go without it."""
    return bool(spec.nodes) and all(_gets_gpu_taint(n) for n in spec.nodes)


def node_taints(spec: Spec, node: NodeSpec) -> list[str]:
    """The taints a kubeadm node registers with (kubeadm nodeRegistration.taints)."""
    taints = _declared_taints(node)
    if node.gpu is None or any(_is_gpu_taint(t) for t in taints):
        return taints
    if gpu_taint_spared(spec) and node.is_control_plane:
        return taints
    return [*taints, GPU_TAINT]


TOLERATION_CHOICES: tuple[tuple[str, ...], ...] = ((), (GPU_TAINT,), (CONTROL_PLANE_TAINT,))
"""What the platform's controllers may tolerate, in order of preference: nothing, the GPU taint (GPU workers),
the control-plane taint (a cluster of dedicated control planes only)."""


def platform_taints(spec: Spec) -> tuple[str, ...] | None:
    """The first choice that leaves the platform a node; None when user taints leave it none."""
    if spec.cluster.mode != "kubeadm" or not spec.nodes:
        return ()
    taints = [set(blocking(node_taints(spec, n))) for n in spec.nodes]
    return next((choice for choice in TOLERATION_CHOICES if any(t <= set(choice) for t in taints)), None)


def platform_tolerations(spec: Spec) -> list[dict[str, str]]:
    """What every platform controller tolerates (through chart values and our manifests)."""
    return [checks.toleration_of(t) for t in platform_taints(spec) or ()]


def validate_scheduling(spec: Spec, problems: Problems) -> None:
    """Refuse a kubeadm stack where cluster housekeeping could run nowhere; where it can, the platform's
    controllers can too (platform_taints ends with the control-plane taint)."""
    if spec.cluster.mode != "kubeadm" or not spec.nodes:
        return
    taints = {n.name: blocking(node_taints(spec, n)) for n in spec.nodes}
    # CoreDNS and calico-kube-controllers tolerate the control-plane taint and nothing else we set.
    if not any(set(t) <= {CONTROL_PLANE_TAINT} for t in taints.values()):
        problems.error(
            "nodes",
            "no node can run CoreDNS and calico-kube-controllers (they tolerate only the control-plane taint):"
            " every node carries taints of its own (nodes[].taints); leave one node without them",
        )
