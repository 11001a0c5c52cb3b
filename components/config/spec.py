"""The one typed stack spec: every `mlcluster:*` config key, its default and documentation, by section.

Each top-level field is a top-level config key (`mlcluster:cluster`, `mlcluster:nodes`, ...) whose section lives
in a module of its own with the checks that read only that section. The rules that read several sections are in
rules.py, run once after parsing (load.py); what the stack implies for the rest of the program is in derived.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import checks
from .acceptance import AcceptanceSettings
from .airgap import AirGapSpec
from .care import CertificatesSpec, EtcdSnapshotSpec, UpgradeSpec
from .cluster import ClusterSpec
from .gpu import GpuOperatorSpec
from .images import ImagesSpec
from .kubelet import KubeletSpec
from .kueue import KueueSpec
from .monitoring import MonitoringSpec
from .network import NetworkSpec
from .nodes import NodeSpec
from .schema import setting
from .serving import KserveSpec
from .ssh import SshSpec
from .storage import StorageSpec
from .training import KubeflowSpec
from .workloads import WorkloadsSpec

DEFAULT_KUBERNETES_VERSION = "1.35.8"


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
    air_gap: AirGapSpec = setting(
        default_factory=AirGapSpec,
        doc="Nodes with no route outside the site, served from a fetched bundle (docs/air-gap.md).",
        modes=("kubeadm",),
    )
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
