"""Cluster acceptance, the pure part: the parsers on upstream samples and damaged copies, the 64-node verdict, the
CTRF report and taint set, the floors and their sources, the 1,000-node wave plan and the retest triggers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from components.acceptance.dcgm import DcgmOutputError, parse_dcgm_diag
from components.acceptance.nccl import NcclOutputError, parse_all_reduce
from components.acceptance.spec import (
    DEFAULT_FLOORS,
    AcceptanceSpec,
    BandwidthFloor,
)
from components.acceptance.triggers import NodeNow, NodeRecord, StackNow, nodes_to_retest
from components.acceptance.verdict import QUARANTINE_TAINT, NodeEvidence, ctrf_report, judge
from components.acceptance.waves import plan_waves

FIXTURES = Path(__file__).parent / "fixtures" / "acceptance"
NCCL_SAMPLE = (FIXTURES / "all_reduce_perf.h100-2node.txt").read_text()
DIAG_PASS = (FIXTURES / "dcgmi-diag-r2.constructed.pass.json").read_text()
DIAG_FAIL = (FIXTURES / "dcgmi-diag-r2.constructed.fail.json").read_text()


# --- nccl-tests all_reduce_perf -------------------------------------------------------------------------------------


def test_the_upstream_all_reduce_log_parses_whole() -> None:
    result = parse_all_reduce(NCCL_SAMPLE)
    assert len(result.rows) == 31
    first, last = result.rows[0], result.rows[-1]
    assert (first.size_bytes, first.count, first.data_type, first.redop, first.root) == (8, 2, "float", "sum", -1)
    assert (last.size_bytes, last.out_of_place.time_us, last.out_of_place.busbw_gbps) == (8589934592, 47535, 338.82)
    assert (last.in_place.algbw_gbps, last.in_place.busbw_gbps, last.in_place.wrong) == (179.92, 337.35, 0)
    assert result.avg_busbw_gbps == 70.742
    assert result.out_of_bounds == 0
    assert result.failures() == []
    # The floor is compared with the large-message figure, not the latency-heavy average.
    assert result.largest_size_busbw_gbps == 337.35


def _truncate_after(text: str, size: str) -> str:
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == [size])
    return "".join(lines[: at + 1])


def test_a_truncated_all_reduce_log_is_a_failure_that_says_so() -> None:
    with pytest.raises(NcclOutputError, match=r"truncated: no `# Avg bus bandwidth` line after 22 row\(s\)"):
        parse_all_reduce(_truncate_after(NCCL_SAMPLE, "16777216"))


def test_a_non_zero_wrong_count_fails_the_run() -> None:
    damaged = NCCL_SAMPLE.replace("337.35      0\n", "337.35      7\n")
    assert damaged != NCCL_SAMPLE
    assert parse_all_reduce(damaged).failures() == [
        "all_reduce_perf got 7 wrong element(s) at 8589934592 B in-place (#wrong must be 0: data was corrupted on"
        " the way)"
    ]


def test_unchecked_results_and_out_of_bounds_values_fail_the_run() -> None:
    unchecked = NCCL_SAMPLE.replace("338.82      0", "338.82    N/A").replace(
        "Out of bounds values : 0", "Out of bounds values : 3"
    )
    failures = parse_all_reduce(unchecked).failures()
    assert any("N/A" in f and "-c 0" in f for f in failures)
    assert "all_reduce_perf reported 3 out-of-bounds value(s)" in failures


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no all_reduce_perf results table"),
        ("NCCL WARN connection refused\n", "no all_reduce_perf results table"),
        (NCCL_SAMPLE.split("           8 ")[0], "has no rows"),
        (NCCL_SAMPLE.replace("float     sum      -1    135.8", "float     sum      -1"), "has 12 columns, not 13"),
        (NCCL_SAMPLE.replace("338.82      0", "338.82      x"), "#wrong is 'x', not a whole number"),
        (NCCL_SAMPLE.replace(": 70.742", ": nan"), "not a finite number"),
    ],
    ids=["empty", "error-only", "header-only", "short-row", "bad-wrong", "nan-average"],
)
def test_damaged_all_reduce_logs_are_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(NcclOutputError, match=re.escape(message)):
        parse_all_reduce(text)


def test_nccl_log_lines_between_rows_are_skipped() -> None:
    noisy = NCCL_SAMPLE.replace(
        "          16             4",
        "node-1:123:456 [0] NCCL INFO Channel 00/32 : 0 1 2 3\n          16             4",
    )
    assert len(parse_all_reduce(noisy).rows) == 31


# --- dcgmi diag -j --------------------------------------------------------------------------------------------------


def test_a_passing_diag_has_no_failures() -> None:
    report = parse_dcgm_diag(DIAG_PASS)
    assert {(r.test, r.status) for r in report.results} == {("software", "pass"), ("pcie", "pass"), ("memory", "pass")}
    assert len(report.results) == 24  # three tests on eight GPUs
    assert (report.dcgm_version, report.driver_version) == ("4.2.3", "580.95.05")
    assert report.failures() == []


def test_a_failed_test_in_the_diag_names_the_test_and_the_gpu() -> None:
    report = parse_dcgm_diag(DIAG_FAIL)
    assert report.failures() == [
        "dcgmi diag test 'memory' (Hardware) failed on GPU 3: (constructed) memory test failed on GPU 3"
    ]
    assert [r.gpu_id for r in report.results if r.status == "fail"] == [3]


def test_older_dcgm_gpu_ids_results_are_read_per_gpu() -> None:
    legacy = {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [{"name": "Blacklist", "results": [{"gpu_ids": "0,1", "status": "PASS"}]}],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {"name": "Memory", "results": [{"gpu_ids": "1", "status": "FAIL", "warnings": ["ECC DBE"]}]}
                    ],
                },
            ]
        }
    }
    report = parse_dcgm_diag(json.dumps(legacy))
    assert [(r.entity, r.status) for r in report.results] == [("GPU 0", "pass"), ("GPU 1", "pass"), ("GPU 1", "fail")]
    assert report.failures() == ["dcgmi diag test 'Memory' (Hardware) failed on GPU 1: ECC DBE"]


def test_warnings_do_not_fail_but_all_skipped_does() -> None:
    warned = json.loads(DIAG_PASS)
    warned["DCGM Diagnostic"]["test_categories"][1]["tests"][0]["results"][0]["status"] = "Warn"
    report = parse_dcgm_diag(json.dumps(warned))
    assert report.failures() == [] and report.warnings() == ["dcgmi diag test 'pcie' warned on GPU 0: no message"]
    skipped = DIAG_PASS.replace('"Pass"', '"Skip"')
    assert parse_dcgm_diag(skipped).failures() == [
        "dcgmi diag passed no test at all (every test was skipped or not run): nothing was proven"
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Error: unable to connect to host engine", "is not JSON"),
        (DIAG_PASS[: len(DIAG_PASS) // 2], "is not JSON"),
        ("[]", "is list, not a JSON object"),
        ('{"something": {}}', "has no 'DCGM Diagnostic' object"),
        ('{"runtime_error": "no GPUs"}', "could not run: no GPUs"),
        ('{"DCGM Diagnostic": {"test_categories": []}}', "lists no test results"),
        (DIAG_PASS.replace('"Pass"', '"Maybe"', 1), "status 'Maybe' is none of Pass, Fail, Warn, Skip"),
    ],
    ids=["not-json", "truncated-json", "array", "wrong-root", "runtime-error", "empty", "unknown-status"],
)
def test_damaged_diag_output_is_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(DcgmOutputError, match=re.escape(message)):
        parse_dcgm_diag(text)


# --- the 64-node fleet ----------------------------------------------------------------------------------------------

MEDIAN = 337.35


def _nccl_log_at(busbw: float) -> str:
    """The upstream log with its largest-size busbw set to `busbw` (both halves), everything else as measured."""
    return NCCL_SAMPLE.replace("338.82      0", f"{busbw:.2f}      0").replace("337.35      0", f"{busbw:.2f}      0")


def _fleet() -> list[NodeEvidence]:
    """63 healthy nodes spread around MEDIAN, one 40 % below it, one whose diagnostic fails on GPU 3."""
    spread = [-6.0, -3.0, 0.0, 3.0, 6.0]
    nodes = []
    for i in range(64):
        name = f"gpu-{i:02d}"
        busbw = MEDIAN + spread[i % len(spread)] if i != 17 else round(MEDIAN * 0.60, 2)
        diag = DIAG_FAIL if i == 42 else DIAG_PASS
        nodes.append(NodeEvidence(name, "H100", diag, _nccl_log_at(busbw), duration_ms=180_000 + i))
    return nodes


def test_the_64_node_fleet_fails_exactly_the_slow_node_and_the_broken_gpu() -> None:
    verdict = judge(_fleet(), AcceptanceSpec(level="standard"))
    failing = {v.node: v.reasons for v in verdict.nodes if not v.passed}
    assert set(failing) == {"gpu-17", "gpu-42"}
    assert failing["gpu-42"] == (
        "dcgmi diag test 'memory' (Hardware) failed on GPU 3: (constructed) memory test failed on GPU 3",
    )
    (slow,) = failing["gpu-17"]
    assert slow.startswith("bus bandwidth 202.41 GB/s is 40% below the median 337.35 GB/s of its 63 H100 peer(s)")
    assert verdict.nodes_to_taint() == frozenset({"gpu-17", "gpu-42"})
    assert str(QUARANTINE_TAINT) == "mlcluster.io/acceptance=failed:NoSchedule"
    assert [g.as_dict() for g in verdict.groups] == [
        {"gpuModel": "H100", "nodes": 64, "passed": 62, "failed": 2, "medianBusbwGBps": MEDIAN}
    ]


def test_each_node_verdict_has_the_same_shape() -> None:
    verdict = judge(_fleet(), AcceptanceSpec(level="burn-in"))
    healthy = next(v for v in verdict.nodes if v.node == "gpu-00").as_dict()
    assert healthy == {
        "node": "gpu-00",
        "gpuModel": "H100",
        "result": "pass",
        "reasons": [],
        "diagLevel": 3,
        "busbwGBps": MEDIAN - 6.0,
        "floorGBps": 150.0,
        "floorSource": healthy["floorSource"],
        "peerMedianGBps": MEDIAN,
        "notes": [],
    }
    assert "NVSentinel" in healthy["floorSource"]
    assert {tuple(v.as_dict()) for v in verdict.nodes} == {tuple(healthy)}


def test_the_ctrf_report_of_the_64_node_fleet() -> None:
    report = ctrf_report(judge(_fleet(), AcceptanceSpec()), start_ms=1_764_000_000_000, stop_ms=1_764_000_900_000)
    assert (report["reportFormat"], report["specVersion"]) == ("CTRF", "0.0.0")
    results = report["results"]
    assert results["tool"] == {"name": "mlcluster-acceptance"}
    assert results["summary"] == {
        "tests": 64,
        "passed": 62,
        "failed": 2,
        "pending": 0,
        "skipped": 0,
        "other": 0,
        "start": 1_764_000_000_000,
        "stop": 1_764_000_900_000,
    }
    failed = {t["name"]: t["message"] for t in results["tests"] if t["status"] == "failed"}
    assert set(failed) == {"acceptance gpu-17", "acceptance gpu-42"}
    assert "'memory'" in failed["acceptance gpu-42"] and "GPU 3" in failed["acceptance gpu-42"]
    assert all({"name", "status", "duration", "message"} <= set(t) for t in results["tests"])
    assert {t["status"] for t in results["tests"]} == {"passed", "failed"}
    assert results["extra"]["nodesToTaint"] == ["gpu-17", "gpu-42"]
    json.dumps(report)  # a report that cannot be written is no report


def test_missing_or_truncated_output_fails_the_node_not_the_run() -> None:
    fleet = _fleet()[:3]
    fleet[0] = NodeEvidence("gpu-00", "H100", None, _truncate_after(NCCL_SAMPLE, "1024"))
    verdict = judge(fleet, AcceptanceSpec())
    reasons = next(v for v in verdict.nodes if v.node == "gpu-00").reasons
    assert reasons[0].startswith("dcgmi diag produced no output")
    assert "output is unusable: all_reduce_perf output is truncated" in reasons[1]
    assert verdict.nodes_to_taint() == frozenset({"gpu-00"})


def test_a_node_below_its_floor_fails_even_with_no_peers() -> None:
    verdict = judge([NodeEvidence("lab", "L4", DIAG_PASS, _nccl_log_at(12.0), fabric="pcie")], AcceptanceSpec())
    (node,) = verdict.nodes
    assert not node.passed and "below the 15 GB/s floor for loopback on * over pcie" in node.reasons[0]
    assert node.notes == ("no other L4 node to compare with: the outlier rule did not apply",)


# --- floors ---------------------------------------------------------------------------------------------------------


def test_every_floor_says_where_it_comes_from() -> None:
    assert DEFAULT_FLOORS and all(len(floor.source) > 20 for floor in DEFAULT_FLOORS)
    with pytest.raises(ValueError, match="needs a source"):
        BandwidthFloor("all-reduce", 400.0, " ", "H200", "infiniband")


@pytest.mark.parametrize(
    ("test", "model", "fabric", "gbps"),
    [
        ("loopback", "H100", "nvlink", 150.0),
        ("loopback", "L4", "pcie", 15.0),
        ("all-reduce", "H100", "eks", 300.0),
        ("all-reduce", "H100", "gke", 250.0),
        ("all-reduce", "H100", "infiniband", 100.0),
        ("all-reduce", "A100", "rdma", 100.0),
        # No RDMA: NVSentinel's figure is an RDMA fabric's; no default floor, only the outlier rule.
        ("all-reduce", "H100", "tcp", None),
        ("all-reduce", "A100", "eks", None),
    ],
)
def test_the_most_specific_default_floor_applies(test, model, fabric, gbps) -> None:
    floor = AcceptanceSpec().floor_for(test, model, fabric)
    assert (floor.gbps if floor is not None else None) == gbps


def test_a_stack_floor_overrides_the_default() -> None:
    mine = BandwidthFloor("all-reduce", 360.0, "our own burn-in of rack A, 2026-11", "H100", "eks")
    spec = AcceptanceSpec(floors=(mine,))
    assert spec.floor_for("all-reduce", "H100", "eks") == mine
    untouched = spec.floor_for("all-reduce", "H100", "gke")
    assert untouched is not None and untouched.gbps == 250.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"level": "thorough"}, "acceptance level 'thorough' is none of quick, standard, burn-in"),
        ({"outlier_fraction": 1.5}, "must lie between 0 and 1"),
        ({"max_wave_nodes": 0}, "max wave nodes 0 must be 1 or more"),
    ],
)
def test_a_bad_acceptance_spec_is_refused_clearly(kwargs, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        AcceptanceSpec(**kwargs)


def test_levels_map_to_dcgm_run_levels() -> None:
    assert [AcceptanceSpec(level=lv).dcgm_run_level for lv in ("quick", "standard", "burn-in")] == [1, 2, 3]


# --- waves ----------------------------------------------------------------------------------------------------------

THOUSAND = [f"gpu-{i:04d}" for i in range(1000)]


@pytest.mark.parametrize(
    ("level", "wave_minutes", "timeout_minutes", "total"),
    [
        ("quick", 9, 18, "2.4 h"),
        ("standard", 10, 20, "2.7 h"),
        ("burn-in", 23, 46, "6.1 h"),
    ],
)
def test_the_wave_plan_for_1000_nodes(level, wave_minutes, timeout_minutes, total) -> None:
    plan = plan_waves(THOUSAND, AcceptanceSpec(level=level))
    assert plan.wave_size == 64 and len(plan.waves) == 16
    assert [len(w.nodes) for w in plan.waves] == [64] * 15 + [40]
    assert sorted(n for w in plan.waves for n in w.nodes) == THOUSAND
    assert (plan.wave_expected_seconds // 60, plan.wave_timeout_seconds // 60) == (wave_minutes, timeout_minutes)
    assert plan.summary().endswith(f"about {total} in all")


def test_a_small_fleet_keeps_most_of_its_gpus() -> None:
    assert plan_waves([f"n{i}" for i in range(30)], AcceptanceSpec()).wave_size == 3
    assert plan_waves(["lab"], AcceptanceSpec()).wave_size == 1


# --- retest triggers ------------------------------------------------------------------------------------------------

STACK = StackNow(gpu_operator_version="v25.10.0", toolkit_version="1.18.0", level="standard")
RECORD = NodeRecord("gpu-1", "m-111", "H100", "580.95.05", "v25.10.0", "1.18.0", "standard")
SAME = NodeNow("gpu-1", "m-111", "H100", "580.95.05")

TRIGGERS = [
    ("unchanged stack", {"gpu-1": RECORD}, [SAME], STACK, {}),
    ("new node", {}, [SAME], STACK, {"gpu-1": ("new node: never tested",)}),
    (
        "replaced server",
        {"gpu-1": RECORD},
        [NodeNow("gpu-1", "m-999", "H100", "580.95.05")],
        STACK,
        {"gpu-1": ("replaced: machine id m-111 → m-999 (a different server under this name)",)},
    ),
    (
        "driver upgrade",
        {"gpu-1": RECORD},
        [NodeNow("gpu-1", "m-111", "H100", "580.105.08")],
        STACK,
        {"gpu-1": ("driver changed: 580.95.05 → 580.105.08",)},
    ),
    (
        "operator and toolkit upgrade",
        {"gpu-1": RECORD},
        [SAME],
        StackNow("v25.10.1", "1.18.1", "standard"),
        {"gpu-1": ("GPU Operator changed: v25.10.0 → v25.10.1", "container toolkit changed: 1.18.0 → 1.18.1")},
    ),
    (
        "level raised",
        {"gpu-1": RECORD},
        [SAME],
        StackNow("v25.10.0", "1.18.0", "burn-in"),
        {"gpu-1": ("level raised: standard → burn-in",)},
    ),
    ("level lowered", {"gpu-1": RECORD}, [SAME], StackNow("v25.10.0", "1.18.0", "quick"), {}),
    (
        "only the new node of two",
        {"gpu-1": RECORD},
        [SAME, NodeNow("gpu-2", "m-222", "H100", "580.95.05")],
        STACK,
        {"gpu-2": ("new node: never tested",)},
    ),
]


@pytest.mark.parametrize(("case", "previous", "nodes", "stack", "expected"), TRIGGERS, ids=[t[0] for t in TRIGGERS])
def test_which_nodes_are_retested_and_why(case, previous, nodes, stack, expected) -> None:
    assert nodes_to_retest(previous, nodes, stack) == expected
