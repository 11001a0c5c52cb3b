"""KubeletRestarts: day-2 restarts of containerd/kubelet after tuning changed, one batch after the other."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
from pulumi_command import local, remote

from .config.spec import Spec
from .node_command import step_command
from .render.tuning_steps import restart_batches, restart_step


class KubeletRestarts(pulumi.ComponentResource):
    """One kubelet-restart step per node, after the node is in the cluster; batch k waits for batch k-1.

    Control planes go first, `kubelet.restart.maxUnavailableControlPlanes` at a time, then the workers,
    `maxUnavailableWorkers` at a time. A failure stops the batches after it, as a rolling restart should."""

    def __init__(
        self, spec: Spec, member: Mapping[str, pulumi.Resource], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mlcluster:kubelet_restarts:KubeletRestarts", spec.cluster.name, None, opts)
        self.steps: dict[str, remote.Command] = {}
        previous: list[pulumi.Resource] = []
        for index, batch in enumerate(restart_batches(spec)):
            current: list[pulumi.Resource] = []
            for node in batch:
                command = step_command(
                    f"{node.name}-kubelet-restart",
                    spec,
                    node,
                    restart_step(spec, node),
                    parent=self,
                    depends_on=[member[node.name], *previous],
                )
                self.steps[node.name] = command
                current.append(command)
            # A gate between batches: batch k waits for one resource instead of every node of batch k-1, so
            # the dependencies grow with the nodes, not with the square of the batch size (a 1,000-node plan
            # spent minutes in the SDK's cycle checks otherwise). It runs nothing.
            previous = [
                local.Command(
                    f"kubelet-restart-batch-{index + 1}-done",
                    opts=pulumi.ResourceOptions(parent=self, depends_on=current),
                )
            ]
        self.register_outputs({})
