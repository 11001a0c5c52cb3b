"""Training (Kubeflow Trainer, Pipelines, Notebooks) settings."""

from __future__ import annotations

from dataclasses import dataclass

from . import checks
from .schema import setting


@dataclass(frozen=True)
class KubeflowSpec:
    enabled: bool = setting(True, doc="Install Kubeflow Trainer v2 (with JobSet).")
    version: str = setting("2.3.0", doc="kubeflow-trainer chart version.", check=checks.pinned_chart_version)
    namespace: str = setting("kubeflow-system", doc="Namespace of the release.", check=checks.k8s_name)
    pipelines: bool = setting(False, doc="Install Kubeflow Pipelines (standalone).")
    notebooks: bool = setting(False, doc="Install the Kubeflow Notebook controller.")
    legacy_training_operator: bool = setting(
        False, doc="The legacy Training Operator (kubeflow.org/v1 PyTorchJob) is on: Kueue manages PyTorchJobs too."
    )
