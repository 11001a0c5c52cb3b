"""Kueue: the release, then the flavors, team queues and priorities derived from the stack's GPUs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from .config.kueue_inventory import check_inventory, gpu_flavors
from .config.schema import Problems
from .config.spec import Spec
from .helm_release import helm_release
from .render.kueue import kueue_objects, kueue_release


def type_token(manifest: Mapping[str, Any]) -> str:
    """The kubernetes provider's token for any object: `kubernetes:<group>/<version>:<Kind>` (core is `core`)."""
    api_version = str(manifest["apiVersion"])
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{manifest['kind']}"


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
            metadata = manifest["metadata"]
            namespace = metadata.get("namespace")
            name = f"{namespace}-{metadata['name']}" if namespace else str(metadata["name"])
            # Generic objects (not apiextensions.CustomResource): WorkloadPriorityClass has no `spec`.
            # The release first, so the CRDs and the validating webhook exist.
            waits_for: list[pulumi.Resource] = [self.release]
            if namespace in namespaces:
                waits_for.append(namespaces[namespace])
            resource = pulumi.CustomResource(
                type_token(manifest),
                name,
                dict(manifest),
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=waits_for),
            )
            if manifest["kind"] == "Namespace":
                namespaces[str(metadata["name"])] = resource
            self.objects[f"{manifest['kind']}/{name}"] = resource
        capacity = {name: dict(flavor.capacity) for name, flavor in sorted(gpu_flavors(spec).items())}
        self.register_outputs({"status": self.release.status, "gpuCapacity": capacity})
