"""Training: Kubeflow Trainer release."""

from __future__ import annotations

from ..config.spec import Spec
from .helm import ChartRelease


def kubeflow_trainer_release(spec: Spec) -> ChartRelease:
    return ChartRelease(
        name="kubeflow-trainer",
        chart="oci://ghcr.io/kubeflow/charts/kubeflow-trainer",
        version=spec.kubeflow.version,
        namespace=spec.kubeflow.namespace,
        values={},
        upstream_chart="kubeflow-trainer",
    )
