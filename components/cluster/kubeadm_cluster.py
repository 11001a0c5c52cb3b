"""KubeadmCluster: bare hosts to a Kubernetes cluster over SSH, and the provider for the platform layers.

Order: every node prepares in parallel (once it has its copy of the scripts); the first control plane inits;
further control planes join one at a time (etcd membership changes are safest serialised); workers join in
parallel once the control planes are in. One join-credentials step on the first control plane serves every
join (token and CA hash; a certificate key while control planes join, which only a control plane can upload),
minted again whenever a join could otherwise read expired ones (components/cluster/join_credentials.py).
"""

from __future__ import annotations

from functools import partial

import pulumi
import pulumi_kubernetes as k8s
from pulumi_command import remote

from ..config.cluster import ClusterSpec
from ..config.derived import installed_components, topology_labels
from ..config.nodes import NodeSpec
from ..config.spec import Spec
from ..config.support import Installed, upgrade_progress
from ..render.control_planes import OUTPUT as CONTROL_PLANES_OUTPUT
from ..render.control_planes import (
    WORKERS_OUTPUT,
    control_plane_change_problem,
    promoted_worker_problem,
    recorded_names,
    recorded_workers,
)
from ..render.gpu_operator import looks_in_preparation
from ..render.join_credentials import OUTPUT as JOIN_CREDENTIALS_OUTPUT
from ..render.kubeconfig import kubeconfig_reaching
from ..render.kubelet_placement import spec_warnings
from ..render.node_metadata import STEP as NODE_METADATA_STEP
from ..render.node_metadata import node_metadata_step
from ..render.seed import SEED_STEP, seed_node, seed_step
from ..render.upgrade import VERSION_OUTPUT, version_change_problem
from ..warnings import warn
from .api_vip import ApiVip
from .certificates import Certificates
from .cluster_care import ClusterCare
from .control_plane import FirstControlPlane
from .gpu_preflight import GpuPreflight, report_undeclared_gpus
from .join_credentials import join_credentials, recorded_once_joined
from .node_command import step_command
from .node_join import NodeJoin, join_node
from .node_prep import prepare_node
from .node_scripts import NodeScripts

PATCH_FORCE_ANNOTATION = "pulumi.com/patchForce"


def cluster_identifier(cluster: ClusterSpec) -> str:
    """Names the cluster, not how it is reached: changes only when it is another cluster (a new name)."""
    return f"kubeadm/{cluster.name}"


class KubeadmCluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(
        self,
        spec: Spec,
        scripts: NodeScripts,
        preflight: GpuPreflight | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`scripts`: each node's copy of the script files, which its first command waits for. `preflight`: the
        GPU preflight, which a GPU node's preparation waits for (a node that lacks its GPUs is left as it was);
        every other node's preparation starts with a look for GPUs."""
        super().__init__("mlcluster:kubeadm_cluster:KubeadmCluster", spec.cluster.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        for warning in spec_warnings(spec):
            warn(warning.path, warning.message, resource=self)
        # This stack's last deployment (none before the first): the control planes, the Kubernetes version, the
        # certificates' dates and the join credentials' record.
        own_stack = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
        previous = pulumi.StackReference(own_stack, opts=child)
        self.previous = previous
        # Removing, demoting or reordering the control planes, and a version the cluster cannot go to, are refused
        # before any node's preparation is decided: in a preview, and as much in `up --skip-preview` or the
        # Automation API (the engine's own `protect` would stop only after the deletes that depend on it; the
        # upgrade's preflight only after the preparations switched their package repositories).
        control_planes_checked = pulumi.Output.all(
            previous.get_output(CONTROL_PLANES_OUTPUT), previous.get_output(WORKERS_OUTPUT)
        ).apply(partial(_refuse_control_plane_change, spec))
        version_checked = previous.get_output(VERSION_OUTPUT).apply(
            partial(_refuse_version_change, spec.kubernetes_version, installed_components(spec))
        )
        refusals_passed = pulumi.Output.all(control_planes_checked, version_checked)
        preflights = preflight.commands if preflight is not None else {}
        # An air-gapped site: the seed checks and serves the bundle before any node installs from it (a refused
        # change fails it before anything runs on the seed, as it does a preparation).
        seed = seed_node(spec.air_gap, spec.nodes)
        served: list[pulumi.Resource] = []
        if seed is not None:
            serve = seed_step(spec.air_gap, seed)
            served.append(
                step_command(
                    f"{seed.name}-{SEED_STEP}",
                    spec,
                    seed,
                    serve,
                    parent=self,
                    depends_on=[scripts.copies[seed.name]],
                    rendered=refusals_passed.apply(lambda _: serve),
                )
            )
        prepared: dict[str, remote.Command] = {}
        for node in spec.nodes:
            first_step = preflights.get(node.name) or scripts.copies[node.name]
            prepared[node.name] = prepare_node(spec, node, self, after=[first_step, *served], gate=refusals_passed)
            if looks_in_preparation(spec.gpu_operator, spec.cluster, node):
                report_undeclared_gpus(spec.nodes, spec.gpu_operator, spec.network, node, prepared[node.name])

        if spec.cluster.api_vip is not None:
            # A control plane is ready for init/join once it also serves the VIP.
            prepared.update(ApiVip(spec, prepared, opts=child).steps)
        first, *other_control_planes = spec.control_planes
        control_plane = FirstControlPlane(spec, first, prepared[first.name], control_planes_checked, opts=child)

        last_control_plane_join: pulumi.Resource = control_plane.init
        joins: dict[str, NodeJoin] = {}
        credentials, join_window = join_credentials(
            spec, first, parent=self, previous=previous, after=[control_plane.init]
        )

        def join(node: NodeSpec) -> NodeJoin:
            assert credentials is not None, "a node joins, so there are credentials"
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

        for node in other_control_planes:
            last_control_plane_join = join(node).join
        # Certificates on each control plane once it is in; the admin kubeconfig is read after the first one's
        # (a renewal renews admin.conf there).
        self.certificates = Certificates(spec, self._members(control_plane, joins), previous, opts=child)
        control_plane.read_kubeconfig(self.certificates.steps[first.name], self.certificates.renew_before)
        for node in spec.workers:
            join(node)
        self.join_record = recorded_once_joined(join_window, [j.join for j in joins.values()])
        self.workers_record = pulumi.Output.all(
            control_planes_checked, *(joins[n.name].join for n in spec.workers if n.name in joins)
        ).apply(lambda _: recorded_workers(spec))

        # Upgrades, each node's kubelet command (day-2 tuning restarts batch by batch) and etcd snapshots, once
        # every node is in the cluster.
        care = ClusterCare(spec, self._members(control_plane, joins), opts=child)
        # The version every node runs, exported once the last upgrade stage succeeded (a failed up keeps the one
        # before).
        self.version_record = pulumi.Output.all(version_checked, *(step.id for step in care.upgraded)).apply(
            lambda v: v[0]
        )
        # Recorded once every control plane is in (a failed up keeps the previous record).
        control_plane_steps = [control_plane.init, *(joins[n.name].join for n in other_control_planes)]
        self.control_planes_record = pulumi.Output.all(
            control_planes_checked, *(step.id for step in control_plane_steps)
        ).apply(lambda values: values[0])

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
            cluster_identifier=cluster_identifier(spec.cluster),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[j.join for j in joins.values()]),
        )
        self.topology_labels = self._reconcile_topology_labels(spec, self._members(control_plane, joins))
        # Labels and taints on day 2: a join registers them once (components/render/node_metadata.py). After every
        # join, through the provider that waits for them all: one dependency edge, not one per node.
        self.node_metadata = step_command(
            f"{first.name}-{NODE_METADATA_STEP}",
            spec,
            first,
            node_metadata_step(spec.nodes, spec.kueue),
            parent=self,
            depends_on=[control_plane.init, self.provider],
        )
        self.register_outputs({"kubeconfig": self.kubeconfig, JOIN_CREDENTIALS_OUTPUT: self.join_record})

    def _reconcile_topology_labels(
        self, spec: Spec, members: dict[str, pulumi.Resource]
    ) -> dict[str, k8s.core.v1.NodePatch]:
        """Each node's topology labels through the API once it is in: the kubelet applies --node-labels only when
        its Node registers, so a server moved to another rack, or a topology declared after the join, reaches the
        Node only this way. Forced: the kubelet co-owns the values it registered, and a changed rack is ours to
        set (server-side apply would otherwise refuse it as a conflict with the kubelet's field manager)."""
        patches = {}
        for node in spec.nodes:
            labels = topology_labels(spec.kueue.topology, node)
            if not labels or node.gone:
                continue
            patches[node.name] = k8s.core.v1.NodePatch(
                f"{node.name}-topology-labels",
                metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                    name=node.name, labels=labels, annotations={PATCH_FORCE_ANNOTATION: "true"}
                ),
                opts=pulumi.ResourceOptions(parent=self, provider=self.provider, depends_on=[members[node.name]]),
            )
        return patches

    @staticmethod
    def _members(control_plane: FirstControlPlane, joins: dict[str, NodeJoin]) -> dict[str, pulumi.Resource]:
        """Each node's resource after which it is in the cluster."""
        return {control_plane.node.name: control_plane.init, **{n: j.join for n, j in joins.items()}}


def _refuse_control_plane_change(spec: Spec, recorded: list[object]) -> list[str]:
    control_planes, workers = recorded
    problem = control_plane_change_problem(control_planes, spec.control_planes, spec.nodes) or promoted_worker_problem(
        workers, spec.nodes
    )
    if problem is not None:
        raise pulumi.RunError(problem)
    return recorded_names(spec.control_planes)


def _refuse_version_change(wanted: str, installed: list[Installed], recorded: object) -> str:
    problem = version_change_problem(recorded, wanted)
    if problem is not None:
        raise pulumi.RunError(problem)
    progress = upgrade_progress(recorded, wanted, installed) if isinstance(recorded, str) else None
    if progress is not None:
        warn("kubernetesVersion", progress)
    return wanted
