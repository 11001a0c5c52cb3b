"""ExistingCluster: a cluster someone else runs (GKE/EKS/AKS/...), reached through a secret kubeconfig."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from .config.spec import Spec


class ExistingCluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, spec: Spec, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("mlcluster:existing_cluster:ExistingCluster", spec.cluster.name, None, opts)
        assert spec.cluster.kubeconfig is not None, "validation requires cluster.kubeconfig in mode existing"
        self.kubeconfig = pulumi.Output.secret(spec.cluster.kubeconfig.reveal())
        self.provider = k8s.Provider("kubernetes", kubeconfig=self.kubeconfig, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"kubeconfig": self.kubeconfig})
