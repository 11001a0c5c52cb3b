"""Storage for checkpoints: the default StorageClass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import checks
from .schema import Problems, join_path, setting

DEFAULT_CHART_VERSIONS = {"local-path": "0.0.37", "nfs": "4.0.18"}


@dataclass(frozen=True)
class StorageSpec:
    enabled: bool = setting(True, doc="Install a default StorageClass so checkpoint PVCs bind.")
    provisioner: Literal["local-path", "nfs"] = setting(
        "local-path",
        doc="`local-path`: node-local volumes (a checkpoint stays on the node that wrote it). `nfs`: subdirectories"
        " of an NFS export, readable from every node.",
    )
    version: str | None = setting(
        None, doc="Chart version (default: 0.0.37 for local-path, 4.0.18 for nfs).", check=checks.pinned_chart_version
    )
    local_path: str = setting(
        "/opt/local-path-provisioner",
        doc="Directory on each node that local-path volumes live in (put it on a data disk for big checkpoints).",
        check=checks.node_directory,
    )
    nfs_server: str | None = setting(None, doc="NFS server (required when provisioner is nfs).", check=checks.host)
    nfs_path: str | None = setting(None, doc="Exported NFS path.", check=checks.absolute_path)
    namespace: str = setting("storage", doc="Namespace of the release.", check=checks.k8s_name)
    class_name: str | None = setting(
        None, doc="StorageClass name (default: local-path or nfs-client, the charts' own).", check=checks.k8s_name
    )

    @property
    def chart_version(self) -> str:
        return self.version or DEFAULT_CHART_VERSIONS[self.provisioner]

    @property
    def storage_class(self) -> str:
        return self.class_name or {"local-path": "local-path", "nfs": "nfs-client"}[self.provisioner]

    def validate(self, path: str, problems: Problems) -> None:
        if self.enabled and self.provisioner == "nfs" and self.nfs_path is None:
            problems.error(
                join_path(path, "nfsPath"), "is required when storage.provisioner is nfs (the exported path)"
            )
