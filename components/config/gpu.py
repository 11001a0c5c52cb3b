"""GPU Operator settings, and the rules that tie them to the nodes and the Kubernetes version."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import yaml

from . import checks, go_yaml
from .schema import Problems, join_path, setting

# Labels the GPU Operator's components read (upstream names); mlcluster sets them from the stack.
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
"""mig-manager partitions the node's GPUs into this mig-parted profile (e.g. all-1g.18gb)."""
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
"""The device plugin reads this key of its ConfigMap instead of the default one."""
DRIVER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.driver"
"""`false` keeps the operator's driver DaemonSet off a node whose host driver is used."""
DERIVED_GPU_LABELS = {
    MIG_CONFIG_LABEL: "gpu.migConfig",
    DEVICE_PLUGIN_CONFIG_LABEL: "gpu.timeSlicingReplicas",
    DRIVER_DEPLOY_LABEL: "gpuOperator.driver (and the GPU preflight)",
}
"""Labels mlcluster sets on GPU nodes from other settings: declared in nodes[].labels too, two writers would fight."""


DRA_MINIMUM_KUBERNETES = (1, 34)
"""resource.k8s.io/v1 (Dynamic Resource Allocation) is GA, and on by default, from Kubernetes 1.34."""
KUEUE_ADMITTED_SELECTOR = "kueue.x-k8s.io/podset"
"""Kueue sets this label on the pods of every workload it admits (the first label `upgrade.gpuJobs` looks for)."""


def non_negative(value: int) -> str | None:
    """A count or timeout where 0 has a meaning of its own (no limit, wait forever); the parser caps it at int32."""
    return None if value >= 0 else "must be 0 or more"


def chart_selector(value: str) -> str | None:
    """A label selector the chart can carry: its ClusterPolicy template writes podSelector unquoted, and the
    manifest's reader (sigs.k8s.io/yaml) must take it back as this text: not a tag (`!key` first), not a number
    (`1e3`, `0o17`, `1_000`), a boolean (`y`, `on`) or null."""
    problem = checks.label_selector(value)
    if problem is None and value.strip():
        try:
            events = list(yaml.parse(f"podSelector: {value}"))
        except yaml.YAMLError:
            events = []
        scalars = [e for e in events if isinstance(e, yaml.ScalarEvent)]
        plain = len(scalars) == 2 and scalars[1].value == value and scalars[1].implicit[0] and not scalars[1].tag
        if not plain or not go_yaml.reads_back_as_text(value):
            words = {"bool": "a boolean", "number": "a number", "null": "null", "unreadable": "an infinity or NaN"}
            read = words[go_yaml.plain_scalar_kind(value)] if plain else "YAML syntax (a tag or another structure)"
            return (
                f"is written unquoted into the ClusterPolicy by the chart, where Kubernetes' YAML reader takes it as"
                f" {read}, not this text: put a `!key` term after another term, or add"
                " a term"
            )
    return problem


@dataclass(frozen=True)
class WaitForCompletionSpec:
    pod_selector: str | None = setting(
        None,
        doc="Label selector of the pods the driver upgrade waits for on a node before it touches the driver; an"
        f" empty string waits for none. Default: `{KUEUE_ADMITTED_SELECTOR}` (pods of Kueue-admitted jobs) with"
        " `upgrade.gpuJobs: wait`, none with `upgrade.gpuJobs: evict`.",
        check=chart_selector,
    )
    timeout_seconds: int = setting(
        0,
        doc="How long a node waits for those pods; 0 waits until they finish. Past it the operator deletes them.",
        check=non_negative,
    )


@dataclass(frozen=True)
class GpuPodDeletionSpec:
    force: bool = setting(False, doc="Also delete GPU pods that no controller manages (they are not recreated).")
    timeout_seconds: int = setting(
        300, doc="How long the operator waits for GPU pods to terminate; 0 waits forever.", check=non_negative
    )
    delete_empty_dir: bool = setting(False, doc="Also delete GPU pods that use emptyDir volumes (their data is lost).")


@dataclass(frozen=True)
class DriverDrainSpec:
    enable: bool = setting(
        False, doc="Drain the node (`kubectl drain`) before the driver reloads, beyond deleting its GPU pods."
    )
    force: bool = setting(False, doc="Drain pods that no controller manages too.")
    pod_selector: str = setting(
        "", doc="Label selector of the pods the drain evicts; empty: every pod.", check=chart_selector
    )
    timeout_seconds: int = setting(300, doc="How long the drain may take; 0 waits forever.", check=non_negative)
    delete_empty_dir: bool = setting(False, doc="Drain pods that use emptyDir volumes (their data is lost).")


@dataclass(frozen=True)
class DriverUpgradePolicySpec:
    """The chart's driver.upgradePolicy, under the same names (docs/cluster-care.md, GPU driver upgrades)."""

    auto_upgrade: bool = setting(
        True,
        doc="Let the operator roll a new driver out node by node (cordon, wait, delete GPU pods, reload); false:"
        " a new driver reaches a node only when its driver pod is deleted by hand.",
    )
    max_parallel_upgrades: int = setting(
        1, doc="Nodes whose driver is upgraded at the same time; 0: no limit.", check=non_negative
    )
    max_unavailable: str = setting(
        "25%",
        doc="GPU nodes that may be unavailable during a driver rollout: a count or a percentage (rounded up).",
        check=checks.max_unavailable,
    )
    wait_for_completion: WaitForCompletionSpec = setting(
        default_factory=WaitForCompletionSpec, doc="Running GPU jobs a node waits for before its driver moves."
    )
    gpu_pod_deletion: GpuPodDeletionSpec = setting(
        default_factory=GpuPodDeletionSpec, doc="How the pods still using the GPUs are deleted."
    )
    drain: DriverDrainSpec = setting(default_factory=DriverDrainSpec, doc="Optional node drain before the reload.")


@dataclass(frozen=True)
class GpuOperatorSpec:
    enabled: bool = setting(True, doc="Install the NVIDIA GPU Operator (drivers, toolkit, device plugin, DCGM).")
    version: str = setting("v26.7.0", doc="gpu-operator chart version.", check=checks.pinned_chart_version)
    namespace: str = setting("gpu-operator", doc="Namespace of the release.", check=checks.k8s_name)
    driver: Literal["auto", "operator", "preinstalled"] = setting(
        "auto",
        doc="Who provides the NVIDIA driver: `auto` decides from the GPU preflight (a host driver that works"
        " means `preinstalled`), `operator` builds/loads it in a container, `preinstalled` uses the host's.",
    )
    driver_version: str | None = setting(
        None, doc="Driver version the operator installs (chart default if unset).", check=checks.version_tag
    )
    mig_strategy: Literal["none", "single", "mixed"] = setting("none", doc="MIG strategy of the device plugin.")
    time_slicing_replicas: int | None = setting(
        None, doc="Cluster-wide time-slicing: pods that may share each GPU.", check=checks.between(2, 64)
    )
    toolkit: bool | None = setting(
        None,
        doc="Run the operator's NVIDIA container toolkit (default: off where the provider table in docs/cloud.md"
        " says the toolkit is preinstalled, on everywhere else).",
    )
    dcgm_exporter: bool = setting(True, doc="Run the DCGM exporter for GPU metrics.")
    service_monitor: bool = setting(False, doc="Create a ServiceMonitor for DCGM (needs Prometheus Operator CRDs).")
    dra: bool = setting(False, doc="Use NVIDIA's DRA driver instead of the device plugin (Kubernetes >= 1.34).")
    dra_driver_version: str = setting(
        "25.8.0", doc="nvidia-dra-driver-gpu chart version (with `dra: true`).", check=checks.pinned_chart_version
    )
    driver_upgrade_policy: DriverUpgradePolicySpec = setting(
        default_factory=DriverUpgradePolicySpec,
        doc="How the operator rolls a driver version change out over the GPU nodes (driver: operator).",
    )
    timeout_minutes: int = setting(
        40,
        doc="How long `up` waits for the release to be ready (driver builds take tens of minutes).",
        check=checks.between(5, 240),
    )

    def validate(self, path: str, problems: Problems) -> None:
        if self.time_slicing_replicas is not None and self.mig_strategy == "mixed":
            problems.error(
                join_path(path, "timeSlicingReplicas"),
                "cannot be combined with migStrategy mixed (each MIG profile is its own resource there)",
            )
        if self.dra and self.time_slicing_replicas is not None:
            problems.error(
                join_path(path, "timeSlicingReplicas"), "is a device-plugin setting: it does not apply with dra: true"
            )
        if self.service_monitor and not self.dcgm_exporter:
            problems.error(join_path(path, "serviceMonitor"), "needs dcgmExporter: true")
