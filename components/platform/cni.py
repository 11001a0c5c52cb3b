"""Cni: Calico CNI (tigera-operator), so nodes become Ready."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.spec import Spec
from ..render.cni import calico_untested_problem, cni_release
from ..warnings import warn
from .platform_layer import PlatformLayer


class Cni(PlatformLayer):
    type_token = "mlcluster:cni:Cni"
    layer_name = "cni"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        untested = calico_untested_problem(spec.kubernetes_version)
        if untested is not None:
            warn("kubernetesVersion", untested)
        self.release = self.chart(cni_release(spec.cluster))
        return {"status": self.release.status}
