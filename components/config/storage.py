"""Storage for checkpoints: the default StorageClass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import checks
from .schema import setting


@dataclass(frozen=True)
class StorageSpec:
    enabled: bool = setting(True, doc="Install a default StorageClass so checkpoint PVCs bind.")
    provisioner: Literal["local-path", "nfs"] = setting("local-path", doc="Which provisioner backs the class.")
    version: str | None = setting(
        None, doc="Chart version (default: 0.0.37 for local-path, 4.0.18 for nfs).", check=checks.pinned_chart_version
    )
    nfs_server: str | None = setting(None, doc="NFS server (required when provisioner is nfs).", check=checks.host)
    nfs_path: str | None = setting(None, doc="Exported NFS path.", check=checks.absolute_path)
    namespace: str = setting("storage", doc="Namespace of the release.", check=checks.k8s_name)
