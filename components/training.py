"""Training: Kubeflow Trainer v2 (with JobSet) for distributed PyTorch."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from .config.spec import Spec
from .helm_release import helm_release
from .render.training import kubeflow_trainer_release


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
        self.register_outputs({"status": self.release.status})
