"""KubeadmCluster: bare hosts to a Kubernetes cluster over SSH, and the provider for the platform layers.

Order: every node prepares in parallel; the first control plane inits; further control planes join one
at a time (etcd membership changes are safest serialised); workers join in parallel once the control
planes are in. Join credentials are created on the first control plane one after another, so that host
sees one SSH session at a time however many workers join.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from .config.spec import Spec
from .control_plane import FirstControlPlane
from .node_join import NodeJoin
from .node_prep import NodePrep
from .render.kubelet_placement import spec_warnings
from .render.tuning_steps import restart_batches


class KubeadmCluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, spec: Spec, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("mlcluster:kubeadm_cluster:KubeadmCluster", spec.cluster.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        for warning in spec_warnings(spec):
            pulumi.log.warn(f"mlcluster:{warning.path}: {warning.message}", resource=self)
        # Tuning restarts containerd/kubelet: batch k waits for batch k-1, never every node at once.
        prepared: dict[str, NodePrep] = {}
        previous_batch: list[pulumi.Resource] = []
        for batch in restart_batches(spec):
            for node in batch:
                prepared[node.name] = NodePrep(spec, node, opts=child, restart_after=previous_batch)
            previous_batch = [prepared[node.name].tuning for node in batch]

        first, *other_control_planes = spec.control_planes
        control_plane = FirstControlPlane(spec, first, prepared[first.name].ready, opts=child)

        last_credentials: pulumi.Resource = control_plane.init
        last_control_plane_join: pulumi.Resource = control_plane.init
        joins: dict[str, NodeJoin] = {}
        for node in [*other_control_planes, *spec.workers]:
            join = NodeJoin(
                spec,
                node,
                first,
                prepared=prepared[node.name].ready,
                credentials_after=[last_credentials],
                join_after=[last_control_plane_join],
                opts=child,
            )
            joins[node.name] = join
            last_credentials = join.credentials
            if node.is_control_plane:
                last_control_plane_join = join.join

        self.kubeconfig = control_plane.kubeconfig
        self.provider = k8s.Provider(
            "kubernetes",
            kubeconfig=self.kubeconfig,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[j.join for j in joins.values()]),
        )
        self.register_outputs({"kubeconfig": self.kubeconfig})
