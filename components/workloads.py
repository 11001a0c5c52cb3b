"""Workloads: the seeds' jobs (YOLO batch inference, checkpointed training) as Kubernetes objects."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from .config.spec import Spec
from .config.workloads import YOLO_JOB_NAME
from .kubernetes_object import kubernetes_object
from .render.workloads import claims_used, workload_manifests, workloads_namespace

YOLO_TIMEOUT = "30m"
"""`up` waits for the YOLO Job to succeed: a 10+ GB image pull, queueing and the prediction itself."""


class Workloads(pulumi.ComponentResource):
    def __init__(
        self,
        spec: Spec,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """depends_on: what the jobs need first (GPU Operator, Kueue, the Trainer, storage)."""
        super().__init__("mlcluster:workloads:Workloads", "workloads", None, opts)
        after = list(depends_on)
        if spec.workloads.create_namespace:
            namespace = kubernetes_object(
                workloads_namespace(spec), pulumi.ResourceOptions(parent=self, provider=provider, depends_on=after)
            )
            after = [*after, namespace]
        self.objects: dict[str, pulumi.CustomResource] = {}
        claims: dict[str, pulumi.Resource] = {}
        for manifest in workload_manifests(spec):
            name = manifest["metadata"]["name"]
            is_yolo = manifest["kind"] == "Job" and name == YOLO_JOB_NAME
            timeouts = pulumi.CustomTimeouts(create=YOLO_TIMEOUT) if is_yolo else None
            mounted = [claims[claim] for claim in sorted(claims_used(manifest))]
            resource = kubernetes_object(
                manifest,
                pulumi.ResourceOptions(
                    parent=self, provider=provider, depends_on=[*after, *mounted], custom_timeouts=timeouts
                ),
            )
            if manifest["kind"] == "PersistentVolumeClaim":
                claims[name] = resource
            self.objects[f"{manifest['kind']}/{name}"] = resource
        self.register_outputs({"objects": sorted(self.objects)})
