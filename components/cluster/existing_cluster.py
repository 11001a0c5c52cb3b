"""ExistingCluster: a cluster someone else runs (GKE/EKS/AKS/...), reached through a secret kubeconfig.

The kubeconfig comes from this stack's secret config (`cluster.kubeconfig`) or from another stack's output
(`cluster.kubeconfigFrom`, a StackReference): the two-stack split, where the nodes' stack and the platform's
stack are reviewed and applied separately.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ..config.spec import Spec


class ExistingCluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, spec: Spec, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("mlcluster:existing_cluster:ExistingCluster", spec.cluster.name, None, opts)
        cluster = spec.cluster
        if cluster.kubeconfig_from is not None:
            source = pulumi.StackReference(cluster.kubeconfig_from, opts=pulumi.ResourceOptions(parent=self))
            # Secret whatever the other stack did: a kubeconfig is a credential.
            self.kubeconfig = pulumi.Output.secret(source.require_output(cluster.kubeconfig_output))
        else:
            assert cluster.kubeconfig is not None, "validation requires cluster.kubeconfig or kubeconfigFrom"
            self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig.reveal())
        self.provider = k8s.Provider("kubernetes", kubeconfig=self.kubeconfig, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"kubeconfig": self.kubeconfig})
