"""Training (Kubeflow Trainer, legacy Training Operator, Pipelines, Notebooks) settings."""

from __future__ import annotations

from dataclasses import dataclass

from . import checks
from .schema import setting


@dataclass(frozen=True)
class KubeflowSpec:
    enabled: bool = setting(True, doc="Install Kubeflow Trainer v2 (with JobSet).")
    version: str = setting("2.3.0", doc="kubeflow-trainer chart version.", check=checks.pinned_chart_version)
    namespace: str = setting("kubeflow-system", doc="Namespace of the release.", check=checks.k8s_name)
    install_job_set: bool = setting(
        True,
        key="installJobSet",
        doc="Install JobSet as the Trainer chart's dependency (its version is pinned by the chart);"
        " false when JobSet is already installed in the cluster.",
    )
    default_runtimes: bool = setting(
        True,
        doc="Install the default ClusterTrainingRuntimes (torch, deepspeed, mlx, jax, torchtune); the chart"
        " applies them in a post-install hook Job.",
    )
    legacy_training_operator: bool = setting(
        False,
        doc="Also install the legacy Training Operator v1 (PyTorchJob, kubeflow.org/v1) for users on the old API;"
        " Kueue then manages PyTorchJobs too.",
    )
    legacy_training_operator_version: str = setting(
        "v1.9.4", doc="Training Operator v1 release (git tag of its kustomize manifests).", check=checks.git_tag
    )
    pipelines: bool = setting(False, doc="Install Kubeflow Pipelines (standalone, kustomize manifests).")
    pipelines_version: str = setting(
        "2.14.3", doc="Kubeflow Pipelines release (git tag of its kustomize manifests).", check=checks.git_tag
    )
    notebooks: bool = setting(False, doc="Install the Kubeflow Notebook controller (standalone, kustomize manifests).")
    notebooks_version: str = setting(
        "v1.11.0", doc="Kubeflow Notebooks release (git tag of its kustomize manifests).", check=checks.git_tag
    )
