"""Kueue: the release, then the flavors, team queues and priorities derived from the stack's GPUs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from ..config.derived import gpu_flavors
from ..config.spec import Spec
from ..render.kueue import FLAVOR_LABEL, TOPOLOGY_NAME, kueue_objects, kueue_release
from .kubernetes_object import resource_name
from .platform_layer import PlatformLayer


class Kueue(PlatformLayer):
    type_token = "mlcluster:kueue:Kueue"
    layer_name = "kueue"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        self.release = self.chart(kueue_release(spec))
        self.objects: dict[str, pulumi.CustomResource] = {}
        namespaces: dict[str, pulumi.CustomResource] = {}
        flavors: dict[str, pulumi.CustomResource] = {}
        datacenter: list[pulumi.Resource] = []
        for manifest in kueue_objects(spec):
            kind, metadata = manifest["kind"], manifest["metadata"]
            namespace = metadata.get("namespace")
            # The release first, so the CRDs and the validating webhook exist; then what the object names: a
            # flavor its Topology, a ClusterQueue its flavors, a namespaced object its namespace. Kueue holds a
            # Topology or flavor in use by a finalizer, so these edges also order the deletes of replaced ones.
            waits_for: list[pulumi.Resource] = [self.release]
            if namespace in namespaces:
                waits_for.append(namespaces[namespace])
            if kind == "ResourceFlavor":
                waits_for += datacenter
            if kind == "ClusterQueue":
                listed = {f["name"] for group in manifest["spec"]["resourceGroups"] for f in group["flavors"]}
                waits_for += [flavors[name] for name in sorted(listed) if name in flavors]
            # Pulumi names that stay when the object's name follows its immutable fields (render.kueue.named_after),
            # so such a change previews as a replacement of the same resource.
            name = {"Topology": TOPOLOGY_NAME, "ResourceFlavor": (metadata.get("labels") or {}).get(FLAVOR_LABEL)}.get(
                kind
            )
            # Generic objects (not apiextensions.CustomResource): WorkloadPriorityClass has no `spec`.
            resource = self.manifest(manifest, waits_for, name=name)
            if kind == "Namespace":
                namespaces[str(metadata["name"])] = resource
            elif kind == "Topology":
                datacenter.append(resource)
            elif kind == "ResourceFlavor":
                flavors[str(metadata["name"])] = resource
            self.objects[f"{kind}/{name or resource_name(manifest)}"] = resource
        capacity = {name: dict(flavor.capacity) for name, flavor in sorted(gpu_flavors(spec).items())}
        return {"status": self.release.status, "gpuCapacity": capacity}
