"""NodeJoin: a fresh join credential from the first control plane, `kubeadm join`, and removal handling.

Removal order follows from the dependencies: the drain marker (on the control plane) depends on the
join, so when a node leaves the stack Pulumi deletes the marker first (drain + delete Node) and then
the join (`kubeadm reset -f` on the node).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from .config.spec import NodeSpec, Spec
from .node_command import step_command
from .render.node_steps import drain_on_removal_step, join_credentials_step, join_step


class NodeJoin(pulumi.ComponentResource):
    def __init__(
        self,
        spec: Spec,
        node: NodeSpec,
        first_control_plane: NodeSpec,
        *,
        prepared: pulumi.Resource,
        credentials_after: Sequence[pulumi.Resource],
        join_after: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:node_join:NodeJoin", node.name, None, opts)
        self.credentials = step_command(
            f"{node.name}-join-credentials",
            spec,
            first_control_plane,
            join_credentials_step(node),
            parent=self,
            depends_on=list(credentials_after),
        )
        self.join = step_command(
            f"{node.name}-kubeadm-join",
            spec,
            node,
            join_step(spec, node),
            parent=self,
            depends_on=[prepared, self.credentials, *join_after],
            stdin=self.credentials.stdout,
        )
        self.drain_on_removal = step_command(
            f"{node.name}-drain-on-removal",
            spec,
            first_control_plane,
            drain_on_removal_step(node),
            parent=self,
            depends_on=[self.join],
        )
        self.register_outputs({})
