"""GPU Operator settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import checks
from .schema import setting


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
    driver_version: str | None = setting(None, doc="Driver version the operator installs (chart default if unset).")
    mig_strategy: Literal["none", "single", "mixed"] = setting("none", doc="MIG strategy of the device plugin.")
    time_slicing_replicas: int | None = setting(
        None, doc="Cluster-wide time-slicing: pods that may share each GPU.", check=checks.between(2, 64)
    )
    dcgm_exporter: bool = setting(True, doc="Run the DCGM exporter for GPU metrics.")
    service_monitor: bool = setting(False, doc="Create a ServiceMonitor for DCGM (needs Prometheus Operator CRDs).")
    dra: bool = setting(False, doc="Use NVIDIA's DRA driver instead of the device plugin (Kubernetes >= 1.34).")
    timeout_minutes: int = setting(
        40,
        doc="How long `up` waits for the release to be ready (driver builds take tens of minutes).",
        check=checks.between(5, 240),
    )
