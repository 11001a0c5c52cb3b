"""GpuPreflight: the read-only GPU preflight on every node; its parsed results drive the GPU Operator's values."""

from __future__ import annotations

import pulumi
from pulumi_command import remote

from .config.spec import Spec
from .node_command import step_command
from .render.gpu_operator import PreflightResult, parse_preflight, preflight_report, preflight_step


class GpuPreflight(pulumi.ComponentResource):
    """`results` (node name -> PreflightResult) is known only after the commands ran: unknown in preview.
    `by_node` holds each node's own result, for what depends on one node only (its labels)."""

    results: pulumi.Output[dict[str, PreflightResult]]
    by_node: dict[str, pulumi.Output[PreflightResult]]
    commands: dict[str, remote.Command]

    def __init__(self, spec: Spec, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("mlcluster:gpu_preflight:GpuPreflight", "gpu-preflight", None, opts)
        # Read-only and independent of the other steps, so it runs first, on every node at once.
        self.commands = {
            node.name: step_command(f"{node.name}-{step.name}", spec, node, step, parent=self)
            for node in spec.nodes
            for step in [preflight_step(node)]
        }
        stdouts = {name: command.stdout for name, command in self.commands.items()}
        self.by_node = {name: stdout.apply(parse_preflight) for name, stdout in stdouts.items()}
        self.results = pulumi.Output.all(**stdouts).apply(lambda outs: _parse_and_report(spec, outs))
        self.register_outputs({"results": self.results.apply(lambda r: {k: v.summary() for k, v in r.items()})})


def _parse_and_report(spec: Spec, stdouts: dict[str, str]) -> dict[str, PreflightResult]:
    results = {name: parse_preflight(stdout) for name, stdout in stdouts.items()}
    decided, infos, warnings = preflight_report(spec, results)
    for line in infos:
        pulumi.log.info(f"gpu preflight: {line}")
    for line in warnings:
        pulumi.log.warn(f"gpu preflight: {line}")
    for mode, nodes in decided.items():
        if nodes:
            pulumi.log.info(f"gpu preflight: driver {mode} on {', '.join(nodes)}")
    return results
