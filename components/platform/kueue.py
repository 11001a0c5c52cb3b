"""Kueue: the release, then the flavors, team queues and priorities derived from the stack's GPUs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from ..config.derived import gpu_flavors
from ..config.spec import Spec
from ..render.kueue import kueue_objects, kueue_release
from .kubernetes_object import resource_name
from .platform_layer import PlatformLayer


class Kueue(PlatformLayer):
    type_token = "mlcluster:kueue:Kueue"
    layer_name = "kueue"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        self.release = self.chart(kueue_release(spec))
        self.objects: dict[str, pulumi.CustomResource] = {}
        namespaces: dict[str, pulumi.CustomResource] = {}
        for manifest in kueue_objects(spec):
            namespace = manifest["metadata"].get("namespace")
            # The release first, so the CRDs and the validating webhook exist.
            waits_for: list[pulumi.Resource] = [self.release]
            if namespace in namespaces:
                waits_for.append(namespaces[namespace])
            # Generic objects (not apiextensions.CustomResource): WorkloadPriorityClass has no `spec`.
            resource = self.manifest(manifest, waits_for)
            if manifest["kind"] == "Namespace":
                namespaces[str(manifest["metadata"]["name"])] = resource
            self.objects[f"{manifest['kind']}/{resource_name(manifest)}"] = resource
        capacity = {name: dict(flavor.capacity) for name, flavor in sorted(gpu_flavors(spec).items())}
        return {"status": self.release.status, "gpuCapacity": capacity}
