"""Storage: the default StorageClass provisioner (local-path or NFS subdir), so checkpoint PVCs bind."""

from __future__ import annotations

from ..config.derived import platform_tolerations
from ..config.spec import Spec
from .helm import ChartRelease, tolerating


def storage_release(spec: Spec) -> ChartRelease:
    """The provisioner's class is the cluster's default unless the cluster brings one (GKE, AKS): two default
    classes would leave every claim that names none to whichever was created last (config/rules.py warns)."""
    storage = spec.storage
    default = not spec.cluster.defaults.default_storage_class
    if storage.provisioner == "nfs":
        return ChartRelease(
            name="nfs-subdir-external-provisioner",
            chart="nfs-subdir-external-provisioner",
            repository="https://kubernetes-sigs.github.io/nfs-subdir-external-provisioner/",
            version=storage.chart_version,
            namespace=storage.namespace,
            values=tolerating(
                {
                    "nfs": {"server": storage.nfs_server, "path": storage.nfs_path},
                    "storageClass": {"defaultClass": default, "name": storage.storage_class},
                },
                ["tolerations"],
                platform_tolerations(spec),
            ),
            upstream_chart="nfs-subdir-external-provisioner",
        )
    # Published by the project's release workflow as an OCI artifact (helm push to ghcr.io/rancher/...).
    return ChartRelease(
        name="local-path-provisioner",
        chart="oci://ghcr.io/rancher/local-path-provisioner/charts/local-path-provisioner",
        version=storage.chart_version,
        namespace=storage.namespace,
        values=tolerating(
            {
                "storageClass": {"defaultClass": default, "name": storage.storage_class},
                "nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [storage.local_path]}],
            },
            ["tolerations"],
            platform_tolerations(spec),
        ),
        upstream_chart="local-path-provisioner",
    )
