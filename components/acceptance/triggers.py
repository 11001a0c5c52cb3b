"""Which nodes an acceptance run must (re)test, and why, given what the last run recorded.

A node is tested when it is new, when it is not the machine that was tested (its machine id or host key changed:
a replaced board or a reinstalled server under the same name), when its GPU model, driver, the GPU Operator or the
container toolkit changed since it passed, or when the stack asks for a higher level than the node last reached.
Nothing else triggers a test: an unchanged stack tests nothing, a lower level keeps the higher level's result, and
a node that failed stays quarantined until one of these changes (a repair that swaps the board changes its id).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .spec import LEVEL_ORDER, AcceptanceLevel


@dataclass(frozen=True)
class NodeRecord:
    """What an acceptance run recorded about one node it tested."""

    node: str
    machine_id: str
    """/etc/machine-id, or the pinned SSH host key: what tells the same server from a new one of the same name."""
    gpu_model: str
    driver_version: str
    gpu_operator_version: str
    toolkit_version: str
    level: AcceptanceLevel


@dataclass(frozen=True)
class NodeNow:
    """A GPU node as the current stack and cluster describe it."""

    node: str
    machine_id: str
    gpu_model: str
    driver_version: str


@dataclass(frozen=True)
class StackNow:
    gpu_operator_version: str
    toolkit_version: str
    level: AcceptanceLevel


def nodes_to_retest(
    previous: Mapping[str, NodeRecord], nodes: Sequence[NodeNow], stack: StackNow
) -> dict[str, tuple[str, ...]]:
    """Each node that must be tested, with every reason that applies; a node absent from the answer keeps its result."""
    due: dict[str, tuple[str, ...]] = {}
    for node in nodes:
        record = previous.get(node.node)
        if record is None:
            due[node.node] = ("new node: never tested",)
            continue
        reasons = []
        if record.machine_id != node.machine_id:
            reasons.append(
                f"replaced: machine id {record.machine_id} → {node.machine_id} (a different server under this name)"
            )
        changes = (
            ("GPU model", record.gpu_model, node.gpu_model),
            ("driver", record.driver_version, node.driver_version),
            ("GPU Operator", record.gpu_operator_version, stack.gpu_operator_version),
            ("container toolkit", record.toolkit_version, stack.toolkit_version),
        )
        reasons.extend(f"{what} changed: {before} → {now}" for what, before, now in changes if before != now)
        if LEVEL_ORDER[stack.level] > LEVEL_ORDER[record.level]:
            reasons.append(f"level raised: {record.level} → {stack.level}")
        if reasons:
            due[node.node] = tuple(reasons)
    return due
