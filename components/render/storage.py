"""Storage: the default StorageClass provisioner."""

from __future__ import annotations

from ..config.spec import Spec
from .helm import ChartRelease


def storage_release(spec: Spec) -> ChartRelease:
    storage = spec.storage
    if storage.provisioner == "nfs":
        return ChartRelease(
            name="nfs-subdir-external-provisioner",
            chart="nfs-subdir-external-provisioner",
            repository="https://kubernetes-sigs.github.io/nfs-subdir-external-provisioner/",
            version=storage.version or "4.0.18",
            namespace=storage.namespace,
            values={
                "nfs": {"server": storage.nfs_server, "path": storage.nfs_path or "/"},
                "storageClass": {"defaultClass": True},
            },
            upstream_chart="nfs-subdir-external-provisioner",
        )
    return ChartRelease(
        name="local-path-provisioner",
        chart="oci://ghcr.io/rancher/local-path-provisioner/charts/local-path-provisioner",
        version=storage.version or "0.0.37",
        namespace=storage.namespace,
        values={"storageClass": {"defaultClass": True}},
        upstream_chart="local-path-provisioner",
    )
