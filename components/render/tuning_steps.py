"""The image-disk and kubelet-tuning node steps, and the batches in which nodes restart, as pure data.

kubelet-tuning runs on day 1 (before join) and on every later change: it rewrites containerd's config and the
kubelet's settings and marks a service for restart only when its own input changed (before join it restarts
containerd itself: nothing runs there yet). kubelet-restart, the second part of each node's kubelet command
(components/render/upgrade.py), restarts what was marked, in batches (control planes first, then workers): batch k
after batch k-1, never all nodes at once.
Day 1 is not batched, so one broken node does not hold the others back from joining.
"""

from __future__ import annotations

import hashlib

from ..config.images import ImagesSpec
from ..config.kubelet import KubeletSpec, effective_kubelet
from ..config.nodes import NodeSpec
from ..config.spec import Spec
from . import yaml_text
from .containerd import containerd_config_toml
from .kubelet_placement import (
    DROP_IN_FILE,
    MANAGED_FLAGS,
    drop_in_configuration,
    kubelet_flags,
    parse_minor,
)
from .shell import NodeStep, rendered_step

IMAGE_DISK_STEP = "image-disk"
TUNING_STEP = "kubelet-tuning"
RESTART_STEP = "kubelet-restart"
PENDING_RESTARTS = "/var/lib/mlcluster/pending-restarts"
RESTORED_MARKER = "/var/lib/mlcluster/kubelet-restarted-after-restore"
"""The etcd restore (etcdSnapshots.restored) this node's kubelet last restarted for."""


def node_tuning(kubelet: KubeletSpec, node: NodeSpec) -> KubeletSpec:
    return effective_kubelet(kubelet, node.kubelet)


def image_disk_step(node: NodeSpec) -> NodeStep | None:
    """Format (only if blank) and mount the node's image disk before containerd writes anything."""
    disk = node.image_disk
    if disk is None:
        return None
    settings = {
        "IMAGE_DISK_DEVICE": disk.device or "",
        "IMAGE_DISK_PATH": disk.path or "",
        "IMAGE_DISK_FILESYSTEM": disk.filesystem,
        "IMAGE_DISK_MOUNT": disk.mount_point,
    }
    title = f"Image disk {disk.device} on {disk.mount_point}" if disk.device else f"Image directory {disk.path}"
    return rendered_step(IMAGE_DISK_STEP, title, settings)


def tuning_step(kubelet: KubeletSpec, kubernetes_version: str, images: ImagesSpec, node: NodeSpec) -> NodeStep:
    tuning = node_tuning(kubelet, node)
    minor = parse_minor(kubernetes_version)
    drop_in = drop_in_configuration(tuning, minor)
    settings = {
        "CONTAINERD_CONFIG_1_6": containerd_config_toml(kubelet, images, "1.6", node),
        "CONTAINERD_CONFIG_1_7": containerd_config_toml(kubelet, images, "1.7", node),
        "CONTAINERD_CONFIG_2": containerd_config_toml(kubelet, images, "2", node),
        "CONTAINERD_EXPECTED": tuning.containerd_version,
        "PULL_DEADLINE": tuning.image_pull_progress_deadline,
        "KUBELET_FLAGS": " ".join(kubelet_flags(tuning, kubelet, minor)),
        "MANAGED_FLAGS": " ".join(MANAGED_FLAGS),
        "KUBELET_DROP_IN_FILE": DROP_IN_FILE,
        "KUBELET_DROP_IN": yaml_text.dump(drop_in) if drop_in else "",
        "PENDING_RESTARTS": PENDING_RESTARTS,
    }
    return rendered_step(TUNING_STEP, "Tune containerd and the kubelet for ML images (mark what changed)", settings)


def restart_step(spec: Spec, node: NodeSpec) -> NodeStep:
    """Restart what this node's tuning marked; its text changes with the tuning, so it runs again after it."""
    tuning = tuning_step(spec.kubelet, spec.kubernetes_version, spec.images, node).settings
    digest = hashlib.sha256("\0".join(f"{k}={v}" for k, v in sorted(tuning.items())).encode()).hexdigest()[:16]
    settings = {
        "TUNING_DIGEST": digest,
        "PENDING_RESTARTS": PENDING_RESTARTS,
        "CPU_MANAGER_POLICY": node_tuning(spec.kubelet, node).cpu_manager_policy,
    }
    restored = spec.etcd_snapshots.restored
    if restored:
        # Only when set: a stack that never restored keeps its kubelet commands' text (no re-run on upgrade).
        settings |= {"RESTORED": restored, "RESTORED_MARKER": RESTORED_MARKER}
    return rendered_step(
        RESTART_STEP, "Restart containerd/kubelet where tuning changed, in this node's batch", settings
    )


def restart_batches(
    kubelet: KubeletSpec, control_planes: tuple[NodeSpec, ...], workers: tuple[NodeSpec, ...]
) -> list[list[NodeSpec]]:
    """Nodes in the order their tuning may restart services: control planes, then workers, in batches."""
    restart = kubelet.restart
    batches: list[list[NodeSpec]] = []
    for group, size in (
        (list(control_planes), restart.max_unavailable_control_planes),
        (list(workers), restart.worker_batch_size(len(workers))),
    ):
        batches += [group[i : i + size] for i in range(0, len(group), size)]
    return batches
