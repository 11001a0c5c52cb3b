"""Serving: cert-manager and KServe releases."""

from __future__ import annotations

from ..config.spec import Spec
from .helm import ChartRelease


def cert_manager_release(spec: Spec) -> ChartRelease:
    return ChartRelease(
        name="cert-manager",
        chart="oci://quay.io/jetstack/charts/cert-manager",
        version=spec.kserve.cert_manager_version,
        namespace="cert-manager",
        values={"crds": {"enabled": True}},
        upstream_chart="cert-manager",
    )


def kserve_releases(spec: Spec) -> list[ChartRelease]:
    kserve = spec.kserve
    return [
        ChartRelease(
            name="kserve-crd",
            chart="oci://ghcr.io/kserve/charts/kserve-crd",
            version=kserve.version,
            namespace=kserve.namespace,
            upstream_chart="kserve-crd",
        ),
        ChartRelease(
            name="kserve-resources",
            chart="oci://ghcr.io/kserve/charts/kserve-resources",
            version=kserve.version,
            namespace=kserve.namespace,
            values={"kserve": {"controller": {"deploymentMode": kserve.deployment_mode}}},
            upstream_chart="kserve-resources",
        ),
    ]
