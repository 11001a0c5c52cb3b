"""When the join credentials are minted again: fresh for every join that runs, untouched by a no-change `up`.

One `join-credentials` step on the first control plane prints a bootstrap token and the CA hash (and, while a
control plane is to join, a certificate key) that every joining node reads on stdin. Under Pulumi a step runs
only when its inputs change, and a failed create is not recorded, so a join retried after a failure reads what
the credentials step printed when it last ran: the inputs must change when that may have expired, and only then.

The program knows which nodes may still have to join: those the last successful `up` did not have (its
`joinCredentials` output, read back through a StackReference to this stack as the certificates' dates are; it is
exported only once every join succeeded, components/cluster/join_credentials.py). While
there are such nodes, the credentials carry a mint window, `MINTED_FOR`: the UTC day, or the UTC hour while a
control plane is to join (its certificate key lives 2 h). A retry in the same window reads a token minted less than
a day (a key less than an hour) ago; a retry in a later window changes the input, so the step mints again. With no
node left to join, the window stays what the record says and an unchanged stack runs nothing. The token lives
`TOKEN_TTL`, kubeadm's default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

OUTPUT = "joinCredentials"
"""The stack output that records the mint window and the nodes of the last successful `up`."""
TOKEN_TTL = "24h"
DAY, HOUR = "%Y-%m-%d", "%Y-%m-%dT%H"


@dataclass(frozen=True)
class JoinRecord:
    minted_for: str
    nodes: tuple[str, ...]
    """The nodes that join through the credentials (all but the first control plane) of the last successful `up`."""


def record_from_output(value: Any) -> JoinRecord | None:
    """The previous deployment's record; None before the first one (or from a release that did not keep it)."""
    if not isinstance(value, Mapping):
        return None
    minted, nodes = value.get("mintedFor"), value.get("nodes")
    if not isinstance(minted, str) or not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        return None
    return JoinRecord(minted, tuple(nodes))


def record_output(minted_for: str, joining: Sequence[str]) -> dict[str, Any]:
    return {"mintedFor": minted_for, "nodes": list(joining)}


@dataclass(frozen=True)
class MintDecision:
    minted_for: str
    pending: tuple[str, ...]
    """Nodes the last successful `up` did not have: their joins may still have to run."""


def window_end(minted_for: str) -> datetime:
    """When the mint window `minted_for` (a UTC day or hour) ends: the credentials' input moves then."""
    if "T" in minted_for:
        return datetime.strptime(minted_for, HOUR).replace(tzinfo=UTC) + timedelta(hours=1)
    return datetime.strptime(minted_for, DAY).replace(tzinfo=UTC) + timedelta(days=1)


def decide(
    record: JoinRecord | None, joining: Sequence[str], control_planes: Sequence[str], now: datetime
) -> MintDecision:
    """`joining`: every node that joins through the credentials; `control_planes`: those of them that are."""
    known = set(record.nodes) if record is not None else set()
    pending = tuple(n for n in joining if n not in known)
    if not pending:
        return MintDecision(record.minted_for if record is not None else "", pending)
    window = now.strftime(HOUR if any(n in control_planes for n in pending) else DAY)
    # A retry in the window the failed run minted in keeps that token: the record still names the window of the
    # last successful run, so the window is now's, whatever the record says.
    return MintDecision(window, pending)
