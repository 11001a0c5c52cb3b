"""A node's `kubeadm join`, with a credential from the first control plane, and its removal marker.

Plain resources under the cluster, not a component per node: at 1,000 nodes a component each was a thousand
more resources to register and store. Removal order follows from the dependencies: the drain marker (on the
control plane) depends on the join, so when a node leaves the stack Pulumi deletes the marker first (drain +
delete Node) and then the join (`kubeadm reset -f` on the node).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
from pulumi.resource import create_urn
from pulumi_command import remote

from ..config.nodes import NodeSpec
from ..config.spec import Spec
from ..render.node_steps import drain_on_removal_step, join_step
from .join_credentials import JoinCredentials
from .node_command import step_command

PREVIOUS_COMPONENT = "mlcluster:node_join:NodeJoin"
"""The per-node component these resources were children of: their URNs under it are their aliases."""
COMMAND = "command:remote:Command"


@dataclass(frozen=True)
class NodeJoin:
    join: remote.Command
    drain_on_removal: remote.Command


def join_node(
    spec: Spec,
    node: NodeSpec,
    first_control_plane: NodeSpec,
    *,
    parent: pulumi.Resource,
    prepared: pulumi.Resource,
    credentials: JoinCredentials,
    join_after: Sequence[pulumi.Resource],
) -> NodeJoin:
    """`credentials`: what the join reads on stdin (token and CA hash; a control plane also the certificate key)."""
    # A stack deployed before knows these resources under the old component: without the aliases Pulumi
    # would replace them, and replacing deletes the old ones, which drains the node and `kubeadm reset`s it.
    previous_parent = create_urn(node.name, PREVIOUS_COMPONENT, parent=parent)

    def previously(name: str) -> pulumi.Output[str]:
        return create_urn(name, COMMAND, parent=previous_parent)

    join_name = f"{node.name}-kubeadm-join"
    join = step_command(
        join_name,
        spec,
        node,
        join_step(spec, node),
        parent=parent,
        depends_on=[prepared, credentials.command, *join_after],
        stdin=credentials.stdin(node),
        # A credential is spent at join; a fresh token (or a renewed kubeconfig) must not re-run this join. And a
        # join happens once: on a joined node `kubeadm join` only reports it joined, so a changed join (a label, a
        # taint) would be a re-run that does nothing; labels and taints reach a joined Node through the first
        # control plane's node-metadata step instead.
        ignore_changes=["stdin", "create"],
        # A host that is gone cannot run its reset; removing it only forgets the join.
        retain_on_delete=node.gone,
        aliases=[previously(join_name)],
    )
    drain_name = f"{node.name}-drain-on-removal"
    drain = step_command(
        drain_name,
        spec,
        first_control_plane,
        drain_on_removal_step(node),
        parent=parent,
        depends_on=[join],
        aliases=[previously(drain_name)],
    )
    return NodeJoin(join, drain)
