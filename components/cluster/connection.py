"""SSH connection arguments for a node: pinned host keys, bastion, fast failure on unreachable hosts."""

from __future__ import annotations

from contextvars import ContextVar

import pulumi
from pulumi_command import remote

from ..config.schema import Secret
from ..config.spec import NodeSpec, Spec

_KEY: ContextVar[tuple[Secret, pulumi.Output[str]] | None] = ContextVar("mlcluster_ssh_key", default=None)
"""The SSH key as one secret Output for the program run (a run is one context): every connection shares it
instead of wrapping the key again (thousands of Outputs for the SDK to track, ~15 % of a node's registration)."""


def _secret_key(private_key: Secret) -> pulumi.Output[str]:
    cached = _KEY.get()
    if cached is not None and cached[0] is private_key:
        return cached[1]
    key = pulumi.Output.secret(private_key.reveal())
    _KEY.set((private_key, key))
    return key


def ssh_user(spec: Spec, node: NodeSpec) -> str:
    return node.user or spec.ssh.user


def dial_error_limit(spec: Spec) -> int:
    """pulumi-command gives up after dialErrorLimit *failed* dials, so N attempts are a limit of N - 1."""
    return spec.ssh.dial_attempts - 1


def node_connection(spec: Spec, node: NodeSpec) -> remote.ConnectionArgs:
    private_key = spec.ssh.private_key
    key = _secret_key(private_key) if private_key is not None else None
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
            dial_error_limit=dial_error_limit(spec),
        )
    return remote.ConnectionArgs(
        host=node.host,
        port=node.port or spec.ssh.port,
        user=ssh_user(spec, node),
        private_key=key,
        # None only when the user opted out loudly (ssh.insecureIgnoreHostKeys); validation enforces it.
        host_key=node.pinned_host_key,
        per_dial_timeout=spec.ssh.connect_timeout_seconds,
        dial_error_limit=dial_error_limit(spec),
        proxy=proxy,
    )
