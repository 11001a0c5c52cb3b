"""The join credentials: one `join-credentials` command on the first control plane that every joining node reads.

What it prints (token, CA hash, and a certificate key while a control plane is to join) reaches each join on stdin.
When it is minted again is decided from the last successful deployment's record (components/render/
join_credentials.py): a node added, or a join retried in a later window, gets fresh credentials; an unchanged
stack runs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
from pulumi_command import remote

from ..config.nodes import NodeSpec
from ..config.spec import Spec
from ..render.certificates import PLAN_APPLIES_UNTIL
from ..render.join_credentials import OUTPUT, MintDecision, decide, record_from_output, record_output, window_end
from ..render.node_steps import join_credentials_step, joining_nodes
from . import clock
from .node_command import step_command


@dataclass(frozen=True)
class JoinCredentials:
    command: remote.Command
    for_control_planes: pulumi.Output[str]
    """All it printed (token, CA hash, certificate key), secret."""
    for_workers: pulumi.Output[str]
    """Token and CA hash only: a worker never gets the control planes' certificate key."""

    def stdin(self, node: NodeSpec) -> pulumi.Output[str]:
        return self.for_control_planes if node.is_control_plane else self.for_workers


def recorded_once_joined(
    record: pulumi.Output[dict[str, object]], joins: Sequence[pulumi.CustomResource]
) -> pulumi.Output[dict[str, object]]:
    """The record to export, resolving only once every join has succeeded (or was already recorded). The engine
    keeps the outputs a failed `up` registered (pulumi #15754), and the SDK registers them once all resolve: a record
    that did not wait for the joins would name a node whose join failed, and its retry days later would then reuse
    an expired token."""
    return pulumi.Output.all(record, *(join.id for join in joins)).apply(lambda values: values[0])


def _token_and_ca_hash(printed: str) -> str:
    return "".join(f"{line}\n" for line in printed.splitlines()[:2])


def join_credentials(
    spec: Spec,
    first: NodeSpec,
    *,
    parent: pulumi.Resource,
    previous: pulumi.StackReference,
    after: Sequence[pulumi.Resource],
) -> tuple[JoinCredentials | None, pulumi.Output[dict[str, object]]]:
    """The credentials (none when no node joins: a one-node cluster), and the record of this run's window and
    nodes (export it through `recorded_once_joined`). One stdin Output each for control planes and workers,
    shared by their joins."""
    joining = [n.name for n in joining_nodes(spec.control_planes, spec.nodes)]
    control_planes = [n.name for n in joining_nodes(spec.control_planes, spec.nodes) if n.is_control_plane]
    now = clock.utc_now()
    decision: pulumi.Output[MintDecision] = previous.get_output(OUTPUT).apply(
        lambda value: decide(record_from_output(value), joining, control_planes, now)
    )

    def report(made: MintDecision) -> None:
        if made.pending:
            shown = ", ".join(made.pending[:5]) + (
                f" and {len(made.pending) - 5} more" if len(made.pending) > 5 else ""
            )
            until = window_end(made.minted_for).strftime("%Y-%m-%dT%H:%M:%SZ")
            pulumi.log.info(
                f"join credentials: mint window {made.minted_for} (UTC), for the nodes the last successful up did"
                f" not have: {shown}; {PLAN_APPLIES_UNTIL} {until} (the window moves then)",
                resource=parent,
            )

    decision.apply(report)
    record = decision.apply(lambda made: record_output(made.minted_for, joining))
    if not joining:
        return None, record
    command = step_command(
        f"{first.name}-join-credentials",
        spec,
        first,
        # How the step is wired (secret output) does not depend on the window; its text does.
        join_credentials_step(spec.control_planes, spec.nodes, ""),
        parent=parent,
        depends_on=list(after),
        rendered=decision.apply(lambda made: join_credentials_step(spec.control_planes, spec.nodes, made.minted_for)),
    )
    printed: pulumi.Output[str] = pulumi.Output.secret(command.stdout)  # type: ignore[arg-type]
    return JoinCredentials(command, printed, printed.apply(_token_and_ca_hash)), record
