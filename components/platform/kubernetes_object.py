"""Any rendered manifest (a plain dict) as a Pulumi resource of the kubernetes provider.

A generic CustomResource with the provider's type token (`kubernetes:<group>/<version>:<Kind>`) takes the
manifest as it was rendered and tested, for built-in kinds and custom resources alike (Kueue's objects, the
workloads).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi


def type_token(manifest: Mapping[str, Any]) -> str:
    api_version = str(manifest["apiVersion"])
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{manifest['kind']}"


def resource_name(manifest: Mapping[str, Any]) -> str:
    """Unique per type in a stack: namespaced objects carry their namespace."""
    metadata = manifest["metadata"]
    namespace = metadata.get("namespace")
    return f"{namespace}-{metadata['name']}" if namespace else str(metadata["name"])


def kubernetes_object(
    manifest: Mapping[str, Any], opts: pulumi.ResourceOptions, name: str | None = None
) -> pulumi.CustomResource:
    """name: the Pulumi resource name (default: namespace-name, see resource_name)."""
    return pulumi.CustomResource(type_token(manifest), name or resource_name(manifest), dict(manifest), opts=opts)
