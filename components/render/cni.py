"""Calico (tigera-operator): the default CNI of kubeadm clusters."""

from __future__ import annotations

from ..config.cluster import CALICO_VERSION, ClusterSpec
from .helm import ChartRelease


def cni_release(cluster: ClusterSpec) -> ChartRelease:
    return ChartRelease(
        name="tigera-operator",
        chart="tigera-operator",
        repository="https://docs.tigera.io/calico/charts",
        version=CALICO_VERSION,
        namespace="tigera-operator",
        values={
            "installation": {
                "calicoNetwork": {
                    "ipPools": [
                        {"cidr": cluster.pod_cidr, "encapsulation": "VXLANCrossSubnet", "natOutgoing": "Enabled"}
                    ]
                }
            }
        },
    )
