"""From each node's diagnostic and NCCL output to a verdict per node and per GPU model, the CTRF report, and the
nodes to quarantine.

A node passes only if its `dcgmi diag` passed, its bus bandwidth reaches the floor for its GPU model and fabric,
and it is not an outlier: more than (1 - outlier fraction) × the median of its peers (the other nodes with the
same GPU model). A node exactly 40 % below the median fails with the default 0.40: that is the node the rule names.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .dcgm import DcgmOutputError, parse_dcgm_diag
from .nccl import NcclOutputError, parse_all_reduce
from .spec import AcceptanceSpec, NcclTest


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


QUARANTINE_TAINT = Taint(key="mlcluster.io/acceptance", value="failed", effect="NoSchedule")
"""What a failing node gets: NoSchedule keeps new work off it while what already runs there is left alone (an
acceptance run is not a reason to kill a job); the GPU Operator's and the test's own pods tolerate it."""

CTRF_TOOL_NAME = "mlcluster-acceptance"


@dataclass(frozen=True)
class NodeEvidence:
    """What one node's acceptance pods printed; None where a pod produced nothing (it counts as a failure)."""

    node: str
    gpu_model: str
    diag_json: str | None
    nccl_output: str | None
    nccl_test: NcclTest = "loopback"
    fabric: str = "nvlink"
    duration_ms: int = 0
    nccl_skipped: str | None = None
    """Why no NCCL test ran on purpose (a one-GPU node has no peer GPU to reduce with): a note, not a failure."""
    stuck: str | None = None
    """The node's test did not finish in its wave's time (what timed out): a failure naming the node."""


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    gpu_model: str
    passed: bool
    reasons: tuple[str, ...]
    """Why it failed, one line each; empty when it passed."""
    diag_level: int
    busbw_gbps: float | None
    floor_gbps: float | None
    floor_source: str | None
    peer_median_gbps: float | None
    notes: tuple[str, ...] = ()
    """What did not fail it but a person should see: DCGM warnings, a node with no peers to compare with."""
    duration_ms: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "gpuModel": self.gpu_model,
            "result": "pass" if self.passed else "fail",
            "reasons": list(self.reasons),
            "diagLevel": self.diag_level,
            "busbwGBps": self.busbw_gbps,
            "floorGBps": self.floor_gbps,
            "floorSource": self.floor_source,
            "peerMedianGBps": self.peer_median_gbps,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class GroupVerdict:
    gpu_model: str
    nodes: int
    passed: int
    failed: int
    median_busbw_gbps: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpuModel": self.gpu_model,
            "nodes": self.nodes,
            "passed": self.passed,
            "failed": self.failed,
            "medianBusbwGBps": self.median_busbw_gbps,
        }


@dataclass(frozen=True)
class FleetVerdict:
    level: str
    diag_level: int
    nodes: tuple[NodeVerdict, ...]
    groups: tuple[GroupVerdict, ...] = field(default=())

    def nodes_to_taint(self) -> frozenset[str]:
        """Exactly the failing nodes: each gets QUARANTINE_TAINT, and no passing node does."""
        return frozenset(verdict.node for verdict in self.nodes if not verdict.passed)


@dataclass
class _Measured:
    evidence: NodeEvidence
    reasons: list[str]
    notes: list[str]
    busbw: float | None


def _measure(evidence: NodeEvidence) -> _Measured:
    reasons: list[str] = []
    notes: list[str] = []
    if evidence.stuck is not None:
        reasons.append(f"{evidence.node}: {evidence.stuck}")
    if evidence.diag_json is None:
        reasons.append("dcgmi diag produced no output (the diagnostic pod failed or never ran)")
    else:
        try:
            report = parse_dcgm_diag(evidence.diag_json)
        except DcgmOutputError as error:
            reasons.append(f"dcgmi diag output is unusable: {error}")
        else:
            reasons.extend(report.failures())
            notes.extend(report.warnings())
    busbw = None
    if evidence.nccl_skipped is not None:
        notes.append(f"no NCCL test: {evidence.nccl_skipped}")
    elif evidence.nccl_output is None:
        reasons.append(f"all_reduce_perf ({evidence.nccl_test}) produced no output (the NCCL pod failed or never ran)")
    else:
        try:
            result = parse_all_reduce(evidence.nccl_output)
        except NcclOutputError as error:
            reasons.append(f"all_reduce_perf ({evidence.nccl_test}) output is unusable: {error}")
        else:
            reasons.extend(result.failures())
            busbw = result.largest_size_busbw_gbps
    return _Measured(evidence, reasons, notes, busbw)


def judge(evidence: Sequence[NodeEvidence], spec: AcceptanceSpec) -> FleetVerdict:
    """The verdict of every node and GPU model; medians are taken over the nodes given (the fleet's results)."""
    names = [item.node for item in evidence]
    if duplicates := sorted({name for name in names if names.count(name) > 1}):
        raise ValueError(f"acceptance evidence names node(s) more than once: {', '.join(duplicates)}")
    measured = [_measure(item) for item in evidence]
    verdicts: list[NodeVerdict] = []
    for item in measured:
        node = item.evidence
        reasons, notes = list(item.reasons), list(item.notes)
        floor = spec.floor_for(node.nccl_test, node.gpu_model, node.fabric)
        peers = [
            other.busbw
            for other in measured
            if other is not item and other.evidence.gpu_model == node.gpu_model and other.busbw is not None
        ]
        median = statistics.median(peers) if peers else None
        if item.busbw is not None:
            if floor is None:
                notes.append(f"no bandwidth floor for {node.nccl_test} on {node.gpu_model} over {node.fabric}")
            elif item.busbw < floor.gbps:
                reasons.append(
                    f"bus bandwidth {item.busbw:g} GB/s is below the {floor.gbps:g} GB/s floor for"
                    f" {floor.describe()} ({floor.source})"
                )
            if median is None:
                notes.append(f"no other {node.gpu_model} node to compare with: the outlier rule did not apply")
            elif item.busbw <= (1 - spec.outlier_fraction) * median:
                below = 1 - item.busbw / median if median else 1.0
                reasons.append(
                    f"bus bandwidth {item.busbw:g} GB/s is {below:.0%} below the median {median:g} GB/s of its"
                    f" {len(peers)} {node.gpu_model} peer(s) (an outlier at {spec.outlier_fraction:.0%} or more)"
                )
        verdicts.append(
            NodeVerdict(
                node=node.node,
                gpu_model=node.gpu_model,
                passed=not reasons,
                reasons=tuple(reasons),
                diag_level=spec.dcgm_run_level,
                busbw_gbps=item.busbw,
                floor_gbps=floor.gbps if floor else None,
                floor_source=floor.source if floor else None,
                peer_median_gbps=median,
                notes=tuple(notes),
                duration_ms=node.duration_ms,
            )
        )
    groups = []
    for model in sorted({v.gpu_model for v in verdicts}):
        members = [v for v in verdicts if v.gpu_model == model]
        bandwidths = [v.busbw_gbps for v in members if v.busbw_gbps is not None]
        groups.append(
            GroupVerdict(
                gpu_model=model,
                nodes=len(members),
                passed=sum(v.passed for v in members),
                failed=sum(not v.passed for v in members),
                median_busbw_gbps=statistics.median(bandwidths) if bandwidths else None,
            )
        )
    return FleetVerdict(spec.level, spec.dcgm_run_level, tuple(verdicts), tuple(groups))


@dataclass(frozen=True)
class MultiNodeVerdict:
    """The all-reduce across one group of nodes: a slow or broken fabric between them. It names no single node,
    so it quarantines none; the group's nodes are listed for a person to bisect (docs/acceptance.md)."""

    group: str
    nodes: tuple[str, ...]
    passed: bool
    reasons: tuple[str, ...]
    busbw_gbps: float | None
    floor_gbps: float | None
    floor_source: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "nodes": list(self.nodes),
            "result": "pass" if self.passed else "fail",
            "reasons": list(self.reasons),
            "busbwGBps": self.busbw_gbps,
            "floorGBps": self.floor_gbps,
            "floorSource": self.floor_source,
        }


def judge_group(  # noqa: PLR0917
    group: str, nodes: Sequence[str], gpu_model: str, fabric: str, output: str | None, spec: AcceptanceSpec
) -> MultiNodeVerdict:
    """The multi-node all-reduce of `group` against the all-reduce floor for its GPU model and fabric."""
    reasons: list[str] = []
    busbw = None
    floor = spec.floor_for("all-reduce", gpu_model, fabric)
    if output is None:
        reasons.append("the multi-node all_reduce_perf produced no output (the TrainJob failed or never ran)")
    else:
        try:
            result = parse_all_reduce(output)
        except NcclOutputError as error:
            reasons.append(f"the multi-node all_reduce_perf output is unusable: {error}")
        else:
            reasons.extend(result.failures())
            busbw = result.largest_size_busbw_gbps
            if floor is not None and busbw < floor.gbps:
                reasons.append(
                    f"bus bandwidth {busbw:g} GB/s across {len(nodes)} nodes is below the {floor.gbps:g} GB/s floor"
                    f" for {floor.describe()} ({floor.source})"
                )
    return MultiNodeVerdict(
        group=group,
        nodes=tuple(nodes),
        passed=not reasons,
        reasons=tuple(reasons),
        busbw_gbps=busbw,
        floor_gbps=floor.gbps if floor else None,
        floor_source=floor.source if floor else None,
    )


def ctrf_report(verdict: FleetVerdict, start_ms: int, stop_ms: int) -> dict[str, Any]:
    """The run as a CTRF document (https://ctrf.io): one test per node, named after it, failed with its reasons."""
    tests = []
    for node in verdict.nodes:
        message = (
            f"passed dcgmi diag -r {node.diag_level} and all_reduce_perf at {node.busbw_gbps:g} GB/s"
            if node.passed and node.busbw_gbps is not None
            else "; ".join(node.reasons)
        )
        tests.append(
            {
                "name": f"acceptance {node.node}",
                "status": "passed" if node.passed else "failed",
                "duration": node.duration_ms,
                "message": message,
                "extra": node.as_dict(),
            }
        )
    passed = sum(node.passed for node in verdict.nodes)
    return {
        "reportFormat": "CTRF",
        "specVersion": "0.0.0",
        "results": {
            "tool": {"name": CTRF_TOOL_NAME},
            "summary": {
                "tests": len(tests),
                "passed": passed,
                "failed": len(tests) - passed,
                "pending": 0,
                "skipped": 0,
                "other": 0,
                "start": start_ms,
                "stop": stop_ms,
            },
            "tests": tests,
            "extra": {
                "level": verdict.level,
                "dcgmRunLevel": verdict.diag_level,
                "groups": [group.as_dict() for group in verdict.groups],
                "taint": str(QUARANTINE_TAINT),
                "nodesToTaint": sorted(verdict.nodes_to_taint()),
            },
        },
    }
