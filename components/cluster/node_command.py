"""One node step as one `remote.Command`: the single place step data becomes a Pulumi resource."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
from pulumi_command import remote

from ..config.nodes import NodeSpec
from ..config.spec import Spec
from ..render.shell import NodeStep, remote_command
from .connection import dial_lanes, node_connection, ssh_user


def _logging(step: NodeStep) -> remote.Logging:
    if step.secret_stdout:
        return remote.Logging.NONE
    return remote.Logging.STDOUT_AND_STDERR if step.log_stdout else remote.Logging.STDERR


def step_command(
    resource_name: str,
    spec: Spec,
    node: NodeSpec,
    step: NodeStep,
    *,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource] = (),
    stdin: pulumi.Input[str] | None = None,
    protect: bool = False,
    ignore_changes: Sequence[str] = (),
    retain_on_delete: bool = False,
    aliases: Sequence[pulumi.Input[str]] = (),
    rendered: pulumi.Output[NodeStep] | None = None,
) -> remote.Command:
    """`rendered`: the step as decided while the program runs (from an output, such as the previous deployment's
    record); `step` then only says how it is wired (stdin, secret output), which must not depend on that."""
    user = ssh_user(spec.ssh, node)
    if stdin is None and step.stdin is not None:
        stdin = pulumi.Output.secret(step.stdin.reveal())
    secret_outputs = ["stdout", "stderr"] if step.secret_stdout else []

    def command(script: str | None, tag: str) -> str | None:
        return remote_command(script, user, tag) if script else None

    def _rendered_command(rendered_step: NodeStep) -> str:
        text = command(rendered_step.command_script, rendered_step.name)
        if text is None:
            raise ValueError(f"{resource_name}: a step decided at run time must have a script")
        return text

    return dial_lanes(
        spec,
        node,
        lambda dial_after: remote.Command(
            resource_name,
            connection=node_connection(spec.ssh, node),
            create=command(step.command_script, step.name) if rendered is None else rendered.apply(_rendered_command),
            delete=command(step.command_delete_script, step.name + "-delete"),
            stdin=stdin,
            # PULUMI_COMMAND_STDOUT would need the server's AcceptEnv and could carry secrets back in.
            add_previous_output_in_env=False,
            logging=_logging(step),
            opts=pulumi.ResourceOptions(
                parent=parent,
                depends_on=[*depends_on, *dial_after],
                additional_secret_outputs=secret_outputs,
                protect=protect,
                ignore_changes=list(ignore_changes),
                retain_on_delete=retain_on_delete,
                aliases=list(aliases) or None,
            ),
        ),
        dials_on_create=rendered is not None or step.command_script is not None,
    )
