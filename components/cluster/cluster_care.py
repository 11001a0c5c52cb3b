"""ClusterCare: each node's kubelet command, Kubernetes minor upgrades in order, and the scheduled etcd snapshots
of every control plane.

The upgrade steps exist from day 1 and print `ok:` while the cluster is at `kubernetesVersion`; a changed
version changes their text, so the next `up` runs them again, stage after stage (components/render/upgrade.py
has the order and why it keeps the version-skew policy). A failed stage stops the ones after it; the steps check
before they act, so the next `up` resumes where it stopped. Each node's `kubelet` command is a stage of that
chain: it upgrades the kubelet and restarts what the node's tuning marked, so a tuning change alone also rolls
through the nodes batch after batch.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
from pulumi.resource import create_urn
from pulumi_command import remote

from ..config.spec import Spec
from ..render.etcd_snapshots import RESTORE_ROLLOUT_STEP, restore_rollout_step, timer_step
from ..render.upgrade import KUBELET_STEP, upgrade_steps
from .node_command import step_command

PREVIOUS_RESTARTS_COMPONENT = "mlcluster:kubelet_restarts:KubeletRestarts"
"""The component that held each node's `<node>-kubelet-restart` command before it became the `kubelet` command:
its URN under it is the alias (a stack deployed before updates the command in place, nothing new is created)."""
COMMAND = "command:remote:Command"


class ClusterCare(pulumi.ComponentResource):
    """`member[node]`: the resource after which the node is in the cluster; the upgrade (and so each node's
    kubelet command) starts once every node is."""

    def __init__(
        self,
        spec: Spec,
        member: Mapping[str, pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:cluster_care:ClusterCare", spec.cluster.name, None, opts)
        self.snapshot_timers: dict[str, remote.Command] = {
            node.name: step_command(
                f"{node.name}-etcd-snapshot-timer",
                spec,
                node,
                timer_step(spec.etcd_snapshots, spec.control_planes),
                parent=self,
                depends_on=[member[node.name]],
            )
            for node in spec.control_planes
        }
        previous_restarts = create_urn(
            spec.cluster.name, PREVIOUS_RESTARTS_COMPONENT, parent=opts.parent if opts is not None else None
        )
        previous: list[pulumi.Resource] = list(member.values())
        for stage in upgrade_steps(spec):
            current: list[pulumi.Resource] = []
            for upgrade in stage:
                aliases: list[pulumi.Input[str]] = (
                    [create_urn(f"{upgrade.node.name}-kubelet-restart", COMMAND, parent=previous_restarts)]
                    if upgrade.step.name == KUBELET_STEP
                    else []
                )
                if upgrade.previous_name is not None:
                    aliases.append(create_urn(upgrade.previous_name, COMMAND, parent=self))
                command = step_command(
                    upgrade.resource_name,
                    spec,
                    upgrade.node,
                    upgrade.step,
                    parent=self,
                    depends_on=previous,
                    aliases=aliases,
                )
                current.append(command)
            previous = current
        self.upgraded: list[pulumi.CustomResource] = [c for c in previous if isinstance(c, pulumi.CustomResource)]
        """The last stage's steps: once they succeeded, every node runs kubernetesVersion."""
        self.restore_rollout: remote.Command | None = None
        if spec.etcd_snapshots.restored:
            # After an etcd restore: every kubelet restarted in its batch (the kubelet commands above), then the
            # controllers rolled from the first control plane.
            first = spec.control_planes[0]
            self.restore_rollout = step_command(
                f"{first.name}-{RESTORE_ROLLOUT_STEP}",
                spec,
                first,
                restore_rollout_step(spec),
                parent=self,
                depends_on=list(self.upgraded),
            )
        self.register_outputs({})
