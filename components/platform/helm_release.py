"""The single place a ChartRelease becomes a `helm.v3.Release`.

Release (not Chart v4): charts here rely on hooks (the Trainer's runtimes, the GPU Operator's CRD
upgrade), and Chart v4 renders templates at preview, which needs a reachable cluster; in a kubeadm
stack the kubeconfig is not known until `up`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..render.helm import ChartRelease


def helm_release(
    release: ChartRelease,
    provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource] = (),
) -> k8s.helm.v3.Release:
    return k8s.helm.v3.Release(
        release.name,
        name=release.name,
        chart=release.chart,
        version=release.version,
        namespace=release.namespace,
        create_namespace=True,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=release.repository) if release.repository else None,
        values=dict(release.values),
        timeout=release.timeout_seconds,
        atomic=False,
        cleanup_on_fail=False,
        wait_for_jobs=True,
        opts=pulumi.ResourceOptions(
            parent=parent,
            provider=provider,
            depends_on=list(depends_on),
            custom_timeouts=pulumi.CustomTimeouts(create=f"{release.timeout_seconds + 60}s"),
        ),
    )
