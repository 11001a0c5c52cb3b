"""SSH connection arguments for a node: pinned host keys, bastion, fast failure on unreachable hosts."""

from __future__ import annotations

import pulumi
from pulumi_command import remote

from .config.spec import NodeSpec, Spec


def ssh_user(spec: Spec, node: NodeSpec) -> str:
    return node.user or spec.ssh.user


def node_connection(spec: Spec, node: NodeSpec) -> remote.ConnectionArgs:
    private_key = spec.ssh.private_key
    key = pulumi.Output.secret(private_key.reveal()) if private_key is not None else None
    proxy = None
    bastion = spec.ssh.bastion
    if bastion is not None:
        proxy = remote.ProxyConnectionArgs(
            host=bastion.host,
            port=bastion.port,
            user=bastion.user or spec.ssh.user,
            private_key=key,
            host_key=bastion.pinned_host_key,
            per_dial_timeout=spec.ssh.connect_timeout_seconds,
            dial_error_limit=spec.ssh.dial_attempts,
        )
    return remote.ConnectionArgs(
        host=node.host,
        port=node.port or spec.ssh.port,
        user=ssh_user(spec, node),
        private_key=key,
        # None only when the user opted out loudly (ssh.insecureIgnoreHostKeys); validation enforces it.
        host_key=node.pinned_host_key,
        per_dial_timeout=spec.ssh.connect_timeout_seconds,
        dial_error_limit=spec.ssh.dial_attempts,
        proxy=proxy,
    )
