"""Training: Kubeflow Trainer v2 (with JobSet and its default runtimes), and optionally the legacy Training
Operator, Kubeflow Pipelines and the Notebook controller from pinned kustomize targets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from ..config.spec import Spec
from ..render.training import (
    KustomizeTarget,
    kubeflow_trainer_release,
    legacy_training_operator_targets,
    notebooks_targets,
    pipelines_targets,
)
from .platform_layer import PlatformLayer


class Training(PlatformLayer):
    type_token = "mlcluster:training:Training"
    layer_name = "training"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        self.release = self.chart(kubeflow_trainer_release(spec))
        self.ready: list[pulumi.Resource] = [self.release]
        """What a training workload waits for: the release (CRDs, webhook, runtimes) and the kustomize installs."""
        groups: list[list[KustomizeTarget]] = []
        if spec.kubeflow.legacy_training_operator:
            groups.append(legacy_training_operator_targets(spec.kubeflow))
        if spec.kubeflow.pipelines:
            groups.append(pipelines_targets(spec.kubeflow))
        if spec.kubeflow.notebooks:
            groups.append(notebooks_targets(spec.kubeflow))
        for targets in groups:
            self.ready.append(self._kustomize_chain(targets))
        return {"status": self.release.status}

    def _kustomize_chain(self, targets: list[KustomizeTarget]) -> pulumi.Resource:
        """Each target after the one before it (CRDs before the objects that use them); returns the last."""
        previous: list[pulumi.Resource] = self.after
        directory: pulumi.Resource | None = None
        for target in targets:
            directory = k8s.kustomize.v2.Directory(
                target.name,
                directory=target.url,
                opts=pulumi.ResourceOptions(parent=self, providers=[self.provider], depends_on=previous),
            )
            previous = [directory]
        assert directory is not None, "a kustomize chain has at least one target"
        return directory
