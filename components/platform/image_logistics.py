"""ImageLogistics: Spegel for peer-to-peer layers, and pre-pull DaemonSets for the declared ML images."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from ..config.derived import prepull_sets
from ..config.spec import Spec
from ..render import manifests
from ..render.images import (
    PREPULL_NAMESPACE,
    planned_images,
    prepull_await_seconds,
    prepull_daemonset,
    spegel_release,
)
from ..render.seed import site_mirrors
from .platform_layer import PlatformLayer


class ImageLogistics(PlatformLayer):
    type_token = "mlcluster:image_logistics:ImageLogistics"
    layer_name = "images"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        if spec.images.spegel.enabled:
            self.chart(spegel_release(spec.images, spec.nodes, site_mirrors(spec.air_gap, spec.nodes)))
        if prepull_sets(spec):
            namespace = self.manifest(manifests.namespace(PREPULL_NAMESPACE))
            for image_set in prepull_sets(spec):
                # The rollout waits for every image of the set to be pulled: its timeout follows their sizes.
                timeout = f"{prepull_await_seconds(image_set)}s"
                self.manifest(
                    prepull_daemonset(image_set, spec.kubelet.image_pull_progress_deadline),
                    [*self.after, namespace],
                    custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
                )
        # Planned, from the stack: which node should hold which images once its pre-pull pod ran.
        self.planned = dict(planned_images(spec))
        return {"plannedImages": self.planned}
