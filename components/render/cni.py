"""Calico (tigera-operator): the default CNI of kubeadm clusters."""

from __future__ import annotations

from typing import Any

from ..config.cluster import CALICO_VERSION, ClusterSpec
from .helm import ChartRelease


def cni_release(cluster: ClusterSpec) -> ChartRelease:
    """With cluster.apiVip, Calico takes each node's address from its Node object (the kubelet's InternalIP, pinned
    to the node's own address): its default `firstFound` can pick the keepalived VIP on the control plane that holds
    it (projectcalico/calico #5094, #5346). nodeAddressAutodetectionV4.kubernetes: NodeInternalIP is the
    Installation field of the pinned operator (charts/tigera-operator/v3.30.3 operator.tigera.io_installations CRD)."""
    network: dict[str, Any] = {
        "ipPools": [{"cidr": cluster.pod_cidr, "encapsulation": "VXLANCrossSubnet", "natOutgoing": "Enabled"}]
    }
    if cluster.api_vip is not None:
        network["nodeAddressAutodetectionV4"] = {"kubernetes": "NodeInternalIP"}
    return ChartRelease(
        name="tigera-operator",
        chart="tigera-operator",
        repository="https://docs.tigera.io/calico/charts",
        version=CALICO_VERSION,
        namespace="tigera-operator",
        values={"installation": {"calicoNetwork": network}},
    )
