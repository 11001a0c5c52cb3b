"""What a valid stack implies for the rest of the program: facts derived from several sections, read by the
renderers, the components and the cross-section rules alike, so that each is worked out in one place.

- Taints (docs/scheduling.md): a dedicated control plane carries the control-plane taint; a GPU node carries the
  GPU taint, except when no node would be free of it: then control planes go without it, because CoreDNS and
  calico-kube-controllers tolerate only the control-plane taint and nothing of ours can give them more. The
  platform's controllers tolerate nothing while a node is untainted; else the GPU taint when a node carries only
  that; else the control-plane taint (every node a dedicated control plane). Existing clusters: a node pool without
  taints is assumed.
- GPU flavors: the stack's GPUs per Kueue ResourceFlavor, as the device plugin will advertise them (what Kueue can
  admit without pods waiting for devices): a node without MIG gives `count` x time-slicing replicas of
  `nvidia.com/gpu`; a node with `migConfig: all-<profile>` (one profile on every GPU, NVIDIA's standard configs)
  `count` x slices per GPU x replicas, as `nvidia.com/mig-<profile>` (migStrategy mixed) or `nvidia.com/gpu`
  (migStrategy single); with migStrategy none the GPUs count whole; any other migConfig cannot be counted. In mode
  `existing` the stack has no nodes: `kueue.inventory` declares the GPUs instead.
- Topology labels, which layers are wanted (monitoring, fault handling, acceptance), the acceptance image set, and
  the AI-conformance MUSTs a stack's own settings give up.

Nothing here reports a problem: the rules that judge these facts are in rules.py.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from . import checks
from .acceptance import ACCEPTANCE_IMAGE_SET, AcceptanceSettings
from .cluster import CALICO_VERSION
from .gpu import GpuOperatorSpec
from .images import ImageSetSpec, ImageSpec, ImagesSpec
from .kueue import GPU_RESOURCE, GPU_RESOURCE_PREFIX, TOPOLOGY_LABEL_PREFIX, TopologySpec, flavor_name
from .monitoring import FaultMode
from .nodes import NodeSpec
from .serving import EndpointSpec, InferenceDeploymentSpec, gateway_wanted, keda_wanted, llm_endpoints
from .spec import Spec
from .support import Installed

# --- taints and tolerations -----------------------------------------------------------------------------------

CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane:NoSchedule"
GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
"""PreferNoSchedule only steers; these two keep a pod that does not tolerate them off the node."""


def _declared_taints(node: NodeSpec) -> list[str]:
    taints = list(node.taints)
    if node.is_control_plane and "worker" not in node.roles and CONTROL_PLANE_TAINT not in taints:
        taints.append(CONTROL_PLANE_TAINT)
    return taints


def _is_gpu_taint(taint: str) -> bool:
    return taint.startswith("nvidia.com/gpu")


def _gets_gpu_taint(node: NodeSpec) -> bool:
    return node.gpu is not None or any(_is_gpu_taint(t) for t in node.taints)


def blocking(taints: list[str]) -> list[str]:
    # A malformed taint is reported by its own check (nodes[].taints); here it counts as blocking.
    return [t for t in taints if checks.taint(t) or checks.parse_taint(t)["effect"] in BLOCKING_EFFECTS]


def gpu_taint_spared(nodes: Sequence[NodeSpec]) -> bool:
    """True when no node would be free of the GPU taint: working control planes then go without it."""
    return bool(nodes) and all(_gets_gpu_taint(n) for n in nodes)


def node_taints(nodes: Sequence[NodeSpec], node: NodeSpec) -> list[str]:
    """The taints a kubeadm node of `nodes` registers with (kubeadm nodeRegistration.taints)."""
    taints = _declared_taints(node)
    if node.gpu is None or any(_is_gpu_taint(t) for t in taints):
        return taints
    if gpu_taint_spared(nodes) and node.is_control_plane:
        return taints
    return [*taints, GPU_TAINT]


TOLERATION_CHOICES: tuple[tuple[str, ...], ...] = ((), (GPU_TAINT,), (CONTROL_PLANE_TAINT,))
"""What the platform's controllers may tolerate, in order of preference: nothing, the GPU taint (GPU workers),
the control-plane taint (a cluster of dedicated control planes only)."""


def platform_taints(spec: Spec) -> tuple[str, ...] | None:
    """The first choice that leaves the platform a node; None when user taints leave it none."""
    if spec.cluster.mode != "kubeadm" or not spec.nodes:
        return ()
    taints = [set(blocking(node_taints(spec.nodes, n))) for n in spec.nodes]
    return next((choice for choice in TOLERATION_CHOICES if any(t <= set(choice) for t in taints)), None)


def platform_tolerations(spec: Spec) -> list[dict[str, str]]:
    """What every platform controller tolerates (through chart values and our manifests)."""
    return [checks.toleration_of(t) for t in platform_taints(spec) or ()]


# --- topology -------------------------------------------------------------------------------------------------


def topology_labels(topology: TopologySpec | None, node: NodeSpec) -> dict[str, str]:
    """The node labels of a node's topology (label key -> domain), set at join with the node's own labels."""
    if topology is None:
        # The two-stack split: the nodes' stack labels them, the platform stack (mode existing) declares the
        # Topology over the same default labels.
        return {TOPOLOGY_LABEL_PREFIX + level: domain for level, domain in node.topology.items()}
    levels = topology.domain_levels()
    return {levels[level]: domain for level, domain in node.topology.items() if level in levels}


# --- GPU flavors ----------------------------------------------------------------------------------------------

MIG_SLICES_PER_GPU: Mapping[str, int] = {
    # NVIDIA MIG user guide, "Supported MIG Profiles": the most instances of one profile on one GPU.
    # A100 40GB
    "1g.5gb": 7, "1g.5gb+me": 1, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1,
    # A100 80GB, H100 80GB (1g.10gb also exists on the A100 40GB with 4 per GPU: give that model no migConfig)
    "1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1,
    # H100 94GB (NVL)
    "1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1,
    # H200 141GB (as `nvidia-smi mig -lgip` lists them on an H200)
    "1g.18gb": 7, "1g.18gb+me": 1, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1,
    # A30 24GB
    "1g.6gb": 4, "2g.12gb": 2, "4g.24gb": 1,
}  # fmt: skip


@dataclass
class GpuFlavor:
    """One GPU model: the nodes (or declared inventory) behind its ResourceFlavor and what they provide."""

    name: str
    model: str
    nodes: list[NodeSpec] = field(default_factory=list)
    capacity: Counter[str] = field(default_factory=Counter)
    """resource -> devices Kueue can admit."""
    terms: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    """resource -> how the capacity adds up ("8 H100-SXM-80GB" -> number of nodes)."""
    unchecked: bool = False
    """A node's devices cannot be counted (custom MIG layout): the flavor's GPU quotas are not checked."""
    node_labels: Mapping[str, str] = field(default_factory=dict)
    """Declared labels (mode existing); in mode kubeadm they come from the nodes."""

    def explain(self, resource: str) -> str:
        parts = []
        for term, nodes in sorted(self.terms[resource].items()):
            parts.append(f"{nodes} node{'s' if nodes != 1 else ''} × {term}" if nodes else term)
        return " + ".join(parts)


def mig_profile_counted(mig_config: str) -> bool:
    """Whether a node's MIG layout can be counted: one profile of the table on every GPU (`all-<profile>`)."""
    return mig_config.startswith("all-") and mig_config.removeprefix("all-") in MIG_SLICES_PER_GPU


def node_gpu_capacity(gpu_operator: GpuOperatorSpec, node: NodeSpec) -> tuple[str, int, str] | None:
    """(resource, devices, how) one GPU node adds to its flavor, or None when it cannot be known."""
    assert node.gpu is not None
    gpu = node.gpu
    replicas = gpu.time_slicing_replicas or gpu_operator.time_slicing_replicas or 1
    resource, per_gpu, how = GPU_RESOURCE, 1, f"{gpu.count} {gpu.model}"
    if gpu.mig_config and gpu_operator.mig_strategy != "none":
        if not mig_profile_counted(gpu.mig_config):
            return None
        profile = gpu.mig_config.removeprefix("all-")
        slices = MIG_SLICES_PER_GPU[profile]
        per_gpu = slices
        if gpu_operator.mig_strategy == "mixed":
            resource = f"{GPU_RESOURCE_PREFIX}mig-{profile}"
        how += f" × {slices} {profile} slices"
    if replicas > 1:
        how += f" × {replicas} time-slicing replicas"
    return resource, gpu.count * per_gpu * replicas, how


def gpu_flavors(spec: Spec) -> dict[str, GpuFlavor]:
    """GPU flavors by name: from the GPU workers' gpu sections (kubeadm) or kueue.inventory (existing). A GPU on a
    control-plane-only node runs no workloads and is in no flavor."""
    flavors: dict[str, GpuFlavor] = {}
    if spec.cluster.mode == "existing":
        for i, item in enumerate(spec.kueue.inventory):
            flavor = flavors.setdefault(
                flavor_name(item.model), GpuFlavor(flavor_name(item.model), item.model, node_labels=item.node_labels)
            )
            flavor.capacity[item.resource] += item.count
            flavor.terms[item.resource][f"kueue.inventory[{i}]: {item.count} {item.model}"] = 0
        return flavors
    for node in spec.nodes:
        if node.gpu is None or "worker" not in node.roles:
            continue
        name = flavor_name(node.gpu.model)
        flavor = flavors.setdefault(name, GpuFlavor(name, node.gpu.model))
        flavor.nodes.append(node)
        provided = node_gpu_capacity(spec.gpu_operator, node)
        if provided is None:
            flavor.unchecked = True
            continue
        resource, devices, how = provided
        flavor.capacity[resource] += devices
        flavor.terms[resource][how] += 1
    return flavors


def unqueued_gpus(spec: Spec) -> dict[str, int]:
    """GPUs pods outside Kueue always hold: endpoints and deployments at minReplicas, the sample notebook."""
    held: dict[str, int] = {}
    if spec.kserve.enabled:
        for kind, items in (("endpoint", spec.kserve.endpoints), ("deployment", spec.kserve.deployments)):
            for item in items:
                if item.gpus:
                    # An endpoint with versions (a canary) is one InferenceService per version, each at minReplicas.
                    copies = len(item.isvc_names()) if isinstance(item, EndpointSpec) else 1
                    held[f"{kind} {item.name}"] = item.gpus * item.min_replicas * copies
        for llm in llm_endpoints(spec.kserve):
            if llm.queue is None:
                # Decode replicas at their fewest, and the prefill pods beside them.
                prefill = llm.prefill.replicas * llm.prefill_gpus if llm.prefill else 0
                held[f"LLM endpoint {llm.name}"] = llm.gpus * llm.replicas + prefill
    if spec.workloads.notebook:
        held["notebook"] = 1
    return held


# --- which layers are wanted ----------------------------------------------------------------------------------


def monitoring_wanted(spec: Spec) -> bool:
    if spec.monitoring.enabled is not None:
        return spec.monitoring.enabled
    return spec.cluster.mode == "kubeadm"


KUBERNETES_LISTENERS = {
    6443: "the API server's port (kubeadm KubeAPIServerPort)",
    2379: "etcd's client port (kubeadm EtcdListenClientPort)",
    2380: "etcd's peer port (kubeadm EtcdListenPeerPort)",
    2381: "etcd's metrics port on 127.0.0.1 (kubeadm EtcdMetricsPort)",
    10248: "the kubelet's health port on 127.0.0.1, which kubeadm init waits on (KubeletHealthzPort)",
    10249: "kube-proxy's metrics port on 127.0.0.1 (ProxyStatusPort)",
    10250: "the kubelet's port (KubeletPort)",
    10256: "kube-proxy's health port (ProxyHealthzPort)",
    10257: "kube-controller-manager's port (KubeControllerManagerPort)",
    10259: "kube-scheduler's port",
}
"""What every control plane listens on as kubeadm sets it up (cmd/kubeadm/app/constants/constants.go and
pkg/cluster/ports/ports.go, kubernetes v1.35): a port bound on 127.0.0.1 collides with a load balancer's bind on
all addresses too."""
CALICO_LISTENERS = {
    179: "Calico's BGP (BIRD on every node; the Installation's bgp is Enabled by default)",
    5473: "Calico Typha (host network)",
    9099: "Calico Felix's health port on 127.0.0.1",
}
"""Calico's documented network requirements (tigera/docs calico_versioned_docs/version-3.31/_includes/partials/
_system-requirements.mdx: BGP TCP 179, Typha TCP 5473) and Felix's HealthPort default 9099
(calico/_includes/components/FelixConfig/config-params.json)."""
NODE_EXPORTER_PORT = 9100
"""kube-prometheus-stack's node-exporter runs on the host network on 9100 (prometheus-node-exporter values.yaml:
hostNetwork: true, service.port 9100)."""


def control_plane_listeners(spec: Spec) -> dict[int, str]:
    """Every TCP port something the stack sets up listens on, on a control plane: the load balancer of
    cluster.apiVip must bind another."""
    listeners = dict(KUBERNETES_LISTENERS)
    if spec.cluster.cni == "calico":
        listeners.update(CALICO_LISTENERS)
    if monitoring_wanted(spec):
        listeners[NODE_EXPORTER_PORT] = "node-exporter (monitoring, host network)"
    for node in spec.control_planes:
        port = node.port if node.port is not None else spec.ssh.port
        listeners.setdefault(port, f"SSH on {node.name}")
    return listeners


def fault_mode(spec: Spec) -> FaultMode:
    mode = spec.monitoring.fault_handling.mode
    if mode is not None:
        return mode
    if spec.cluster.mode != "kubeadm" or not spec.gpu_operator.enabled:
        return "off"
    # Quarantine's datastore takes its certificates from cert-manager, which mlcluster installs with KServe.
    return "cordon" if spec.kserve.enabled else "observe"


def custom_metric_deployments(spec: Spec) -> list[InferenceDeploymentSpec]:
    """The kserve deployments whose HPA scales on a pods or external metric (a metrics adapter serves it)."""
    if not spec.kserve.enabled:
        return []
    return [d for d in spec.kserve.deployments if d.autoscaling.metric in ("pods", "external")]


# --- acceptance -----------------------------------------------------------------------------------------------


def tested_nodes(nodes: Sequence[NodeSpec], only: Sequence[str]) -> tuple[NodeSpec, ...]:
    """The GPU nodes acceptance tests: every node with a `gpu` section that has not `gone`, or of those the ones
    `acceptance.nodes` names (`only`, empty: all)."""
    chosen = set(only)
    return tuple(
        node for node in nodes if node.gpu is not None and not node.gone and (not chosen or node.name in chosen)
    )


def acceptance_wanted(spec: Spec) -> bool:
    """On by default where it can run: a kubeadm stack with GPU nodes and the GPU Operator that exposes them."""
    default = (
        spec.cluster.mode == "kubeadm"
        and bool(tested_nodes(spec.nodes, spec.acceptance.nodes))
        and spec.gpu_operator.enabled
    )
    return default if spec.acceptance.enabled is None else spec.acceptance.enabled


def multi_node_fabric(spec: Spec) -> str:
    if spec.acceptance.fabric is not None:
        return spec.acceptance.fabric
    return "rdma" if spec.network.rdma.enabled else "tcp"


def acceptance_image_set(acceptance: AcceptanceSettings) -> ImageSetSpec:
    """Acceptance's two images, pre-pulled on the GPU nodes: a wave then starts its tests without a cold pull of
    several GB on every node at once."""
    images = (ImageSpec(image=acceptance.dcgm_image), ImageSpec(image=acceptance.nccl_tests_image))
    return ImageSetSpec(name=ACCEPTANCE_IMAGE_SET, images=images, nodes="gpu")


def prepull_sets(spec: Spec) -> tuple[ImageSetSpec, ...]:
    """The stack's pre-pulled image sets, and where acceptance runs, its image set."""
    images: ImagesSpec = spec.images
    if not acceptance_wanted(spec):
        return images.prepull
    return (*images.prepull, acceptance_image_set(spec.acceptance))


# --- AI conformance -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LostMust:
    requirement: str
    """The checklist id (gang_scheduling, ai_inference, ...)."""
    path: str
    """The config key that gives it up."""
    why: str


def lost_musts(spec: Spec) -> list[LostMust]:
    """The CNCF Kubernetes AI Conformance MUSTs this stack's own settings give up (not what only a cluster can
    show), in checklist order, each with the key that gives it up."""
    lost: list[LostMust] = []
    gpu = spec.gpu_operator
    if not gpu.enabled:
        for requirement in ("accelerator_metrics", "secure_accelerator_access"):
            lost.append(
                LostMust(requirement, "gpuOperator.enabled", "no GPU Operator: nothing installs DCGM or the toolkit")
            )
    elif not gpu.dcgm_exporter:
        lost.append(
            LostMust("accelerator_metrics", "gpuOperator.dcgmExporter", "no DCGM exporter: no per-GPU metrics endpoint")
        )
    if not spec.kserve.enabled:
        lost.append(LostMust("ai_inference", "kserve.enabled", "no KServe: no inference service behind a Gateway"))
    elif not gateway_wanted(spec.kserve):
        lost.append(LostMust("ai_inference", "kserve.gateway.enabled", "KServe is not routed through the Gateway API"))
    if not spec.kueue.enabled:
        lost.append(LostMust("gang_scheduling", "kueue.enabled", "no Kueue: no all-or-nothing admission"))
    elif not spec.kueue.wait_for_pods_ready.enabled:
        lost.append(
            LostMust(
                "gang_scheduling",
                "kueue.waitForPodsReady.enabled",
                "Kueue admits a gang without evicting it when its pods do not all start",
            )
        )
    if not monitoring_wanted(spec):
        lost.append(
            LostMust("pod_autoscaling", "monitoring.enabled", "no prometheus-adapter: no custom metrics for the HPA")
        )
        lost.append(
            LostMust("ai_service_metrics", "monitoring.enabled", "no Prometheus discovering workloads' metrics")
        )
    if not spec.kubeflow.enabled and not spec.kserve.enabled:
        lost.append(
            LostMust(
                "robust_controller",
                "kubeflow.enabled",
                "neither Kubeflow Trainer nor KServe: no AI operator with CRDs and webhooks",
            )
        )
    return lost


# --- what the stack installs, for the support calendar (support.py) -------------------------------------------


def installed_components(spec: Spec) -> list[Installed]:
    """Every component the stack installs that the calendar can hold a range for, with the key of its version."""
    gpu, kserve, monitoring = spec.gpu_operator, spec.kserve, spec.monitoring
    wanted: list[tuple[bool, str, str, str]] = [
        (spec.cluster.mode == "kubeadm", "kubeadm config v1beta4", "kubernetesVersion", "kubeadm.k8s.io/v1beta4"),
        (
            spec.cluster.defaults.installs_cni and spec.cluster.cni == "calico",
            "Calico (tigera-operator)",
            "cluster.cni",
            CALICO_VERSION,
        ),
        (gpu.enabled, "NVIDIA GPU Operator", "gpuOperator.version", gpu.version),
        (gpu.enabled and gpu.dra, "NVIDIA DRA driver for GPUs", "gpuOperator.draDriverVersion", gpu.dra_driver_version),
        (spec.network.rdma.enabled, "NVIDIA Network Operator", "network.rdma.version", spec.network.rdma.version),
        (spec.kueue.enabled, "Kueue", "kueue.version", spec.kueue.version),
        (kserve.enabled, "KServe", "kserve.version", kserve.version),
        (kserve.enabled, "cert-manager", "kserve.certManagerVersion", kserve.cert_manager_version),
        (gateway_wanted(kserve), "Envoy Gateway", "kserve.gateway.version", kserve.gateway.version),
        (keda_wanted(kserve), "KEDA", "kserve.kedaVersion", kserve.keda_version),
        (spec.kubeflow.enabled, "Kubeflow Trainer", "kubeflow.version", spec.kubeflow.version),
        (monitoring_wanted(spec), "kube-prometheus-stack", "monitoring.version", monitoring.version),
        (
            fault_mode(spec) != "off",
            "NVIDIA NVSentinel",
            "monitoring.faultHandling.version",
            monitoring.fault_handling.version,
        ),
    ]
    return [Installed(component, key, version) for on, component, key, version in wanted if on]
