"""`cluster`: what kind of cluster this is and its cluster-wide addresses and networks."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from . import checks, formats
from .api_vip import ApiVipSpec
from .providers import ClusterDefaults, cluster_defaults
from .schema import Problems, Secret, join_path, setting

CALICO_VERSION = "v3.30.3"
"""The tigera-operator chart installed with cni: calico (its Kubernetes range: support.py)."""


@dataclass(frozen=True)
class ClusterSpec:
    mode: Literal["kubeadm", "existing"] = setting(
        "kubeadm",
        doc="`kubeadm`: bootstrap the nodes over SSH. `existing`: install the platform on a cluster"
        " you already have (GKE/EKS/AKS/...), reached through `kubeconfig`.",
    )
    name: str = setting("mlcluster", doc="Cluster name (kubeadm clusterName, resource names).", check=checks.k8s_name)
    control_plane_endpoint: str | None = setting(
        None,
        doc="Stable address (VIP or load balancer, host[:port]) of the API servers; required with more"
        " than one control-plane node unless `cluster.apiVip` (then optional: a DNS name for the VIP).",
        check=checks.host_port,
        modes=("kubeadm",),
    )
    api_vip: ApiVipSpec | None = setting(
        None,
        doc="An HA API address without a load balancer: keepalived holds this VIP on one control plane and haproxy"
        " on each spreads the API over the healthy ones (docs/bootstrap.md, HA without a load balancer).",
        modes=("kubeadm",),
    )
    api_address: str | None = setting(
        None,
        doc="Where the machine running `pulumi` reaches the API server (host[:port]), when not at"
        " the kubeconfig's own `server:`; required with ssh.bastion, which carries SSH only. E.g. `127.0.0.1:6443`"
        " through `ssh -N -L 6443:<first control plane>:6443 <bastion>` held open during `pulumi up`.",
        check=checks.host_port,
        modes=("kubeadm",),
    )
    pod_cidr: str = setting(
        "10.244.0.0/16", doc="Pod network (kubeadm podSubnet).", check=checks.cidr, modes=("kubeadm",)
    )
    service_cidr: str = setting(
        "10.96.0.0/12", doc="Service network (kubeadm serviceSubnet).", check=checks.cidr, modes=("kubeadm",)
    )
    cni: Literal["calico", "none"] = setting(
        "calico", doc="CNI installed after init (`none`: bring your own).", modes=("kubeadm",)
    )
    kubeconfig: Secret | None = setting(
        None, secret=True, doc="Admin kubeconfig of an existing cluster (mode `existing`; secret).", modes=("existing",)
    )
    provider: Literal["generic", "gke", "eks", "aks"] = setting(
        "generic",
        doc="Managed provider of an existing cluster, for provider-aware defaults (docs/cloud.md).",
        modes=("existing",),
    )
    kubeconfig_from: str | None = setting(
        None,
        doc="Mode `existing`: read the kubeconfig from another stack's output (StackReference"
        " `organization/project/stack`) instead of `kubeconfig`; the two-stack split in docs/cloud.md.",
        check=checks.stack_reference,
        modes=("existing",),
    )
    kubeconfig_output: str = setting(
        "kubeconfig", doc="Name of that stack's kubeconfig output.", check=formats.single_line, modes=("existing",)
    )

    @property
    def defaults(self) -> ClusterDefaults:
        """What this cluster brings with it (driver, CNI, taints, metrics-server...): read by the layers."""
        return cluster_defaults(self.mode, self.provider)

    def validate(self, path: str, problems: Problems) -> None:
        if self.mode == "existing" and self.kubeconfig is None and self.kubeconfig_from is None:
            problems.error(
                join_path(path, "kubeconfig"),
                "is required when mode is existing (or kubeconfigFrom: organization/project/stack)",
            )
        if self.kubeconfig is not None and self.kubeconfig_from is not None:
            problems.error(join_path(path, "kubeconfigFrom"), "is set together with kubeconfig: give only one")
        pod = self.pod_cidr and not checks.cidr(self.pod_cidr)
        svc = self.service_cidr and not checks.cidr(self.service_cidr)
        if pod and svc and ipaddress.ip_network(self.pod_cidr).overlaps(ipaddress.ip_network(self.service_cidr)):
            problems.error(join_path(path, "serviceCidr"), f'"{self.service_cidr}" overlaps podCidr "{self.pod_cidr}"')
