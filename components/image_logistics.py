"""ImageLogistics: Spegel for peer-to-peer layers, and pre-pull DaemonSets for the declared ML images."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config.spec import Spec
from .platform_layer import PlatformLayer
from .render import manifests
from .render.images import PREPULL_NAMESPACE, planned_images, prepull_daemonset, spegel_release


class ImageLogistics(PlatformLayer):
    type_token = "mlcluster:image_logistics:ImageLogistics"
    layer_name = "images"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        if spec.images.spegel.enabled:
            self.chart(spegel_release(spec))
        if spec.images.prepull:
            namespace = self.manifest(manifests.namespace(PREPULL_NAMESPACE))
            for image_set in spec.images.prepull:
                self.manifest(
                    prepull_daemonset(image_set, spec.kubelet.image_pull_progress_deadline), [*self.after, namespace]
                )
        # Planned, from the stack: which node should hold which images once its pre-pull pod ran.
        self.planned = dict(planned_images(spec))
        return {"plannedImages": self.planned}
