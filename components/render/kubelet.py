"""KubeletConfiguration (kubelet.config.k8s.io/v1beta1) from the kubelet tuning spec."""

from __future__ import annotations

from typing import Any

from ..config.spec import KubeletSpec

API_VERSION = "kubelet.config.k8s.io/v1beta1"


def kubelet_configuration(kubelet: KubeletSpec) -> dict[str, Any]:
    """The cluster-wide KubeletConfiguration that kubeadm init stores and every node's kubelet reads."""
    config: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
        "imageGCHighThresholdPercent": kubelet.image_gc_high_threshold_percent,
        "imageGCLowThresholdPercent": kubelet.image_gc_low_threshold_percent,
    }
    if kubelet.image_maximum_gc_age:
        config["imageMaximumGCAge"] = kubelet.image_maximum_gc_age
    if kubelet.image_minimum_gc_age:
        config["imageMinimumGCAge"] = kubelet.image_minimum_gc_age
    if kubelet.max_parallel_image_pulls is not None:
        config["serializeImagePulls"] = False
        config["maxParallelImagePulls"] = kubelet.max_parallel_image_pulls
    if kubelet.eviction_hard:
        config["evictionHard"] = dict(kubelet.eviction_hard)
    if kubelet.system_reserved:
        config["systemReserved"] = dict(kubelet.system_reserved)
    if kubelet.kube_reserved:
        config["kubeReserved"] = dict(kubelet.kube_reserved)
    if kubelet.cpu_manager_policy != "none":
        config["cpuManagerPolicy"] = kubelet.cpu_manager_policy
    if kubelet.topology_manager_policy != "none":
        config["topologyManagerPolicy"] = kubelet.topology_manager_policy
    return config
