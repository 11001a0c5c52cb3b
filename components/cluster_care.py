"""ClusterCare: Kubernetes minor upgrades in order, and the scheduled etcd snapshots of every control plane.

The upgrade steps exist from day 1 and print `ok:` while the cluster is at `kubernetesVersion`; a changed
version changes their text, so the next `up` runs them again, stage after stage (components/render/upgrade.py
has the order and why it keeps the version-skew policy). A failed stage stops the ones after it; the steps check
before they act, so the next `up` resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
from pulumi_command import remote

from .config.spec import Spec
from .node_command import step_command
from .render.etcd_snapshots import timer_step
from .render.upgrade import upgrade_steps


class ClusterCare(pulumi.ComponentResource):
    """`member[node]`: the resource after which the node is in the cluster; `after`: what the upgrade waits for
    (every join and day-2 restart, so an upgrade never overlaps them)."""

    def __init__(
        self,
        spec: Spec,
        member: Mapping[str, pulumi.Resource],
        after: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:cluster_care:ClusterCare", spec.cluster.name, None, opts)
        self.snapshot_timers: dict[str, remote.Command] = {
            node.name: step_command(
                f"{node.name}-etcd-snapshot-timer",
                spec,
                node,
                timer_step(spec),
                parent=self,
                depends_on=[member[node.name]],
            )
            for node in spec.control_planes
        }
        self.upgrade: list[remote.Command] = []
        previous: list[pulumi.Resource] = [*member.values(), *after]
        for stage in upgrade_steps(spec):
            current: list[pulumi.Resource] = []
            for upgrade in stage:
                command = step_command(
                    upgrade.resource_name, spec, upgrade.node, upgrade.step, parent=self, depends_on=previous
                )
                self.upgrade.append(command)
                current.append(command)
            previous = current
        self.register_outputs({})
