"""Training: Kubeflow Trainer v2 (with JobSet and its default runtimes), and optionally the legacy Training
Operator, Kubeflow Pipelines and the Notebook controller from pinned kustomize targets."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from .config.spec import Spec
from .helm_release import helm_release
from .render.training import (
    KustomizeTarget,
    kubeflow_trainer_release,
    legacy_training_operator_targets,
    notebooks_targets,
    pipelines_targets,
)


class Training(pulumi.ComponentResource):
    def __init__(
        self,
        spec: Spec,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:training:Training", "training", None, opts)
        self.release = helm_release(kubeflow_trainer_release(spec), provider, parent=self, depends_on=depends_on)
        self.ready: list[pulumi.Resource] = [self.release]
        """What a training workload waits for: the release (CRDs, webhook, runtimes) and the kustomize installs."""
        groups: list[list[KustomizeTarget]] = []
        if spec.kubeflow.legacy_training_operator:
            groups.append(legacy_training_operator_targets(spec))
        if spec.kubeflow.pipelines:
            groups.append(pipelines_targets(spec))
        if spec.kubeflow.notebooks:
            groups.append(notebooks_targets(spec))
        for targets in groups:
            self.ready.append(self._kustomize_chain(targets, provider, depends_on))
        self.register_outputs({"status": self.release.status})

    def _kustomize_chain(
        self, targets: list[KustomizeTarget], provider: k8s.Provider, depends_on: Sequence[pulumi.Resource]
    ) -> pulumi.Resource:
        """Each target after the one before it (CRDs before the objects that use them); returns the last."""
        previous: list[pulumi.Resource] = list(depends_on)
        directory: pulumi.Resource | None = None
        for target in targets:
            directory = k8s.kustomize.v2.Directory(
                target.name,
                directory=target.url,
                opts=pulumi.ResourceOptions(parent=self, providers=[provider], depends_on=previous),
            )
            previous = [directory]
        assert directory is not None, "a kustomize chain has at least one target"
        return directory
