"""GpuOperator: NVIDIA GPU Operator (drivers, container toolkit, device plugin, MIG, DCGM)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from .config.spec import Spec
from .helm_release import helm_release
from .render.gpu_operator import gpu_operator_release


class GpuOperator(pulumi.ComponentResource):
    def __init__(
        self,
        spec: Spec,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:gpu_operator:GpuOperator", "gpu-operator", None, opts)
        self.release = helm_release(gpu_operator_release(spec), provider, parent=self, depends_on=depends_on)
        self.register_outputs({"status": self.release.status})
