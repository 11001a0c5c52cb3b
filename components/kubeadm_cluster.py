"""KubeadmCluster: bare hosts to a Kubernetes cluster over SSH, and the provider for the platform layers.

Order: every node prepares in parallel; the first control plane inits; further control planes join one
at a time (etcd membership changes are safest serialised); workers join in parallel once the control
planes are in. Workers mint their own short-lived token when their join runs (stdin: the admin
kubeconfig), so a join retried after a failure, or a node added months later, never reads an expired one
from the state. Control planes need a certificate key only a control plane can upload: one join-credentials
step on the first control plane serves them all.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pulumi_command import remote

from .certificates import Certificates
from .cluster_care import ClusterCare
from .config.spec import NodeSpec, Spec
from .control_plane import FirstControlPlane
from .gpu_preflight import GpuPreflight, report_undeclared_gpus
from .node_command import step_command
from .node_join import NodeJoin, join_node
from .node_prep import prepare_node
from .render.gpu_operator import looks_in_preparation
from .render.kubeconfig import kubeconfig_reaching
from .render.kubelet_placement import spec_warnings
from .render.node_steps import join_credentials_step


def cluster_identifier(spec: Spec) -> str:
    """Names the cluster, not how it is reached: changes only when it is another cluster (a new name)."""
    return f"kubeadm/{spec.cluster.name}"


class KubeadmCluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(
        self, spec: Spec, preflight: GpuPreflight | None = None, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        """`preflight`: the GPU preflight, each GPU node's first command (it installs the script library its
        preparation sources); every other node's preparation installs it and starts with a look for GPUs."""
        super().__init__("mlcluster:kubeadm_cluster:KubeadmCluster", spec.cluster.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        for warning in spec_warnings(spec):
            pulumi.log.warn(f"mlcluster:{warning.path}: {warning.message}", resource=self)
        first_steps = preflight.commands if preflight is not None else {}
        prepared: dict[str, remote.Command] = {}
        for node in spec.nodes:
            first_step = first_steps.get(node.name)
            prepared[node.name] = prepare_node(spec, node, self, after=[first_step] if first_step else [])
            if looks_in_preparation(spec, node):
                report_undeclared_gpus(spec, node, prepared[node.name])

        first, *other_control_planes = spec.control_planes
        control_plane = FirstControlPlane(spec, first, prepared[first.name], opts=child)

        last_control_plane_join: pulumi.Resource = control_plane.init
        joins: dict[str, NodeJoin] = {}

        def join(node: NodeSpec, credentials: remote.Command) -> NodeJoin:
            joins[node.name] = join_node(
                spec,
                node,
                first,
                parent=self,
                prepared=prepared[node.name],
                credentials=credentials,
                join_after=[last_control_plane_join],
            )
            return joins[node.name]

        if other_control_planes:
            control_plane_credentials = step_command(
                f"{first.name}-join-credentials",
                spec,
                first,
                join_credentials_step(other_control_planes),
                parent=self,
                depends_on=[control_plane.init],
            )
        for node in other_control_planes:
            last_control_plane_join = join(node, control_plane_credentials).join
        # Certificates on each control plane once it is in; the admin kubeconfig is read after the first one's
        # (a renewal renews admin.conf there), and workers mint their join tokens with it.
        self.certificates = Certificates(spec, self._members(control_plane, joins), opts=child)
        control_plane.read_kubeconfig(self.certificates.steps[first.name], self.certificates.renew_before)
        for node in spec.workers:
            join(node, control_plane.kubeconfig_step)

        # Upgrades, each node's kubelet command (day-2 tuning restarts batch by batch) and etcd snapshots, once
        # every node is in the cluster.
        ClusterCare(spec, self._members(control_plane, joins), opts=child)

        self.kubeconfig = control_plane.kubeconfig
        api_address = spec.cluster.api_address
        provider_kubeconfig: pulumi.Output[str] = self.kubeconfig
        if api_address:
            # apply keeps the secret mark of the kubeconfig it reads.
            provider_kubeconfig = self.kubeconfig.apply(lambda text: kubeconfig_reaching(text, api_address))
        self.provider = k8s.Provider(
            "kubernetes",
            kubeconfig=provider_kubeconfig,
            # Stable for the cluster's life: a kubeconfig that is unknown in a preview (its step changed)
            # then does not replace the provider and every resource on it (pulumi-kubernetes DiffConfig).
            cluster_identifier=cluster_identifier(spec),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[j.join for j in joins.values()]),
        )
        self.register_outputs({"kubeconfig": self.kubeconfig})

    @staticmethod
    def _members(control_plane: FirstControlPlane, joins: dict[str, NodeJoin]) -> dict[str, pulumi.Resource]:
        """Each node's resource after which it is in the cluster."""
        return {control_plane.node.name: control_plane.init, **{n: j.join for n, j in joins.items()}}
