"""Cni: Calico CNI (tigera-operator), so nodes become Ready."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.spec import Spec
from ..render.cni import cni_release
from .platform_layer import PlatformLayer


class Cni(PlatformLayer):
    type_token = "mlcluster:cni:Cni"
    layer_name = "cni"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        self.release = self.chart(cni_release(spec.cluster))
        return {"status": self.release.status}
