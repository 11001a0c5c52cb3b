"""NVIDIA GPU Operator release values."""

from __future__ import annotations

from ..config.spec import Spec
from .helm import ChartRelease


def gpu_operator_release(spec: Spec) -> ChartRelease:
    gpu = spec.gpu_operator
    driver = spec.cluster.defaults.gpu_driver if gpu.driver == "auto" else gpu.driver
    values: dict[str, object] = {
        "driver": {"enabled": driver != "preinstalled"},
        "toolkit": {"enabled": True},
        "mig": {"strategy": gpu.mig_strategy},
        "dcgmExporter": {"enabled": gpu.dcgm_exporter},
    }
    return ChartRelease(
        name="gpu-operator",
        chart="gpu-operator",
        repository="https://helm.ngc.nvidia.com/nvidia",
        version=gpu.version,
        namespace=gpu.namespace,
        values=values,
        timeout_seconds=gpu.timeout_minutes * 60,
        upstream_chart="gpu-operator",
    )
