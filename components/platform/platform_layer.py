"""PlatformLayer: what every layer installed into the cluster shares.

A layer is built from the spec, through the cluster's Kubernetes provider, after `depends_on`. Subclasses
name their type token and resource name and implement `install`, which creates the children and returns
the outputs to register; registering them last is done here, once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pulumi
import pulumi_kubernetes as k8s

from ..config.spec import Spec
from ..render.helm import ChartRelease
from .helm_release import helm_release
from .kubernetes_object import kubernetes_object


class PlatformLayer(pulumi.ComponentResource):
    type_token: ClassVar[str]
    layer_name: ClassVar[str]

    def __init__(
        self,
        spec: Spec,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.type_token, self.layer_name, None, opts)
        self.provider = provider
        self.after = list(depends_on)
        self.air_gap = spec.air_gap
        self.register_outputs(dict(self.install(spec)))

    def install(self, spec: Spec) -> Mapping[str, Any]:
        raise NotImplementedError

    def child_options(self, after: Sequence[pulumi.Resource] | None = None, **extra: Any) -> pulumi.ResourceOptions:
        """Options of a child object: this layer's provider, after `after` (default: the layer's own)."""
        waits = self.after if after is None else list(after)
        return pulumi.ResourceOptions(parent=self, provider=self.provider, depends_on=waits, **extra)

    def chart(self, release: ChartRelease, after: Sequence[pulumi.Resource] | None = None) -> k8s.helm.v3.Release:
        return helm_release(
            release, self.provider, parent=self, depends_on=self.after if after is None else after, air_gap=self.air_gap
        )

    def manifest(
        self,
        document: Mapping[str, Any],
        after: Sequence[pulumi.Resource] | None = None,
        name: str | None = None,
        **extra: Any,
    ) -> pulumi.CustomResource:
        return kubernetes_object(document, self.child_options(after, **extra), name)
