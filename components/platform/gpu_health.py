"""GPU fault handling: NVSentinel watches the GPU Operator's DCGM health data and, as far as
`monitoring.faultHandling.mode` allows, cordons and drains GPU nodes that fail (docs/monitoring.md).

After the GPU Operator: NVSentinel's health monitor reads the operator's DCGM hostengine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.derived import fault_mode
from ..config.spec import Spec
from ..render.monitoring import nvsentinel_release
from .platform_layer import PlatformLayer


class GpuHealth(PlatformLayer):
    type_token = "mlcluster:gpu_health:GpuHealth"
    layer_name = "gpu-health"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        release = self.chart(nvsentinel_release(spec))
        return {"mode": fault_mode(spec), "status": release.status}
