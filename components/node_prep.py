"""NodePrep: the ordered preparation steps of one node, each its own remote.Command."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
from pulumi_command import remote

from .config.spec import NodeSpec, Spec
from .node_command import step_command
from .render.node_steps import prepare_steps
from .render.shell import NodeStep


class NodePrep(pulumi.ComponentResource):
    """Runs a node's steps in order; `ready` is the last one, for whatever must wait for the node."""

    ready: remote.Command

    def __init__(
        self,
        spec: Spec,
        node: NodeSpec,
        extra_steps: Sequence[NodeStep] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:node_prep:NodePrep", node.name, None, opts)
        previous: list[pulumi.Resource] = []
        commands: list[remote.Command] = []
        # Names carry no position: inserting a step later must not rename (and so replace) the ones after it.
        for step in [*prepare_steps(spec, node), *extra_steps]:
            command = step_command(f"{node.name}-{step.name}", spec, node, step, parent=self, depends_on=previous)
            commands.append(command)
            previous = [command]
        self.ready = commands[-1]
        self.register_outputs({"steps": [c.stdout for c in commands]})
