"""GPU Operator settings, and the rules that tie them to the nodes and the Kubernetes version."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from . import checks
from .schema import Problems, join_path, setting

if TYPE_CHECKING:
    from .spec import Spec

DRA_MINIMUM_KUBERNETES = (1, 34)
"""resource.k8s.io/v1 (Dynamic Resource Allocation) is GA, and on by default, from Kubernetes 1.34."""


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
    dcgm_exporter: bool = setting(True, doc="Run the DCGM exporter for GPU metrics.")
    service_monitor: bool = setting(False, doc="Create a ServiceMonitor for DCGM (needs Prometheus Operator CRDs).")
    dra: bool = setting(False, doc="Use NVIDIA's DRA driver instead of the device plugin (Kubernetes >= 1.34).")
    dra_driver_version: str = setting(
        "25.8.0", doc="nvidia-dra-driver-gpu chart version (with `dra: true`).", check=checks.pinned_chart_version
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


def validate_gpu(spec: Spec, problems: Problems) -> None:
    """Rules between gpuOperator, the Kubernetes version and the nodes' gpu sections."""
    gpu = spec.gpu_operator
    if gpu.dra and checks.k8s_version(spec.kubernetes_version) is None:
        major, minor, _ = checks.version_tuple(spec.kubernetes_version)
        if (major, minor) < DRA_MINIMUM_KUBERNETES:
            problems.error(
                "gpuOperator.dra",
                f"needs Kubernetes >= {'.'.join(map(str, DRA_MINIMUM_KUBERNETES))} (DRA is GA there);"
                f" kubernetesVersion is {spec.kubernetes_version}",
            )
    for i, node in enumerate(spec.nodes):
        if node.gpu is None:
            continue
        path = f"nodes[{i}].gpu"
        if node.gpu.time_slicing_replicas is not None:
            if gpu.dra:
                problems.error(
                    join_path(path, "timeSlicingReplicas"), "is a device-plugin setting: it does not apply with dra"
                )
            elif gpu.mig_strategy == "mixed":
                problems.error(
                    join_path(path, "timeSlicingReplicas"), "cannot be combined with gpuOperator.migStrategy mixed"
                )
