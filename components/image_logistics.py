"""ImageLogistics: Spegel for peer-to-peer layers, and pre-pull DaemonSets for the declared ML images."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from .config.spec import Spec
from .helm_release import helm_release
from .render.images import PREPULL_NAMESPACE, planned_images, prepull_daemonset, spegel_release


class ImageLogistics(pulumi.ComponentResource):
    def __init__(
        self,
        spec: Spec,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:image_logistics:ImageLogistics", "images", None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(depends_on))
        if spec.images.spegel.enabled:
            helm_release(spegel_release(spec), provider, parent=self, depends_on=depends_on)
        if spec.images.prepull:
            namespace = k8s.core.v1.Namespace(PREPULL_NAMESPACE, metadata={"name": PREPULL_NAMESPACE}, opts=child)
            for image_set in spec.images.prepull:
                document = prepull_daemonset(image_set, spec.kubelet.image_pull_progress_deadline)
                k8s.apps.v1.DaemonSet(
                    document["metadata"]["name"],
                    metadata=document["metadata"],
                    spec=document["spec"],
                    opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[namespace])),
                )
        # Planned, from the stack: which node should hold which images once its pre-pull pod ran.
        self.planned = dict(planned_images(spec))
        self.register_outputs({"plannedImages": self.planned})
