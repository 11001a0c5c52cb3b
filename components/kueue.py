"""Kueue: the release, then the flavors, team queues and priorities derived from the stack's GPUs."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from .config.kueue_inventory import check_inventory, gpu_flavors
from .config.schema import Problems
from .config.spec import Spec
from .helm_release import helm_release
from .kubernetes_object import kubernetes_object, resource_name
from .render.kueue import kueue_objects, kueue_release


class Kueue(pulumi.ComponentResource):
    def __init__(
        self,
        spec: Spec,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:kueue:Kueue", "kueue", None, opts)
        self.release = helm_release(kueue_release(spec), provider, parent=self, depends_on=depends_on)
        # Validated with the config, where errors stop the program but warnings are not shown: show them here.
        problems = Problems()
        spec.kueue.validate("kueue", problems)
        check_inventory(spec, problems)
        for warning in problems.warnings:
            pulumi.log.warn(str(warning), resource=self)
        self.objects: dict[str, pulumi.CustomResource] = {}
        namespaces: dict[str, pulumi.CustomResource] = {}
        for manifest in kueue_objects(spec):
            namespace = manifest["metadata"].get("namespace")
            # The release first, so the CRDs and the validating webhook exist.
            waits_for: list[pulumi.Resource] = [self.release]
            if namespace in namespaces:
                waits_for.append(namespaces[namespace])
            # Generic objects (not apiextensions.CustomResource): WorkloadPriorityClass has no `spec`.
            resource = kubernetes_object(
                manifest, pulumi.ResourceOptions(parent=self, provider=provider, depends_on=waits_for)
            )
            if manifest["kind"] == "Namespace":
                namespaces[str(manifest["metadata"]["name"])] = resource
            self.objects[f"{manifest['kind']}/{resource_name(manifest)}"] = resource
        capacity = {name: dict(flavor.capacity) for name, flavor in sorted(gpu_flavors(spec).items())}
        self.register_outputs({"status": self.release.status, "gpuCapacity": capacity})
