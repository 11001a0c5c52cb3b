"""The preparation of one node: its ordered steps as one `remote.Command` (one resource, one SSH session)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
from pulumi_command import remote

from ..config.nodes import NodeSpec
from ..config.spec import Spec
from ..render.node_steps import PREPARE_STEP, prepare_step
from .node_command import step_command


def prepare_node(
    spec: Spec,
    node: NodeSpec,
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource] = (),
    gate: pulumi.Output[Any] | None = None,
) -> remote.Command:
    """What must wait for the node waits for this. The steps always run together, so a component and a
    resource per step would only add state and dependency edges (13 resources a node, before). `after`: what
    must run on the node first (its copy of the script files, or the GPU preflight that waited for it). `gate`:
    an output the preparation's script waits for; one that fails (a refused change) fails the preparation before
    it is registered, so nothing runs on the node."""
    step = prepare_step(spec, node)
    return step_command(
        f"{node.name}-{PREPARE_STEP}",
        spec,
        node,
        step,
        parent=parent,
        depends_on=after,
        rendered=gate.apply(lambda _: step) if gate is not None else None,
    )
