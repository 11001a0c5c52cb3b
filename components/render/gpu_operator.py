"""NVIDIA GPU Operator: preflight parsing, driver decisions, node labels, device-plugin configs, release values.

Pure data. The GPU preflight (components/scripts/gpu-preflight.sh) ends with one line
`mlcluster-gpu-preflight: {json}`; `parse_preflight` reads it, `node_driver_mode` turns it into a
decision per node, and `gpu_operator_values` into the chart's values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..config.care import UpgradeSpec
from ..config.checks import parse_taint, toleration_of
from ..config.cluster import ClusterSpec
from ..config.derived import CONTROL_PLANE_TAINT, GPU_TAINT, fault_mode, platform_tolerations
from ..config.gpu import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    DRIVER_DEPLOY_LABEL,
    KUEUE_ADMITTED_SELECTOR,
    MIG_CONFIG_LABEL,
    GpuOperatorSpec,
)
from ..config.network import NetworkSpec
from ..config.nodes import NodeSpec
from ..config.spec import Spec
from . import yaml_text
from .helm import ChartRelease, tolerating
from .monitoring import DCGM_METRICS_CONFIG, dcgm_counters_csv, dcgm_scraped
from .shell import NodeStep, rendered_step

NGC_REPOSITORY = "https://helm.ngc.nvidia.com/nvidia"
PREFLIGHT_STEP = "gpu-preflight"
PREFLIGHT_MARKER = "mlcluster-gpu-preflight: "

DECIDED_BY_ANNOTATION = "mlcluster.io/decided-by-gpu-preflight"
"""On a node whose labels wait on its GPU preflight: which labels, so that a `[computed]` in the plan says why."""

DEVICE_PLUGIN_CONFIG_MAP = "mlcluster-device-plugin-config"
DEFAULT_DEVICE_PLUGIN_CONFIG = "default"
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"
"""Where the operator's driver container exposes the driver on the host (the DRA driver's nvidiaDriverRoot)."""
HOST_DRIVER_ROOT = "/"
DRA_RELEASE = "nvidia-dra-driver-gpu"
DRA_NAMESPACE = "nvidia-dra-driver-gpu"
CONTROL_PLANE_TOLERATION = toleration_of(CONTROL_PLANE_TAINT)
"""What the operator's and nfd-master's chart defaults tolerate (the control-plane taint)."""

DriverMode = Literal["operator", "preinstalled"]

# Secure accelerator access: only what the kubelet allocated reaches a container (docs/gpu.md, Secure accelerator
# access; the variables are read by the NVIDIA Container Toolkit's and the device plugin's own flags).
SECURE_TOOLKIT_ENV = (
    # An unprivileged container's NVIDIA_VISIBLE_DEVICES (CUDA base images set it to `all`) selects no GPU, even
    # in a pod that asks for the nvidia RuntimeClass: that runtime then injects only the CDI devices the device
    # plugin (or the DRA driver) allocated to the container.
    {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
)
SECURE_DEVICE_PLUGIN_ENV = (
    # The strategy the operator sets with CDI on, pinned so that the plugin never falls back to `envvar` (the
    # device list as NVIDIA_VISIBLE_DEVICES, which the toolkit above refuses in an unprivileged container).
    # Not `volume-mounts`: containerd's default runtime (runc, CDI mode) does not read those mounts, so every
    # allocated GPU would be lost; CDI devices go through the CRI instead.
    {"name": "DEVICE_LIST_STRATEGY", "value": "cdi-annotations,cdi-cri"},
)


@dataclass(frozen=True)
class PreflightResult:
    """What the preflight found on one host (the fields of its summary line)."""

    host: str
    status: str
    gpu_count: int
    gpus: tuple[str, ...]
    nouveau_loaded: bool
    nouveau_blacklisted: bool
    driver_installed: bool
    driver_version: str
    operator_driver: bool
    kernel: str
    kernel_headers: bool
    warnings: tuple[str, ...]
    rdma_ports: tuple[str, ...] = ()
    """`mlx5_0 port 1: ACTIVE, 400 Gb/sec (4X NDR), InfiniBand, netdev ibp24s0` per RDMA port (network.rdma)."""
    peermem_loaded: bool = False
    """nvidia_peermem, GPUDirect RDMA's kernel module with a host-installed driver."""

    @property
    def host_driver(self) -> bool:
        """A working driver the host itself provides (not the operator's driver container)."""
        return self.driver_installed and not self.operator_driver

    def summary(self) -> dict[str, Any]:
        return {
            "gpuCount": self.gpu_count,
            "gpus": list(self.gpus),
            "hostDriver": self.driver_version if self.host_driver else None,
            "nouveauLoaded": self.nouveau_loaded,
            "kernelHeaders": self.kernel_headers,
            "rdmaPorts": list(self.rdma_ports),
            "warnings": list(self.warnings),
        }


def parse_preflight(stdout: str) -> PreflightResult:
    """The result in the last summary line of the preflight's output; ValueError when there is none."""
    lines = [line for line in stdout.splitlines() if line.startswith(PREFLIGHT_MARKER)]
    if not lines:
        raise ValueError(f"no '{PREFLIGHT_MARKER.strip()}' line in the GPU preflight output")
    data = json.loads(lines[-1][len(PREFLIGHT_MARKER) :])
    return PreflightResult(
        host=str(data["host"]),
        status=str(data["status"]),
        gpu_count=int(data["gpuCount"]),
        gpus=tuple(data["gpus"]),
        nouveau_loaded=bool(data["nouveauLoaded"]),
        nouveau_blacklisted=bool(data["nouveauBlacklisted"]),
        driver_installed=bool(data["driverInstalled"]),
        driver_version=str(data["driverVersion"]),
        operator_driver=bool(data["operatorDriver"]),
        kernel=str(data["kernel"]),
        kernel_headers=bool(data["kernelHeaders"]),
        warnings=tuple(data["warnings"]),
        # Absent from the summaries of releases before network.rdma (a recorded output read again).
        rdma_ports=tuple(data.get("rdmaPorts", ())),
        peermem_loaded=bool(data.get("peermemLoaded", False)),
    )


def preflight_runs(gpu_operator: GpuOperatorSpec, cluster: ClusterSpec) -> bool:
    """Whether every node runs the GPU preflight (first, before the rest of its preparation)."""
    return cluster.mode == "kubeadm" and gpu_operator.enabled


def own_preflight_command(gpu_operator: GpuOperatorSpec, cluster: ClusterSpec, node: NodeSpec) -> bool:
    """Whether the node runs the preflight as a command of its own: a GPU node, whose result decides its driver
    (a value its label and the GPU Operator wait for, so it must not change whenever the preparation re-runs).
    Any other node only looks for GPUs nobody declared, which only a warning reads: that look is the first part
    of its preparation, one resource (and ~37 KB of state) less per node."""
    return preflight_runs(gpu_operator, cluster) and node.gpu is not None


def looks_in_preparation(gpu_operator: GpuOperatorSpec, cluster: ClusterSpec, node: NodeSpec) -> bool:
    """Whether the node's preparation starts with the look for undeclared GPUs (see own_preflight_command)."""
    return preflight_runs(gpu_operator, cluster) and node.gpu is None


def preflight_step(node: NodeSpec) -> NodeStep:
    """A GPU node's own command (it must have a GPU); on any other node the look for undeclared GPUs, a part of
    its preparation (a found GPU is reported)."""
    expect = node.gpu is not None
    title = "GPU preflight: devices, nouveau, host driver, kernel headers" if expect else "Look for NVIDIA GPUs"
    return rendered_step(PREFLIGHT_STEP, title, {"EXPECT_GPU": str(expect).lower()})


def node_driver_mode(gpu_operator: GpuOperatorSpec, node: NodeSpec, result: PreflightResult | None) -> DriverMode:
    """Who provides this node's driver: the node's setting, else the cluster's, else what the host has."""
    assert node.gpu is not None
    chosen = node.gpu.driver or gpu_operator.driver
    if chosen != "auto":
        return chosen
    return "preinstalled" if result is not None and result.host_driver else "operator"


def chart_driver_enabled(gpu_operator: GpuOperatorSpec, cluster: ClusterSpec, modes: Mapping[str, DriverMode]) -> bool:
    """The chart's driver.enabled: on when any node needs the operator's driver."""
    if cluster.mode == "existing" or not modes:
        # No SSH, no preflight: managed providers' GPU node images ship the driver.
        chosen = gpu_operator.driver
        if chosen == "auto":
            return cluster.defaults.gpu_driver != "preinstalled"
        return chosen == "operator"
    return any(mode == "operator" for mode in modes.values())


def waits_on_preflight(gpu_operator: GpuOperatorSpec, node: NodeSpec) -> bool:
    """Whether this node's driver (and its driver label) is decided by its GPU preflight (`auto`)."""
    return node.gpu is not None and (node.gpu.driver or gpu_operator.driver) == "auto"


def planned_gpu_labels(node: NodeSpec) -> dict[str, str]:
    """The labels the stack alone decides (MIG profile, device-plugin config): plain values in every plan."""
    assert node.gpu is not None
    labels: dict[str, str] = {}
    if node.gpu.mig_config is not None:
        labels[MIG_CONFIG_LABEL] = node.gpu.mig_config
    if node.gpu.time_slicing_replicas is not None:
        labels[DEVICE_PLUGIN_CONFIG_LABEL] = time_slicing_config_name(node.gpu.time_slicing_replicas)
    return labels


def driver_label(driver_mode: DriverMode) -> str:
    """The driver label's value once the preflight has decided: `false` keeps the operator's driver off the node,
    `true` is what the operator itself sets on a node without a host driver. Used only where the label waits
    on the preflight, so that the key is always there and only its value is unknown in preview."""
    return "false" if driver_mode == "preinstalled" else "true"


def gpu_node_labels(spec: Spec, node: NodeSpec, driver_mode: DriverMode) -> dict[str, str]:
    """The GPU Operator labels of one GPU node whose driver is known from the stack (no preflight needed)."""
    labels = planned_gpu_labels(node)
    if driver_mode == "preinstalled":
        labels[DRIVER_DEPLOY_LABEL] = "false"
    return labels


def time_slicing_config_name(replicas: int) -> str:
    return f"time-slicing-{replicas}"


def device_plugin_config(mig_strategy: str, replicas: int | None) -> dict[str, Any]:
    """One device-plugin config file (upstream `version: v1` format)."""
    config: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": mig_strategy}}
    if replicas is not None:
        config["sharing"] = {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}}
    return config


def device_plugin_configs(gpu_operator: GpuOperatorSpec, nodes: tuple[NodeSpec, ...]) -> dict[str, str]:
    """ConfigMap data: `default` (cluster-wide sharing or none) and one entry per per-node replica count."""
    gpu = gpu_operator
    per_node = sorted({n.gpu.time_slicing_replicas for n in nodes if n.gpu is not None and n.gpu.time_slicing_replicas})
    if gpu.time_slicing_replicas is None and not per_node:
        return {}
    default = device_plugin_config(gpu.mig_strategy, gpu.time_slicing_replicas)
    data = {DEFAULT_DEVICE_PLUGIN_CONFIG: yaml_text.dump(default)}
    for replicas in per_node:
        data[time_slicing_config_name(replicas)] = yaml_text.dump(device_plugin_config(gpu.mig_strategy, replicas))
    return data


def gpu_taint_toleration() -> dict[str, str]:
    taint = parse_taint(GPU_TAINT)
    return {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}


def dcgm_exporter_values(spec: Spec) -> dict[str, Any]:
    gpu = spec.gpu_operator
    scraped = dcgm_scraped(spec)
    values: dict[str, Any] = {
        "enabled": gpu.dcgm_exporter,
        "serviceMonitor": {"enabled": gpu.service_monitor or scraped},
    }
    if scraped:
        # A counters list replaces the exporter's default one: the defaults plus what the fault alerts read.
        values["config"] = {"name": DCGM_METRICS_CONFIG, "create": True, "data": dcgm_counters_csv()}
    return values


def driver_wait_selector(gpu_operator: GpuOperatorSpec, upgrade: UpgradeSpec) -> str:
    """The pods a driver rollout waits for: the given selector, else the pods `upgrade.gpuJobs` protects
    during a Kubernetes upgrade (none when those may be evicted)."""
    given = gpu_operator.driver_upgrade_policy.wait_for_completion.pod_selector
    if given is not None:
        return given
    return KUEUE_ADMITTED_SELECTOR if upgrade.gpu_jobs == "wait" else ""


def driver_upgrade_policy(gpu_operator: GpuOperatorSpec, upgrade: UpgradeSpec) -> dict[str, Any]:
    """The chart's driver.upgradePolicy, every key given: the template writes an unset timeout as null."""
    policy = gpu_operator.driver_upgrade_policy
    deletion, drain = policy.gpu_pod_deletion, policy.drain
    count = policy.max_unavailable
    return {
        "autoUpgrade": policy.auto_upgrade,
        "maxParallelUpgrades": policy.max_parallel_upgrades,
        "maxUnavailable": count if count.endswith("%") else int(count),
        "waitForCompletion": {
            "timeoutSeconds": policy.wait_for_completion.timeout_seconds,
            "podSelector": driver_wait_selector(gpu_operator, upgrade),
        },
        "gpuPodDeletion": {
            "force": deletion.force,
            "timeoutSeconds": deletion.timeout_seconds,
            "deleteEmptyDir": deletion.delete_empty_dir,
        },
        "drain": {
            "enable": drain.enable,
            "force": drain.force,
            "podSelector": drain.pod_selector,
            "timeoutSeconds": drain.timeout_seconds,
            "deleteEmptyDir": drain.delete_empty_dir,
        },
    }


def driver_rdma(network: NetworkSpec) -> dict[str, Any] | None:
    """driver.rdma with network.rdma: GPUDirect RDMA (nvidia-peermem) in the operator's driver container, over
    the host's MOFED when the site installs it, else after the Network Operator's driver container."""
    rdma = network.rdma
    return {"enabled": True, "useHostMofed": rdma.driver == "host"} if rdma.enabled else None


def gpu_operator_values(spec: Spec, driver_enabled: object) -> dict[str, Any]:
    """Chart values; driver_enabled is a bool, or an Output of one when it waits on the preflight."""
    gpu = spec.gpu_operator
    driver: dict[str, Any] = {
        "enabled": driver_enabled,
        "upgradePolicy": driver_upgrade_policy(spec.gpu_operator, spec.upgrade),
    }
    if (rdma := driver_rdma(spec.network)) is not None:
        driver["rdma"] = rdma
    if gpu.driver_version is not None:
        driver["version"] = gpu.driver_version
    toolkit = gpu.toolkit if gpu.toolkit is not None else not spec.cluster.defaults.container_toolkit_preinstalled
    values: dict[str, Any] = {
        "driver": driver,
        "toolkit": {
            "enabled": toolkit,
            # The toolkit's containerd settings go to a drop-in that our config.toml imports, so neither
            # side rewrites the other's file (components/scripts/containerd.sh keeps the import).
            "env": [
                {"name": "RUNTIME_DROP_IN_CONFIG", "value": "/etc/containerd/conf.d/99-nvidia.toml"},
                *SECURE_TOOLKIT_ENV,
            ],
        },
        # Pinned on (the chart's default): GPUs reach a container as CDI devices that containerd injects for
        # what the kubelet allocated, and the nvidia runtime is not containerd's default, so an environment
        # variable in a plain pod selects nothing (docs/gpu.md, Secure accelerator access).
        "cdi": {"enabled": True},
        "mig": {"strategy": gpu.mig_strategy},
        "dcgmExporter": dcgm_exporter_values(spec),
    }
    if fault_mode(spec) != "off":
        # NVSentinel's GPU health monitor reads a standalone DCGM hostengine (the nvidia-dcgm Service).
        values["dcgm"] = {"enabled": True}
    if gpu.dra:
        # NVIDIA's DRA driver publishes the GPUs as ResourceSlices; the device plugin must not also advertise them.
        values["devicePlugin"] = {"enabled": False}
    else:
        values["devicePlugin"] = {"env": list(SECURE_DEVICE_PLUGIN_ENV)}
        configs = device_plugin_configs(spec.gpu_operator, spec.nodes)
        if configs:
            values["devicePlugin"]["config"] = {
                "create": True,
                "name": DEVICE_PLUGIN_CONFIG_MAP,
                "default": DEFAULT_DEVICE_PLUGIN_CONFIG,
                "data": configs,
            }
    return _with_platform_tolerations(spec, values, OPERATOR_CONTROLLERS)


OPERATOR_CONTROLLERS = ("operator", "node-feature-discovery.master", "node-feature-discovery.gc")
"""The operator's own Deployments (its DaemonSets already tolerate the GPU taint)."""
DRA_CONTROLLERS = ("controller",)


def _with_platform_tolerations(spec: Spec, values: dict[str, Any], controllers: Sequence[str]) -> dict[str, Any]:
    """Adds the platform's tolerations to each controller; a given list replaces the chart's, whose
    control-plane toleration is therefore given again."""
    extra = platform_tolerations(spec)
    if not extra:
        return values
    seeded = tolerating(values, [f"{c}.tolerations" for c in controllers], [CONTROL_PLANE_TOLERATION])
    return tolerating(seeded, [f"{c}.tolerations" for c in controllers], extra)


def gpu_operator_release(spec: Spec, driver_enabled: object = None) -> ChartRelease:
    gpu = spec.gpu_operator
    if driver_enabled is None:
        driver_enabled = chart_driver_enabled(spec.gpu_operator, spec.cluster, {})
    return ChartRelease(
        name="gpu-operator",
        chart="gpu-operator",
        repository=NGC_REPOSITORY,
        version=gpu.version,
        namespace=gpu.namespace,
        values=gpu_operator_values(spec, driver_enabled),
        timeout_seconds=gpu.timeout_minutes * 60,
        upstream_chart="gpu-operator",
    )


def dra_driver_values(spec: Spec, driver_root: object) -> dict[str, Any]:
    values = {
        "nvidiaDriverRoot": driver_root,
        # The chart ships GPU (not only ComputeDomain) DeviceClasses only with this override.
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}},
        "kubeletPlugin": {"tolerations": [gpu_taint_toleration()]},
    }
    return _with_platform_tolerations(spec, values, DRA_CONTROLLERS)


def dra_driver_release(spec: Spec, driver_root: object) -> ChartRelease:
    return ChartRelease(
        name=DRA_RELEASE,
        chart="nvidia-dra-driver-gpu",
        repository=NGC_REPOSITORY,
        version=spec.gpu_operator.dra_driver_version,
        namespace=DRA_NAMESPACE,
        values=dra_driver_values(spec, driver_root),
        timeout_seconds=600,
        upstream_chart="nvidia-dra-driver-gpu",
    )


def driver_root(driver_enabled: bool) -> str:
    return OPERATOR_DRIVER_ROOT if driver_enabled else HOST_DRIVER_ROOT


def config_warnings(nodes: tuple[NodeSpec, ...], gpu_operator: GpuOperatorSpec) -> list[str]:
    """Allowed but probably not meant: reported at preview and up."""
    warnings = []
    for i, node in enumerate(nodes):
        if node.gpu and node.gpu.mig_config and gpu_operator.mig_strategy == "none" and not gpu_operator.dra:
            warnings.append(
                f"mlcluster:nodes[{i}].gpu.migConfig: {node.gpu.mig_config} partitions {node.name}'s GPUs, but with"
                " gpuOperator.migStrategy none the device plugin still offers them as whole nvidia.com/gpu"
                " (set migStrategy single or mixed to schedule MIG slices)"
            )
    return warnings


def gpu_nodes(nodes: tuple[NodeSpec, ...]) -> tuple[NodeSpec, ...]:
    return tuple(n for n in nodes if n.gpu is not None)


def preflight_report(
    nodes: tuple[NodeSpec, ...],
    gpu_operator: GpuOperatorSpec,
    network: NetworkSpec,
    results: Mapping[str, PreflightResult],
) -> tuple[dict[DriverMode, list[str]], list[str], list[str]]:
    """(driver decision per mode -> nodes, info lines, warning lines) for what `up` reports."""
    by_name = {n.name: n for n in nodes}
    decided: dict[DriverMode, list[str]] = {"operator": [], "preinstalled": []}
    infos: list[str] = []
    warnings: list[str] = []
    for name, result in sorted(results.items()):
        node = by_name[name]
        where = f"{name} ({node.host})"
        warnings += [f"{where}: {w}" for w in result.warnings]
        if node.gpu is None:
            continue
        mode = node_driver_mode(gpu_operator, node, result)
        decided[mode].append(name)
        driver = f"host driver {result.driver_version}" if result.host_driver else "no host driver"
        infos.append(
            f"{where}: {result.gpu_count} NVIDIA GPU(s) ({'; '.join(result.gpus) or 'none'}), {driver},"
            f" kernel {result.kernel} headers {'present' if result.kernel_headers else 'absent'} -> driver: {mode}"
        )
        if mode == "preinstalled" and not result.host_driver:
            warnings.append(f"{where}: driver is preinstalled by configuration but nvidia-smi found no working driver")
        if node.gpu.count != result.gpu_count:
            warnings.append(f"{where}: nodes[].gpu.count is {node.gpu.count} but the host shows {result.gpu_count}")
        if network.rdma.enabled:
            warnings += _rdma_warnings(network, where, result)
    return decided, infos, warnings


def _rdma_warnings(network: NetworkSpec, where: str, result: PreflightResult) -> list[str]:
    """A GPU node of a stack with network.rdma whose NICs the preflight did not find ready: its multi-node jobs
    would wait for an RDMA resource the node never advertises."""
    active = [port for port in result.rdma_ports if ": ACTIVE," in port]
    if not active:
        return [f"{where}: network.rdma is on but the host has no ACTIVE RDMA port ({len(result.rdma_ports)} found)"]
    netdevs = {
        name for port in result.rdma_ports if ", netdev " in port for name in port.split(", netdev ")[1].split(",")
    }
    missing = [name for name in network.rdma.nics.if_names if name not in netdevs]
    if missing:
        return [
            f"{where}: network.rdma.nics.ifNames {', '.join(missing)} not on any RDMA port of the host"
            f" (its RDMA netdevs: {', '.join(sorted(netdevs)) or 'none'})"
        ]
    return []
