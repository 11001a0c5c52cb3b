"""SSH connection arguments for a node: pinned host keys, bastion, fast failure on unreachable hosts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TypeVar

import pulumi
from pulumi_command import remote

from ..config.nodes import NodeSpec
from ..config.schema import Secret
from ..config.spec import Spec
from ..config.ssh import SshSpec

_KEY: ContextVar[tuple[Secret, pulumi.Output[str]] | None] = ContextVar("mlcluster_ssh_key", default=None)
"""The SSH key as one secret Output for the program run (a run is one context): every connection shares it
instead of wrapping the key again (thousands of Outputs for the SDK to track, ~15 % of a node's registration)."""


R = TypeVar("R", bound=pulumi.Resource)


def _secret_key(private_key: Secret) -> pulumi.Output[str]:
    cached = _KEY.get()
    if cached is not None and cached[0] is private_key:
        return cached[1]
    key = pulumi.Output.secret(private_key.reveal())
    _KEY.set((private_key, key))
    return key


_DIALS: ContextVar[tuple[Spec, dict[tuple[tuple[str, int], bool], list[pulumi.Resource]]] | None] = ContextVar(
    "mlcluster_dial_lanes", default=None
)
"""The SSH resources registered so far in this program run, by the sshd they dial first (the bastion, or the
node) and whether they dial on create: what `dial_lanes` chains."""


def first_hop(ssh: SshSpec, node: NodeSpec) -> tuple[tuple[str, int], int]:
    """The sshd a step on `node` dials first, and how many of its dials may be in flight at once: one fewer than
    its MaxStartups, which drops dials from that many unauthenticated connections on (one is left for a person)."""
    bastion = ssh.bastion
    if bastion is not None:
        return (bastion.host, bastion.port), bastion.max_startups - 1
    return (node.host, node.port or ssh.port), ssh.max_startups - 1


def _registered(spec: Spec) -> dict[tuple[tuple[str, int], bool], list[pulumi.Resource]]:
    cached = _DIALS.get()
    if cached is not None and cached[0] is spec:
        return cached[1]
    dials: dict[tuple[tuple[str, int], bool], list[pulumi.Resource]] = {}
    _DIALS.set((spec, dials))
    return dials


def dial_lanes(
    spec: Spec, node: NodeSpec, make: Callable[[Sequence[pulumi.Resource]], R], *, dials_on_create: bool = True
) -> R:
    """Create an SSH resource on `node` (`make(extra_depends_on)`) in one of its first hop's lanes.

    pulumi-command dials when a step starts, and `pulumi up --parallel` can start hundreds at once: a bastion (or
    a node) with OpenSSH's default MaxStartups 10:30:100 drops dials from 10 unauthenticated on, and the
    provider's retries (100 ms, then 150 ms…) land in the same crowd. So the k-th resource dialling a host
    depends on the (k - lanes)-th: the host's resources run in `lanes` chains, and no more than `lanes` of them
    can be running, hence dialling, at once. A dependency alone changes no resource (the engine diffs inputs),
    so a node added or removed re-chains the others without re-running them.

    A resource with nothing to run on create (a marker whose delete runs a step) has lanes of its own: its
    create dials nothing and waits for no step, and the engine orders deletes by the recorded *direct*
    dependencies (step_generator.go `ScheduleDeletes`), so removing consecutive workers drains them at most
    `lanes` at once (a scattered set can run more)."""
    target, lanes = first_hop(spec.ssh, node)
    registered = _registered(spec).setdefault((target, dials_on_create), [])
    before = [registered[-lanes]] if len(registered) >= lanes else []
    resource = make(before)
    registered.append(resource)
    return resource


def ssh_user(ssh: SshSpec, node: NodeSpec) -> str:
    return node.user or ssh.user


def dial_error_limit(ssh: SshSpec) -> int:
    """pulumi-command gives up after dialErrorLimit *failed* dials, so N attempts are a limit of N - 1."""
    return ssh.dial_attempts - 1


def node_connection(ssh: SshSpec, node: NodeSpec) -> remote.ConnectionArgs:
    private_key = ssh.private_key
    key = _secret_key(private_key) if private_key is not None else None
    proxy = None
    bastion = ssh.bastion
    if bastion is not None:
        proxy = remote.ProxyConnectionArgs(
            host=bastion.host,
            port=bastion.port,
            user=bastion.user or ssh.user,
            private_key=key,
            host_key=bastion.pinned_host_key,
            per_dial_timeout=ssh.connect_timeout_seconds,
            dial_error_limit=dial_error_limit(ssh),
        )
    return remote.ConnectionArgs(
        host=node.host,
        port=node.port or ssh.port,
        user=ssh_user(ssh, node),
        private_key=key,
        # None only when the user opted out loudly (ssh.insecureIgnoreHostKeys); validation enforces it.
        host_key=node.pinned_host_key,
        per_dial_timeout=ssh.connect_timeout_seconds,
        dial_error_limit=dial_error_limit(ssh),
        proxy=proxy,
    )
