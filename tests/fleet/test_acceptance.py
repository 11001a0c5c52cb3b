"""Acceptance on the fleet: the first control plane runs the real acceptance step against the stand-in API (the
kubectl stub schedules each Job as the API server, the scheduler and Kueue would, and answers with DCGM and
nccl-tests output of the node's simulated health), the failing nodes get the quarantine taint and only they, and
each later `up` tests exactly what its change calls for (the trigger table of docs/acceptance.md)."""

from __future__ import annotations

from typing import Any

import pytest

from components.acceptance.verdict import QUARANTINE_TAINT

from ..gpu_host import H200_LSPCI
from .engine import FleetEngine, FleetRun
from .gpu import acceptance_health, give_gpus, kueue_flavors
from .hosts import HostSpec
from .measure import MEASUREMENTS

pytestmark = pytest.mark.fleet

MODEL = "H200-SXM-141GB"
GPU_NODES = ("gpu-a", "gpu-b", "gpu-c", "gpu-d")
STEP = "cp-1-acceptance"
QUARANTINE = "cp-1-acceptance-quarantine"


def health(cluster: dict[str, Any], **nodes: dict[str, Any]) -> None:
    acceptance_health(cluster, MODEL, **nodes)


def runs(cluster: dict[str, Any]) -> list[dict[str, Any]]:
    return list(cluster.get("acceptance", {}).get("runs", []))


def quarantined(cluster: dict[str, Any]) -> list[str]:
    return sorted(
        name
        for name, node in cluster["nodes"].items()
        if any(t.get("key") == QUARANTINE_TAINT.key for t in node.get("taints") or [])
    )


def nodes_tested_since(before: list[dict[str, Any]], cluster: dict[str, Any]) -> list[str]:
    """The nodes whose per-node Job ran since `before` was taken."""
    return sorted(run["node"] for run in runs(cluster)[len(before) :] if run["kind"] == "Job")


def ran(run: FleetRun, resource: str) -> bool:
    return any(step.resource == resource and step.action in ("create", "update") for step in run.steps)


def test_acceptance_tests_what_changed_and_quarantines_exactly_the_failing_nodes(fleet, fleet_engine: FleetEngine):
    hosts = fleet(HostSpec("cp-1"), *(HostSpec(name) for name in GPU_NODES))
    give_gpus(hosts["cp-1"], [], None)
    for name in GPU_NODES:
        give_gpus(hosts[name], [H200_LSPCI] * 8, None)  # bare: the operator brings the driver
    gpu = {"count": 8, "model": MODEL}
    nodes = [hosts["cp-1"].node("control-plane"), *(hosts[name].node(gpu=gpu) for name in GPU_NODES)]
    platform = {"gpuOperator": {"enabled": True, "driverVersion": "570.172.08"}, "kueue": {"enabled": True}}
    platform["kubeflow"] = {"enabled": True}

    def up(**acceptance: Any) -> FleetRun:
        values, secret = hosts.stack_values(nodes, **platform, acceptance=acceptance)
        run = fleet_engine.up(values, secret)
        run.raise_error()
        return run

    # 1. A cluster with acceptance off; then the nodes' simulated health: gpu-c is 44 % below its peers (an
    #    outlier above the floor), gpu-d's DCGM memory test fails.
    first = up(enabled=False)
    assert not ran(first, STEP)
    with hosts.cluster_lock() as cluster:
        kueue_flavors(cluster, MODEL)
        health(
            cluster, **{"gpu-a": {}, "gpu-b": {"busbw": 358.0}, "gpu-c": {"busbw": 200.0}, "gpu-d": {"diag": "fail"}}
        )

    # 2. Turned on (the default): every GPU node tested, each by its own Job through Kueue, then one TrainJob
    #    across all four; exactly gpu-c and gpu-d quarantined.
    second = up()
    step = second.step(STEP)
    [cluster] = hosts.clusters()
    assert nodes_tested_since([], cluster) == list(GPU_NODES)
    assert {run["dcgmLevel"] for run in runs(cluster) if run["kind"] == "Job"} == {2}
    [train_job] = [run for run in runs(cluster) if run["kind"] == "TrainJob"]
    assert sorted(train_job["nodes"]) == list(GPU_NODES)
    assert not cluster.get("acceptance", {}).get("unschedulable"), cluster["acceptance"]["unschedulable"]
    assert quarantined(cluster) == ["gpu-c", "gpu-d"]
    summary = second.program.outputs["acceptance"].value
    assert summary["quarantined"] == ["gpu-c", "gpu-d"]
    assert [summary["nodes"][n]["result"] for n in GPU_NODES] == ["pass", "pass", "fail", "fail"]
    assert "below the median" in summary["nodes"]["gpu-c"]["reasons"][0]
    assert any("memory" in reason for reason in summary["nodes"]["gpu-d"]["reasons"])
    [group] = summary["multiNode"]
    assert group["result"] == "pass" and group["nodes"] == list(GPU_NODES)
    report = second.program.outputs["acceptanceReport"].value
    assert report["results"]["summary"]["failed"] == 2 and report["results"]["summary"]["tests"] == 5
    quarantine = second.step(QUARANTINE)
    assert "changed: gpu-c: quarantined" in (quarantine.stdout or "")
    assert "ok: gpu-a: not quarantined" in (quarantine.stdout or "")
    MEASUREMENTS["acceptance: step, 4 nodes + a 4-node TrainJob (s)"] = round(step.ended - step.started, 2)
    MEASUREMENTS["acceptance: stdout bytes for 4 nodes"] = len(step.stdout or "")
    # Progress on stderr (what the CLI shows), data on stdout.
    assert "changed: gpu-a: started acceptance-gpu-a" in step.stderr
    assert all(line.startswith("mlcluster-acceptance: ") for line in (step.stdout or "").splitlines())

    # 3. Unchanged: nothing runs, no session opens on cp-1 for acceptance, no Job starts.
    before = runs(cluster)
    third = up()
    assert not ran(third, STEP) and not ran(third, QUARANTINE)
    [cluster] = hosts.clusters()
    assert runs(cluster) == before and quarantined(cluster) == ["gpu-c", "gpu-d"]

    # 4. Lower the level: the higher level's result stands, nothing runs.
    fourth = up(level="quick")
    assert not ran(fourth, STEP)

    # 5. The operator's driver bumped (gpu-c's cabling fixed meanwhile): every node tested again; gpu-c passes and
    #    leaves quarantine, gpu-d stays.
    with hosts.cluster_lock() as cluster:
        health(cluster, **{"gpu-c": {"busbw": 361.0}})
    platform["gpuOperator"] = {**platform["gpuOperator"], "driverVersion": "580.95.05"}
    before = runs(cluster)
    fifth = up()
    [cluster] = hosts.clusters()
    assert nodes_tested_since(before, cluster) == list(GPU_NODES)
    assert quarantined(cluster) == ["gpu-d"]
    assert "changed: gpu-a: started acceptance-gpu-a" in fifth.step(STEP).stderr

    # 6. gpu-d repaired: nothing retests it by itself; the retest token does, and only gpu-d.
    with hosts.cluster_lock() as cluster:
        health(cluster, **{"gpu-d": {"diag": "pass"}})
    sixth = up()
    assert not ran(sixth, STEP)
    before = runs(cluster)
    seventh = up(retest="2026-12-03")
    [cluster] = hosts.clusters()
    assert nodes_tested_since(before, cluster) == ["gpu-d"]
    assert quarantined(cluster) == []
    assert seventh.program.outputs["acceptance"].value["quarantined"] == []
    assert "ok: gpu-a: tested with this record already" in seventh.step(STEP).stderr
    lifted = seventh.step(QUARANTINE).stdout or ""
    assert "changed: gpu-d: quarantine lifted" in lifted and "changed: gpu-c" not in lifted
    MEASUREMENTS["acceptance: retest of 1 node (s)"] = round(seventh.step(STEP).ended - seventh.step(STEP).started, 2)

    # 7. The level raised to burn-in: every node again, with dcgmi diag -r 3.
    before = runs(cluster)
    up(retest="2026-12-03", level="burn-in")
    [cluster] = hosts.clusters()
    assert nodes_tested_since(before, cluster) == list(GPU_NODES)
    assert {run["dcgmLevel"] for run in runs(cluster)[len(before) :] if run["kind"] == "Job"} == {3}


def test_a_node_whose_test_hangs_is_reported_stuck_by_name_and_quarantined(fleet, fleet_engine: FleetEngine):
    hosts = fleet(HostSpec("cp-1"), HostSpec("gpu-a"), HostSpec("gpu-b"))
    for name in ("cp-1", "gpu-a", "gpu-b"):
        give_gpus(hosts[name], [H200_LSPCI] * 8 if name != "cp-1" else [], None)
    gpu = {"count": 8, "model": MODEL}
    nodes = [hosts["cp-1"].node("control-plane"), hosts["gpu-a"].node(gpu=gpu), hosts["gpu-b"].node(gpu=gpu)]
    platform = {"gpuOperator": {"enabled": True}}
    values, secret = hosts.stack_values(nodes, **platform, acceptance={"enabled": False})
    fleet_engine.up(values, secret).raise_error()
    with hosts.cluster_lock() as cluster:
        health(cluster, **{"gpu-a": {}, "gpu-b": {"hang": True}})
    values, secret = hosts.stack_values(nodes, **platform, acceptance={"waveTimeoutMinutes": 1})
    run = fleet_engine.up(values, secret)
    run.raise_error()
    step = run.step(STEP)
    # Two waves of one node (10 % of 2 nodes rounds down, never below one): gpu-b's holds its wave for the
    # timeout, then its Job's deadline fails it.
    assert 60 <= step.ended - step.started < 120
    assert "warning: gpu-b: its acceptance Job acceptance-gpu-b did not finish within 60 s" in step.stderr
    summary = run.program.outputs["acceptance"].value
    assert summary["nodes"]["gpu-a"]["result"] == "pass"
    assert (
        summary["nodes"]["gpu-b"]["reasons"][0] == "gpu-b: its test did not finish within the wave's 1 min (timed out)"
    )
    [cluster] = hosts.clusters()
    assert quarantined(cluster) == ["gpu-b"]
    MEASUREMENTS["acceptance: a stuck node with waveTimeoutMinutes 1 (s)"] = round(step.ended - step.started, 2)
