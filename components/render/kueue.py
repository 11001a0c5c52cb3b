"""Kueue release and objects."""

from __future__ import annotations

from ..config.spec import Spec
from .helm import ChartRelease


def kueue_release(spec: Spec) -> ChartRelease:
    return ChartRelease(
        name="kueue",
        chart="oci://registry.k8s.io/kueue/charts/kueue",
        version=spec.kueue.version,
        namespace=spec.kueue.namespace,
        values={},
        upstream_chart="kueue",
    )
