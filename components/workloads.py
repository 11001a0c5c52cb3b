"""Workloads: the seeds' jobs (YOLO batch inference, checkpointed training) as Kubernetes objects.

depends_on is what the jobs need first (GPU Operator, Kueue, the Trainer, storage).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from .config.spec import Spec
from .config.workloads import YOLO_JOB_NAME
from .platform_layer import PlatformLayer
from .render.workloads import claims_used, workload_manifests, workloads_namespace

YOLO_TIMEOUT = "30m"
"""`up` waits for the YOLO Job to succeed: a 10+ GB image pull, queueing and the prediction itself."""


class Workloads(PlatformLayer):
    type_token = "mlcluster:workloads:Workloads"
    layer_name = "workloads"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        after = self.after
        if spec.workloads.create_namespace:
            after = [*after, self.manifest(workloads_namespace(spec))]
        self.objects: dict[str, pulumi.CustomResource] = {}
        claims: dict[str, pulumi.Resource] = {}
        for manifest in workload_manifests(spec):
            name = manifest["metadata"]["name"]
            is_yolo = manifest["kind"] == "Job" and name == YOLO_JOB_NAME
            timeouts = pulumi.CustomTimeouts(create=YOLO_TIMEOUT) if is_yolo else None
            mounted = [claims[claim] for claim in sorted(claims_used(manifest))]
            resource = self.manifest(manifest, [*after, *mounted], custom_timeouts=timeouts)
            if manifest["kind"] == "PersistentVolumeClaim":
                claims[name] = resource
            self.objects[f"{manifest['kind']}/{name}"] = resource
        return {"objects": sorted(self.objects)}
