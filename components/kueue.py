"""Kueue: Kueue, for team queues and GPU quotas."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from .config.spec import Spec
from .helm_release import helm_release
from .render.kueue import kueue_release


class Kueue(pulumi.ComponentResource):
    def __init__(
        self,
        spec: Spec,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:kueue:Kueue", "kueue", None, opts)
        self.release = helm_release(kueue_release(spec), provider, parent=self, depends_on=depends_on)
        self.register_outputs({"status": self.release.status})
