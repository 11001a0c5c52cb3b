"""Serving: cert-manager, then KServe (CRDs before the controller) for autoscaled model endpoints."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from .config.spec import Spec
from .helm_release import helm_release
from .render.serving import cert_manager_release, kserve_releases


class Serving(pulumi.ComponentResource):
    def __init__(
        self,
        spec: Spec,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:serving:Serving", "serving", None, opts)
        previous: list[pulumi.Resource] = [
            helm_release(cert_manager_release(spec), provider, parent=self, depends_on=depends_on)
        ]
        for release in kserve_releases(spec):
            previous = [helm_release(release, provider, parent=self, depends_on=previous)]
        self.register_outputs({})
