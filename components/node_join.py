"""NodeJoin: `kubeadm join` with a credential from the first control plane, and removal handling.

Removal order follows from the dependencies: the drain marker (on the control plane) depends on the
join, so when a node leaves the stack Pulumi deletes the marker first (drain + delete Node) and then
the join (`kubeadm reset -f` on the node).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
from pulumi_command import remote

from .config.spec import NodeSpec, Spec
from .node_command import step_command
from .render.node_steps import drain_on_removal_step, join_step


class NodeJoin(pulumi.ComponentResource):
    def __init__(
        self,
        spec: Spec,
        node: NodeSpec,
        first_control_plane: NodeSpec,
        *,
        prepared: pulumi.Resource,
        credentials: remote.Command,
        join_after: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`credentials` prints what the join reads on stdin: the admin kubeconfig for a worker (it mints its
        own token when the join runs, so a retry hours later still has a valid one), token, CA hash and
        certificate key for a control plane."""
        super().__init__("mlcluster:node_join:NodeJoin", node.name, None, opts)
        self.join = step_command(
            f"{node.name}-kubeadm-join",
            spec,
            node,
            join_step(spec, node),
            parent=self,
            depends_on=[prepared, credentials, *join_after],
            stdin=pulumi.Output.secret(credentials.stdout),
            # A credential is spent at join; a fresh token (or a renewed kubeconfig) must not re-run this join.
            ignore_changes=["stdin"],
            # A host that is gone cannot run its reset; removing it only forgets the join.
            retain_on_delete=node.gone,
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
