"""The single place a ChartRelease becomes a `helm.v3.Release`.

Release (not Chart v4): charts here rely on hooks (the Trainer's runtimes, the GPU Operator's CRD
upgrade), and Chart v4 renders templates at preview, which needs a reachable cluster; in a kubeadm
stack the kubeconfig is not known until `up`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from ..config.airgap import AirGapSpec, bundle_lock, lockfile_path
from ..render.helm import ChartRelease


def bundled_chart(air_gap: AirGapSpec, release: ChartRelease) -> str:
    """On an air-gapped site Helm runs where Pulumi runs, with no route out either: the release's chart is the
    bundle's archive beside the lockfile, checked against the lockfile's digest before Helm reads it. With no
    repository given, Helm takes a path that exists as it is (helm pkg/action/install.go ChartPathOptions.LocateChart,
    v3: `os.Stat(name)` first; the version is not looked at), so no repository may be passed with it."""
    found = bundle_lock(air_gap.lockfile).chart(release.chart, release.version)
    if found is None:
        raise pulumi.RunError(
            f"mlcluster:airGap.lockfile: holds no chart {release.chart} {release.version}, which release"
            f" {release.namespace}/{release.name} installs: lock and fetch the bundle for this stack (docs/air-gap.md)"
        )
    path, digest = found
    item = f"bundle item chart {release.chart.rstrip('/').rsplit('/', 1)[-1]}@{release.version}"
    archive = lockfile_path(air_gap.lockfile).parent / path
    # As the stack names the lockfile: relative to the project folder, where Pulumi runs Helm, so a checkout in
    # another place (a CI runner, a colleague's machine) plans no change to any release.
    given = Path(air_gap.lockfile).parent / path
    try:
        actual = "sha256:" + hashlib.sha256(archive.read_bytes()).hexdigest()
    except OSError as error:
        raise pulumi.RunError(f"{item}: {archive}: {error.strerror}") from None
    if actual != digest:
        raise pulumi.RunError(f"{item}: {archive} has {actual}, the lockfile says {digest}")
    return str(given)


def helm_release(
    release: ChartRelease,
    provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource] = (),
    air_gap: AirGapSpec | None = None,
) -> k8s.helm.v3.Release:
    offline = air_gap is not None and air_gap.enabled
    return k8s.helm.v3.Release(
        release.name,
        name=release.name,
        chart=bundled_chart(air_gap, release) if air_gap is not None and offline else release.chart,
        version=release.version,
        namespace=release.namespace,
        create_namespace=True,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=release.repository)
        if release.repository and not offline
        else None,
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
