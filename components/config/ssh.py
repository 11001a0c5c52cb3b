"""`ssh`: how every node (and a bastion in front of them) is reached, and what its sshd accepts at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import checks, formats
from .schema import Secret, setting


def pinned_host_key(value: str | None) -> str | None:
    """`TYPE BODY` of a configured host key, as the SSH client compares it (no scanned host, no comment)."""
    parts = formats.split_host_key(value) if value else None
    return " ".join(parts) if parts else value


def max_startups_setting(doc: str) -> Any:
    """An sshd's MaxStartups as a stack declares it: the dial lanes (components/cluster/connection.py) are one
    fewer, so it is at least 2."""
    return setting(10, doc=doc, check=checks.between(2, 100000))


@dataclass(frozen=True)
class BastionSpec:
    host: str = setting(doc="Bastion (jump host) address.", check=checks.host)
    port: int = setting(22, doc="Bastion SSH port.", check=checks.between(1, 65535))
    user: str | None = setting(None, doc="Bastion user (default: ssh.user).", check=formats.user_name)
    host_key: str | None = setting(
        None,
        doc="Pinned SSH host key of the bastion; required unless ssh.insecureIgnoreHostKeys.",
        check=formats.ssh_host_key,
    )
    max_startups: int = max_startups_setting(
        "The bastion sshd's `MaxStartups` (its first number; OpenSSH's default 10). Every step dials through the"
        " bastion, so at most this many minus one run at once, whatever `pulumi up --parallel` is: a dial past it"
        " may be dropped. Raise it on the bastion for a large fleet, then here."
    )

    @property
    def pinned_host_key(self) -> str | None:
        return pinned_host_key(self.host_key)


@dataclass(frozen=True)
class SshSpec:
    user: str = setting("root", doc="SSH user; a non-root user needs passwordless sudo.", check=formats.user_name)
    port: int = setting(22, doc="SSH port.", check=checks.between(1, 65535))
    private_key: Secret | None = setting(
        None,
        secret=True,
        doc="Private key (secret): `pulumi config set --secret --path mlcluster:ssh.privateKey < key`. Required"
        " unless ssh.agent.",
    )
    agent: bool = setting(
        False,
        doc="Authenticate with the keys of the SSH agent of the machine that runs `pulumi` (`SSH_AUTH_SOCK`) instead"
        " of ssh.privateKey: no private key in the stack's config or state, and ~1 KB less state per SSH resource.",
    )
    bastion: BastionSpec | None = setting(None, doc="Jump host the nodes are reached through.")
    connect_timeout_seconds: int = setting(
        10,
        doc="Per-dial timeout; an unreachable host fails after dialAttempts × this plus growing pauses between.",
        check=checks.between(1, 300),
    )
    dial_attempts: int = setting(
        3,
        doc="Dial attempts before a host is reported unreachable (pulumi-command's dialErrorLimit is this minus one).",
        check=checks.between(1, 100),
    )
    max_startups: int = max_startups_setting(
        "The nodes' sshd `MaxStartups` (its first number; OpenSSH's default 10): at most this many minus one"
        " steps run on one node at once, whatever `pulumi up --parallel` is (see ssh.bastion.maxStartups behind a"
        " bastion)."
    )
    insecure_ignore_host_keys: bool = setting(
        False, doc="DANGER: accept any SSH host key (no `hostKey` per node or bastion). Only for throwaway labs."
    )
