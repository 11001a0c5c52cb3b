"""Calico (tigera-operator): the default CNI of kubeadm clusters."""

from __future__ import annotations

from ..config.cluster import ClusterSpec
from .helm import ChartRelease

CALICO_VERSION = "v3.30.3"

CALICO_TESTED_KUBERNETES: dict[str, tuple[str, ...]] = {
    "v3.30": ("1.31", "1.32", "1.33"),
    "v3.31": ("1.32", "1.33", "1.34"),
}
"""The Kubernetes minors each Calico release is tested against ("Supported versions" in the system requirements of
that release's documentation; other versions "may work", Calico says, but are not tested)."""


def calico_untested_problem(kubernetes_version: str) -> str | None:
    """Why the pinned Calico is not tested with `kubernetes_version`'s minor, or None."""
    minor = ".".join(kubernetes_version.split(".")[:2])
    release = ".".join(CALICO_VERSION.split(".")[:2])
    tested = CALICO_TESTED_KUBERNETES[release]
    if minor in tested:
        return None
    newer = [r for r, minors in CALICO_TESTED_KUBERNETES.items() if minor in minors]
    instead = (
        f" Calico {newer[-1]} is tested against {minor}, but mlcluster does not pin it yet (its chart is not among the"
        " charts mlcluster renders and checks)."
        if newer
        else ""
    )
    return (
        f"{minor} is not among the Kubernetes versions Calico {CALICO_VERSION}, the CNI mlcluster installs, is tested"
        f" against ({', '.join(tested)}; Calico's system requirements): it may work, untested.{instead} To bring"
        " your own CNI instead, set cluster.cni: none"
    )


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
