"""KubeletConfiguration (kubelet.config.k8s.io/v1beta1) from the kubelet tuning spec."""

from __future__ import annotations

from typing import Any

from ..config.kubelet import KubeletSpec
from .kubelet_placement import Minor, configuration_fields

API_VERSION = "kubelet.config.k8s.io/v1beta1"


def kubelet_configuration(kubelet: KubeletSpec, minor: Minor) -> dict[str, Any]:
    """The cluster-wide KubeletConfiguration that kubeadm init stores and every node's kubelet reads (day 1).

    Only fields this Kubernetes minor has are written; kubelet_placement says where the rest goes."""
    return {
        "apiVersion": API_VERSION,
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
        **configuration_fields(kubelet, minor),
    }
