"""GpuPreflight: the read-only GPU preflight of every GPU node; its parsed results drive the GPU Operator's values.

Every other node looks for GPUs nobody declared inside its preparation (components/render/gpu_operator.py,
`own_preflight_command`); `report_undeclared_gpus` reports what that look found, as the preflight reports it.
"""

from __future__ import annotations

import pulumi
from pulumi_command import remote

from ..config.gpu import GpuOperatorSpec
from ..config.network import NetworkSpec
from ..config.nodes import NodeSpec
from ..config.spec import Spec
from ..render.gpu_operator import (
    PREFLIGHT_STEP,
    PreflightResult,
    own_preflight_command,
    parse_preflight,
    preflight_report,
    preflight_step,
)
from ..render.shell import split_output
from ..warnings import warn
from .node_command import step_command
from .node_scripts import NodeScripts


def node_path(nodes: tuple[NodeSpec, ...], node: NodeSpec) -> str:
    return f"nodes[{nodes.index(node)}]"


class GpuPreflight(pulumi.ComponentResource):
    """`results` (node name -> PreflightResult) is known only after the commands ran: unknown in preview.
    `by_node` holds each node's own result, for what depends on one node only (its labels)."""

    results: pulumi.Output[dict[str, PreflightResult]]
    by_node: dict[str, pulumi.Output[PreflightResult]]
    commands: dict[str, remote.Command]

    def __init__(self, spec: Spec, scripts: NodeScripts, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("mlcluster:gpu_preflight:GpuPreflight", "gpu-preflight", None, opts)
        # Read-only and independent of the other steps, so it runs first (once the node has its copy of the
        # scripts), on every GPU node at once.
        self.commands = {
            node.name: step_command(
                f"{node.name}-{step.name}", spec, node, step, parent=self, depends_on=[scripts.copies[node.name]]
            )
            for node in spec.nodes
            if own_preflight_command(spec.gpu_operator, spec.cluster, node)
            for step in [preflight_step(node)]
        }
        stdouts = {name: command.stdout for name, command in self.commands.items()}
        self.by_node = {name: stdout.apply(parse_preflight) for name, stdout in stdouts.items()}
        # Output.all() of nothing is a list, not a mapping: a stack with the operator on and no GPU node yet.
        self.results = (
            pulumi.Output.all(**stdouts).apply(lambda outs: _parse_and_report(spec, outs))
            if stdouts
            else pulumi.Output.from_input({})
        )
        self.register_outputs({"results": self.results.apply(lambda r: {k: v.summary() for k, v in r.items()})})


def _parse_and_report(spec: Spec, stdouts: dict[str, str]) -> dict[str, PreflightResult]:
    results = {name: parse_preflight(stdout) for name, stdout in stdouts.items()}
    decided, infos, warnings = preflight_report(spec.nodes, spec.gpu_operator, spec.network, results)
    for line in infos:
        pulumi.log.info(f"gpu preflight: {line}")
    for line in warnings:
        warn("nodes", f"gpu preflight: {line}")
    for mode, nodes in decided.items():
        if nodes:
            pulumi.log.info(f"gpu preflight: driver {mode} on {', '.join(nodes)}")
    return results


def report_undeclared_gpus(
    nodes: tuple[NodeSpec, ...],
    gpu_operator: GpuOperatorSpec,
    network: NetworkSpec,
    node: NodeSpec,
    preparation: remote.Command,
) -> pulumi.Output[None]:
    """Warn, as the preflight does, about what the look inside `node`'s preparation found (GPUs on a node
    without a `gpu` section, a host it could not read). Known after the preparation ran; nothing waits on it."""

    def report(stdout: str | None) -> None:
        look = split_output(stdout or "").get(PREFLIGHT_STEP)
        if look is None:
            return
        try:
            result = parse_preflight(look)
        except ValueError as error:
            # Only a warning reads this: an unreadable look must not fail the `up` after the node was prepared.
            warn(
                node_path(nodes, node),
                f"gpu preflight: {node.name}: the look for GPUs printed no summary ({error})",
                preparation,
            )
            return
        _, _, warnings = preflight_report(nodes, gpu_operator, network, {node.name: result})
        for line in warnings:
            warn(node_path(nodes, node), f"gpu preflight: {line}", resource=preparation)

    return preparation.stdout.apply(report)
