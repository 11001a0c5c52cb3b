"""Training: the Kubeflow Trainer release, and the kustomize-only Kubeflow parts as pinned remote targets.

Pipelines, Notebooks and the legacy Training Operator ship only as kustomize manifests. They are pulled as
remote kustomize targets pinned to a release tag (rendered by the Kubernetes provider's kustomize/v2 Directory),
never copied into this project; docs/training.md explains the choice and what preview can and cannot show.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.derived import platform_tolerations
from ..config.spec import Spec
from ..config.training import KubeflowSpec
from .helm import ChartRelease, tolerating

TRAINER_CHART = "oci://ghcr.io/kubeflow/charts/kubeflow-trainer"


def kubeflow_trainer_release(spec: Spec) -> ChartRelease:
    kubeflow = spec.kubeflow
    return ChartRelease(
        name="kubeflow-trainer",
        chart=TRAINER_CHART,
        version=kubeflow.version,
        namespace=kubeflow.namespace,
        values=tolerating(
            {
                # The chart's own dependency (Chart.yaml: jobset 0.12.0, condition jobset.install) keeps the
                # JobSet version the Trainer was tested with, in the same release.
                "jobset": {"install": kubeflow.install_job_set},
                # Applied by the chart's post-install/post-upgrade hook Job once the CRDs exist.
                "runtimes": {"defaultEnabled": kubeflow.default_runtimes},
            },
            ["manager.tolerations", "jobset.controller.tolerations", "runtimes.installer.tolerations"],
            platform_tolerations(spec),
        ),
        upstream_chart="kubeflow-trainer",
    )


@dataclass(frozen=True)
class KustomizeTarget:
    """A remote kustomization pinned to a release tag: `https://github.com/<repo>//<path>?ref=<tag>`."""

    name: str
    repository: str
    path: str
    ref: str

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repository}//{self.path}?ref={self.ref}"


def legacy_training_operator_targets(kubeflow: KubeflowSpec) -> list[KustomizeTarget]:
    # The repository was renamed kubeflow/training-operator -> kubeflow/trainer; v1.x tags stayed.
    return [
        KustomizeTarget(
            "training-operator",
            "kubeflow/trainer",
            "manifests/overlays/standalone",
            kubeflow.legacy_training_operator_version,
        )
    ]


def pipelines_targets(kubeflow: KubeflowSpec) -> list[KustomizeTarget]:
    """CRDs first (cluster-scoped-resources), then the platform-agnostic standalone install."""
    ref = kubeflow.pipelines_version
    return [
        KustomizeTarget(
            "pipelines-cluster-scoped", "kubeflow/pipelines", "manifests/kustomize/cluster-scoped-resources", ref
        ),
        KustomizeTarget("pipelines", "kubeflow/pipelines", "manifests/kustomize/env/platform-agnostic", ref),
    ]


def notebooks_targets(kubeflow: KubeflowSpec) -> list[KustomizeTarget]:
    return [
        KustomizeTarget(
            "notebook-controller",
            "kubeflow/notebooks",
            "components/notebook-controller/config/overlays/standalone",
            kubeflow.notebooks_version,
        )
    ]
