"""The one typed stack spec: every `mlcluster:*` config key, its default, documentation and checks.

Top-level fields map to top-level config keys (`mlcluster:cluster`, `mlcluster:nodes`, ...). Cross-field
rules live in the `validate` methods so every problem is reported in one pass with its full key path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..acceptance.verdict import QUARANTINE_TAINT
from . import checks, formats
from .acceptance import AcceptanceSettings, validate_acceptance
from .api_vip import ApiVipSpec, validate_api_vip
from .care import CertificatesSpec, EtcdSnapshotSpec, UpgradeSpec
from .conformance import validate_conformance
from .gpu import DERIVED_GPU_LABELS, GpuOperatorSpec, validate_gpu
from .images import ImagesSpec
from .kubelet import ImageDiskSpec, KubeletOverrideSpec, KubeletSpec, validate_nodes
from .kueue import KueueSpec
from .kueue_inventory import check_inventory
from .kueue_topology import validate_topology
from .monitoring import MonitoringSpec, validate_monitoring
from .network import NetworkSpec, validate_network
from .providers import ClusterDefaults, cluster_defaults
from .scheduling import GPU_TAINT, validate_scheduling
from .schema import Problems, Secret, join_path, setting
from .serving import KserveSpec, validate_serving_on_cluster
from .storage import StorageSpec
from .training import KubeflowSpec
from .workloads import WorkloadsSpec, validate_training

Role = Literal["control-plane", "worker"]

DEFAULT_KUBERNETES_VERSION = "1.34.2"
__all__ = ["GPU_TAINT"]  # defined with the other taint rules in scheduling.py; layers import it from here
GPU_MODEL_LABEL = "mlcluster.io/gpu-model"
GPU_COUNT_LABEL = "mlcluster.io/gpu-count"
"""GPUs in the node, so GPU inventory (Kueue quotas, the policy pack) can be read off the node labels."""


def pinned_host_key(value: str | None) -> str | None:
    """`TYPE BODY` of a configured host key, as the SSH client compares it (no scanned host, no comment)."""
    parts = formats.split_host_key(value) if value else None
    return " ".join(parts) if parts else value


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
        if pod and svc:
            import ipaddress

            if ipaddress.ip_network(self.pod_cidr).overlaps(ipaddress.ip_network(self.service_cidr)):
                problems.error(
                    join_path(path, "serviceCidr"), f'"{self.service_cidr}" overlaps podCidr "{self.pod_cidr}"'
                )


def max_startups_setting(doc: str) -> Any:
    """An sshd's MaxStartups as a stack declares it: the dial lanes (components/cluster/connection.py) are one
    fewer, so it is at least 2."""
    return setting(10, doc=doc, check=checks.between(2, 100000))


@dataclass(frozen=True)
class BastionSpec:
    host: str = setting(doc="Bastion (jump host) address.", check=checks.host)
    port: int = setting(22, doc="Bastion SSH port.", check=checks.between(1, 65535))
    user: str | None = setting(None, doc="Bastion user (default: ssh.user).", check=formats.user_name)
    host_key: str | None = setting(
        None,
        doc="Pinned SSH host key of the bastion; required unless ssh.insecureIgnoreHostKeys.",
        check=formats.ssh_host_key,
    )
    max_startups: int = max_startups_setting(
        "The bastion sshd's `MaxStartups` (its first number; OpenSSH's default 10). Every step dials through the"
        " bastion, so at most this many minus one run at once, whatever `pulumi up --parallel` is: a dial past it"
        " may be dropped. Raise it on the bastion for a large fleet, then here."
    )

    @property
    def pinned_host_key(self) -> str | None:
        return pinned_host_key(self.host_key)


@dataclass(frozen=True)
class SshSpec:
    user: str = setting("root", doc="SSH user; a non-root user needs passwordless sudo.", check=formats.user_name)
    port: int = setting(22, doc="SSH port.", check=checks.between(1, 65535))
    private_key: Secret | None = setting(
        None,
        secret=True,
        doc="Private key (secret): `pulumi config set --secret --path mlcluster:ssh.privateKey < key`. Required"
        " unless ssh.agent.",
    )
    agent: bool = setting(
        False,
        doc="Authenticate with the keys of the SSH agent of the machine that runs `pulumi` (`SSH_AUTH_SOCK`) instead"
        " of ssh.privateKey: no private key in the stack's config or state, and ~1 KB less state per SSH resource.",
    )
    bastion: BastionSpec | None = setting(None, doc="Jump host the nodes are reached through.")
    connect_timeout_seconds: int = setting(
        10,
        doc="Per-dial timeout; an unreachable host fails after dialAttempts × this plus growing pauses between.",
        check=checks.between(1, 300),
    )
    dial_attempts: int = setting(
        3,
        doc="Dial attempts before a host is reported unreachable (pulumi-command's dialErrorLimit is this minus one).",
        check=checks.between(1, 100),
    )
    max_startups: int = max_startups_setting(
        "The nodes' sshd `MaxStartups` (its first number; OpenSSH's default 10): at most this many minus one"
        " steps run on one node at once, whatever `pulumi up --parallel` is (see ssh.bastion.maxStartups behind a"
        " bastion)."
    )
    insecure_ignore_host_keys: bool = setting(
        False, doc="DANGER: accept any SSH host key (no `hostKey` per node or bastion). Only for throwaway labs."
    )


@dataclass(frozen=True)
class GpuSpec:
    count: int = setting(doc="GPUs in the node.", check=checks.between(1, 16))
    model: str = setting(
        doc="GPU model name as Kueue flavors use it, e.g. H100-SXM-80GB.",
        check=checks.gpu_model,
    )
    mig_config: str | None = setting(
        None,
        doc="MIG profile for this node (nvidia.com/mig.config label), e.g. all-1g.10gb.",
        check=lambda v: None if not checks.labels({"nvidia.com/mig.config": v}) else "is not a valid label value",
    )
    time_slicing_replicas: int | None = setting(
        None, doc="Per-node time-slicing replicas (overrides the cluster default).", check=checks.between(2, 64)
    )
    driver: Literal["operator", "preinstalled"] | None = setting(
        None, doc="Who provides this node's NVIDIA driver (default: gpuOperator.driver)."
    )


@dataclass(frozen=True)
class NodeSpec:
    name: str = setting(doc="Node name (becomes the Kubernetes node name).", check=checks.k8s_name)
    host: str = setting(doc="IP address or DNS name reached over SSH.", check=checks.host)
    roles: tuple[Role, ...] = setting(doc="`control-plane` and/or `worker`.")
    host_key: str | None = setting(
        None,
        doc="Pinned SSH host key (`ssh-keyscan -t ed25519 HOST`; a pasted `HOST ssh-ed25519 AAAA…` line is fine);"
        " required unless `ssh.insecureIgnoreHostKeys`.",
        check=formats.ssh_host_key,
    )
    user: str | None = setting(None, doc="SSH user for this node (default ssh.user).", check=formats.user_name)
    port: int | None = setting(None, doc="SSH port for this node (default ssh.port).", check=checks.between(1, 65535))
    labels: Mapping[str, str] = setting(
        default_factory=dict,
        doc="Node labels: registered at join, kept as declared on day 2 (a removed one goes; one set by others stays).",
        check=checks.labels,
    )
    taints: tuple[str, ...] = setting(
        (),
        doc="Node taints, key=value:Effect: registered at join, kept as declared on day 2 like the labels.",
        check=checks.each(checks.taint),
    )
    gpu: GpuSpec | None = setting(None, doc="GPUs in this node; GPU nodes get the GPU label and taint.")
    topology: Mapping[str, str] = setting(
        default_factory=dict,
        doc="Where the node sits, one domain per kueue.topology level, e.g. {block: b1, rack: r07} (from the"
        " operator's inventory); set as node labels at join. Required on GPU nodes when kueue.topology is set.",
    )
    image_disk: ImageDiskSpec | None = setting(None, doc="Dedicated disk for container images.")
    kubelet: KubeletOverrideSpec | None = setting(
        None, doc="This node's kubelet tuning: any `mlcluster:kubelet` key, merged over the cluster's."
    )
    gone: bool = setting(
        False,
        doc="The host is gone for good: set it, `pulumi up`, then remove the node. Its removal then opens no SSH"
        " session to it (no kubeadm reset) and deletes its Node without a drain; a control plane's etcd member"
        " is removed first, through the first control plane's etcd.",
    )

    @property
    def is_control_plane(self) -> bool:
        return "control-plane" in self.roles

    @property
    def pinned_host_key(self) -> str | None:
        return pinned_host_key(self.host_key)

    def validate(self, path: str, problems: Problems) -> None:
        scanned = self.host_key.split()[0] if self.host_key else ""
        if self.host_key and scanned not in formats.SSH_KEY_TYPES:
            # A pasted ssh-keyscan line starts with the host it scanned ([host]:port for another port).
            names = {formats.dns_key(n.strip("[]").rsplit("]:", 1)[0]) for n in scanned.split(",")}
            if formats.dns_key(self.host) not in names:
                problems.error(
                    join_path(path, "hostKey"),
                    f"was scanned from {scanned!r}, not from this node's host {self.host!r}: scan the right host",
                )
        if not self.roles:
            problems.error(join_path(path, "roles"), "must name at least one role (control-plane, worker)")
        if len(set(self.roles)) != len(self.roles):
            problems.error(join_path(path, "roles"), "lists a role twice")
        for key in self.labels:
            if not checks.kubelet_may_set_label(key):
                problems.error(join_path(path, "labels"), checks.kubelet_label_problem(key))
            if key.startswith("nvidia.com/") and self.gpu is None:
                problems.error(join_path(path, "labels"), f"sets GPU label {key!r} on a node with no gpu section")
            elif key in DERIVED_GPU_LABELS:
                problems.error(
                    join_path(path, "labels"),
                    f"sets {key!r}, which mlcluster sets from {DERIVED_GPU_LABELS[key]}: set that instead",
                )
        for i, taint in enumerate(self.taints):
            if not checks.taint(taint) and checks.parse_taint(taint)["key"] == QUARANTINE_TAINT.key:
                problems.error(
                    join_path(join_path(path, "taints"), i),
                    f"uses {QUARANTINE_TAINT.key}, the acceptance quarantine's taint, which mlcluster sets and lifts"
                    " from the acceptance verdicts: use another key",
                )
        for level, domain in self.topology.items():
            # Each domain becomes a label value; the levels themselves are checked against kueue.topology.
            message = checks.labels({level: domain}) if domain else "is empty: name the node's domain, e.g. r07"
            if message:
                problems.error(join_path(join_path(path, "topology"), level), message)


FIRST_CONTROL_PLANE_BATCH_CONNECTIONS = 200
"""SSH connections the first control plane may hold for the worker batches' drains and uncordons before the
stack is warned: each is an sshd process (two with privilege separation) on that node until `up` ends."""


@dataclass(frozen=True)
class Spec:
    kubernetes_version: str = setting(
        DEFAULT_KUBERNETES_VERSION,
        doc="Kubernetes version (kubeadm, kubelet, kubectl pinned to it).",
        check=checks.k8s_version,
    )
    cluster: ClusterSpec = setting(default_factory=ClusterSpec, doc="Cluster-wide settings.")
    ssh: SshSpec = setting(default_factory=SshSpec, doc="SSH defaults for every node.", modes=("kubeadm",))
    nodes: tuple[NodeSpec, ...] = setting((), doc="The servers (mode kubeadm).", modes=("kubeadm",))
    kubelet: KubeletSpec = setting(default_factory=KubeletSpec, doc="Kubelet tuning for ML images.")
    gpu_operator: GpuOperatorSpec = setting(default_factory=GpuOperatorSpec, doc="NVIDIA GPU Operator.")
    kueue: KueueSpec = setting(default_factory=KueueSpec, doc="Kueue queues and quotas.")
    kserve: KserveSpec = setting(default_factory=KserveSpec, doc="KServe model serving.")
    kubeflow: KubeflowSpec = setting(default_factory=KubeflowSpec, doc="Kubeflow training.")
    storage: StorageSpec = setting(default_factory=StorageSpec, doc="Default StorageClass.")
    images: ImagesSpec = setting(
        default_factory=ImagesSpec, doc="Big-image logistics: mirrors, peer-to-peer sharing, pre-pulling."
    )
    workloads: WorkloadsSpec = setting(default_factory=WorkloadsSpec, doc="The seeds' workloads (YOLO, training).")
    upgrade: UpgradeSpec = setting(
        default_factory=UpgradeSpec,
        doc="How a changed kubernetesVersion drains nodes (docs/cluster-care.md).",
        modes=("kubeadm",),
    )
    etcd_snapshots: EtcdSnapshotSpec = setting(
        default_factory=EtcdSnapshotSpec, doc="Scheduled etcd snapshots.", modes=("kubeadm",)
    )
    certificates: CertificatesSpec = setting(
        default_factory=CertificatesSpec,
        doc="kubeadm certificate expiry: days left, renewal (docs/cluster-care.md).",
        modes=("kubeadm",),
    )
    monitoring: MonitoringSpec = setting(
        default_factory=MonitoringSpec, doc="Metrics, dashboards, alerts, custom-metric HPAs, GPU fault handling."
    )
    network: NetworkSpec = setting(default_factory=NetworkSpec, doc="RDMA for multi-node training (docs/network.md).")
    acceptance: AcceptanceSettings = setting(
        default_factory=AcceptanceSettings,
        doc="GPU burn-in, NCCL bandwidth and quarantine after the platform is installed (docs/acceptance.md).",
        modes=("kubeadm",),
    )

    @property
    def control_planes(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.is_control_plane)

    @property
    def workers(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if not n.is_control_plane)

    def validate(self, path: str, problems: Problems) -> None:
        if self.cluster is None:
            return
        if self.cluster.mode == "kubeadm":
            self._validate_kubeadm(problems)
        validate_gpu(self, problems)
        if self.images.spegel.enabled:
            self._validate_spegel(problems)
        if self.storage.provisioner == "nfs" and self.storage.enabled and not self.storage.nfs_server:
            problems.error("storage.nfsServer", "is required when storage.provisioner is nfs")
        node_gpus = [n.gpu.count for n in self.nodes if n.gpu is not None]
        team_namespaces = [t.queue_namespace for t in self.kueue.teams] if self.kueue.enabled else []
        validate_serving_on_cluster(
            self.kserve,
            cluster_mode=self.cluster.mode,
            provider=self.cluster.provider,
            node_gpus=node_gpus,
            team_namespaces=team_namespaces,
            problems=problems,
        )
        if self.kueue.enabled:
            check_inventory(self, problems)
        validate_topology(self, problems)
        validate_training(self, problems)
        validate_monitoring(self, problems)
        validate_network(self, problems)
        validate_conformance(self, problems)

    def _validate_held_connections(self, problems: Problems) -> None:
        """A real `up` keeps every SSH command's connection open until it ends (pulumi-command never closes its
        client): the first control plane runs two commands per worker batch (its drain and uncordon)."""
        workers = len(self.workers)
        if not workers or not self.control_planes:
            return
        batches = -(-workers // self.kubelet.restart.worker_batch_size(workers))
        held = 2 * batches
        if held > FIRST_CONTROL_PLANE_BATCH_CONNECTIONS:
            problems.warn(
                "kubelet.restart.maxUnavailableWorkers",
                f'"{self.kubelet.restart.max_unavailable_workers}" makes {batches} worker batches: the first control'
                f" plane ({self.control_planes[0].name}) runs each batch's drain and uncordon as SSH commands, and"
                f" each keeps its connection and an sshd process open until `up` ends ({held} at once besides its"
                " own steps, in a first up or an upgrade); a larger batch (a percentage such as 25%, the default)"
                f" keeps it under {FIRST_CONTROL_PLANE_BATCH_CONNECTIONS}",
            )

    def _validate_etcd_quorum(self, problems: Problems) -> None:
        """Each control plane is an etcd member (kubeadm's stacked etcd). A gone member is removed from a healthy
        one before its Node goes, and etcd changes its membership only with a quorum of started members: with
        more gone than the quorum allows, no removal can succeed and the cluster already stands still."""
        members = len(self.control_planes)
        gone = [self.nodes.index(n) for n in self.control_planes if n.gone]
        quorum = members // 2 + 1
        if gone and members - len(gone) < quorum:
            names = ", ".join(f"nodes[{i}]" for i in gone)
            problems.error(
                f"nodes[{gone[-1]}].gone",
                f"leaves {members - len(gone)} of {members} etcd members ({names} gone), below etcd's quorum of"
                f" {quorum}: no member can be removed and the API server cannot write. Restore from a snapshot"
                " instead (docs/cluster-care.md, Restoring a snapshot), or mark at most"
                f" {members - quorum} control plane(s) gone",
            )

    def _validate_spegel(self, problems: Problems) -> None:
        # One Spegel DaemonSet reads one content path: every node's containerd root must be the same.
        roots: dict[str, list[str]] = {}
        for node in self.nodes:
            disk = node.image_disk
            root = (disk.path or disk.mount_point) if disk is not None else "/var/lib/containerd"
            roots.setdefault(root, []).append(node.name)
        if len(roots) > 1:
            detail = "; ".join(f"{root}: {', '.join(names)}" for root, names in sorted(roots.items()))
            problems.error(
                "images.spegel.enabled",
                f"needs one containerd root on every node, but the nodes use {len(roots)} ({detail})",
            )

    def _validate_ssh_pins(self, problems: Problems) -> None:
        """The bastion's reach (SSH only), and host-key pins as pulumi-command's Go SSH client uses them, for
        every host it dials (nodes and the bastion alike): an absent pin turns checking off for that host, and
        a pin allows only its own key type, so an `ssh-rsa` pin fails against servers that offer only
        rsa-sha2-256/512 signatures."""
        if self.ssh.bastion is not None and self.cluster.api_address is None:
            problems.error(
                "cluster.apiAddress",
                "is required with ssh.bastion: the bastion carries SSH only, and the Kubernetes provider dials the"
                " API server from the machine running pulumi; set an address that machine reaches (a load"
                " balancer, or 127.0.0.1:6443 through `ssh -N -L 6443:<first control plane>:6443 <bastion>`)",
            )
        pins = [(f"nodes[{i}].hostKey", node.host_key) for i, node in enumerate(self.nodes)]
        if self.ssh.bastion is not None:
            pins.append(("ssh.bastion.hostKey", self.ssh.bastion.host_key))
        for path, pin in pins:
            if pin is None and not self.ssh.insecure_ignore_host_keys:
                problems.error(
                    path,
                    "is required (pin the SSH host key: ssh-keyscan -t ed25519 HOST), or set"
                    " ssh.insecureIgnoreHostKeys: true for a throwaway lab",
                )
            elif pin is not None and (formats.split_host_key(pin) or ("",))[0] == "ssh-rsa":
                problems.error(
                    path,
                    "is an ssh-rsa key: pulumi-command then allows only the ssh-rsa (SHA-1) signature, which"
                    " current OpenSSH servers refuse; pin the host's ed25519 or ecdsa key instead"
                    " (ssh-keyscan -t ed25519 HOST)",
                )

    def _warn_bastion_lanes(self, problems: Problems) -> None:
        """Every step dials through the bastion, and at most its MaxStartups less one run at once (the dial lanes,
        components/cluster/connection.py): a fleet larger than that prepares, joins and restarts in rounds."""
        bastion = self.ssh.bastion
        reached = [node for node in self.nodes if not node.gone]
        # Below 2 is refused by the setting's own check.
        if bastion is None or bastion.max_startups < 2 or len(reached) <= bastion.max_startups - 1:
            return
        lanes = bastion.max_startups - 1
        rounds = -(-len(reached) // lanes)
        problems.warn(
            "ssh.bastion.maxStartups",
            f"{len(reached)} nodes are reached through the bastion and at most {lanes} steps run through it at once"
            f" (its MaxStartups {bastion.max_startups} less one, so that no dial is dropped): each node's"
            f" preparation, join and restart take {rounds} rounds instead of one. If the bastion's sshd allows more"
            " (`sshd -T | grep -i maxstartups` on it), set this key to its first number",
        )

    def _validate_kubeadm(self, problems: Problems) -> None:
        if not self.nodes:
            problems.error("nodes", "must list at least one node when cluster.mode is kubeadm")
            return
        if not self.control_planes:
            problems.error("nodes", "has no control-plane node: give at least one node the role control-plane")
        if len(self.control_planes) > 1 and not self.cluster.control_plane_endpoint and not self.cluster.api_vip:
            problems.error(
                "cluster.controlPlaneEndpoint",
                f"is required with {len(self.control_planes)} control-plane nodes: your load balancer's address, or"
                " set cluster.apiVip (a free address on the control planes' subnet) to have keepalived and haproxy"
                " on the control planes serve one",
            )
        validate_api_vip(self, problems)
        validate_acceptance(self, problems)
        if self.ssh.private_key is None and not self.ssh.agent:
            problems.error(
                "ssh.privateKey",
                "is required when cluster.mode is kubeadm, unless ssh.agent is true (the SSH agent's keys)",
            )
        if self.ssh.private_key is not None and self.ssh.agent:
            problems.error(
                "ssh.agent",
                "cannot be true with ssh.privateKey set: authenticate with one of them"
                " (remove the key to use the agent)",
            )
        validate_scheduling(self, problems)
        validate_nodes(self.kubelet, list(enumerate(self.nodes)), problems)
        self._validate_ssh_pins(problems)
        self._warn_bastion_lanes(problems)
        if self.control_planes and self.control_planes[0].gone:
            index = self.nodes.index(self.control_planes[0])
            problems.error(
                f"nodes[{index}].gone",
                "cannot be set on the first control plane: every other node's removal runs through it",
            )
        self._validate_etcd_quorum(problems)
        self._validate_held_connections(problems)
        seen_names: dict[str, int] = {}
        seen_hosts: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            for attr, seen in (("name", seen_names), ("host", seen_hosts)):
                value = getattr(node, attr)
                # Host names differing only in case or a trailing dot are one host.
                key = formats.dns_key(value)
                if key in seen:
                    problems.error(f"nodes[{i}].{attr}", f'"{value}" is already used by nodes[{seen[key]}]')
                else:
                    seen[key] = i
