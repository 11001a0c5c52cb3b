"""Workloads: the seeds' jobs (YOLO batch inference, checkpointed training) as Kubernetes objects.

depends_on is what the jobs need first (GPU Operator, Kueue, the Trainer, storage).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from ..config.spec import Spec
from ..config.workloads import YOLO_JOB_NAME
from ..render.images import declared_size_gib, pull_await_seconds
from ..render.workloads import claims_used, pod_images, workload_manifests, workloads_namespace
from .platform_layer import PlatformLayer

YOLO_RUN_SECONDS = 20 * 60
"""Queueing and the prediction itself, on top of the image pull `up` waits for (render.images.pull_await_seconds)."""


class Workloads(PlatformLayer):
    type_token = "mlcluster:workloads:Workloads"
    layer_name = "workloads"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        after = self.after
        if spec.workloads.create_namespace:
            after = [*after, self.manifest(workloads_namespace(spec.workloads))]
        self.objects: dict[str, pulumi.CustomResource] = {}
        claims: dict[str, pulumi.Resource] = {}
        for manifest in workload_manifests(spec):
            name = manifest["metadata"]["name"]
            is_yolo = manifest["kind"] == "Job" and name == YOLO_JOB_NAME
            timeouts = None
            if is_yolo:
                # `up` waits for the YOLO Job to succeed: its image's pull, at the size the stack declares, first.
                sizes = [declared_size_gib(spec.images, image) for image in pod_images(manifest)]
                timeouts = pulumi.CustomTimeouts(create=f"{pull_await_seconds(sizes, YOLO_RUN_SECONDS)}s")
            mounted = [claims[claim] for claim in sorted(claims_used(manifest))]
            resource = self.manifest(manifest, [*after, *mounted], custom_timeouts=timeouts)
            if manifest["kind"] == "PersistentVolumeClaim":
                claims[name] = resource
            self.objects[f"{manifest['kind']}/{name}"] = resource
        return {"objects": sorted(self.objects)}
