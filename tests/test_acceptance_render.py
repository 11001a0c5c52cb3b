"""Acceptance wired: the Jobs and the TrainJob against the real schemas, the step's input and the retest rules
through it, the 64-node fixture's stack output, CTRF report and quarantine, and the program's resources."""

from __future__ import annotations

import base64
import copy
import gzip
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.acceptance.spec import ISSUE_36_AI_CLUSTER_RUNTIME
from components.config.derived import multi_node_fabric
from components.config.spec import Spec
from components.plan.engine import PreviewMocks
from components.render import acceptance as render
from components.render.shell import stored_files_of

from .conftest import load_spec, stack_values
from .fleet.stubs import acceptance_objects as stub_objects
from .upstream import chart_crd, crd_errors, custom_resource_errors, kubernetes_errors, require_upstream

FIXTURES = Path(__file__).parent / "fixtures" / "acceptance"
TRAINER = ("kubeflow-trainer", "2.3.0")
KUEUE_CRDS = {
    "ClusterQueue": "kueue/v0.19.2/kueue.x-k8s.io_clusterqueues.yaml",
    "LocalQueue": "kueue/v0.19.2/kueue.x-k8s.io_localqueues.yaml",
}
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{:0>43}"


def scaled_all_reduce(target_gbps: float) -> str:
    """The upstream all_reduce_perf sample scaled so its largest size reads `target_gbps` (the fleet stub's own)."""
    return stub_objects.scaled_all_reduce((FIXTURES / "all_reduce_perf.h100-2node.txt").read_text(), target_gbps)


def packed(text: str | None) -> str:
    return "-" if text is None else base64.b64encode(gzip.compress(text.encode())).decode()


def fleet_spec(count: int, **acceptance: Any) -> Spec:
    """One control plane and `count` 8-GPU H100 nodes in racks of 16."""
    values, secret = stack_values("lab")
    values = copy.deepcopy(values)
    first = values["nodes"][0]
    nodes = [first | {"roles": ["control-plane"], "gpu": None}]
    nodes[0].pop("gpu", None)
    for index in range(1, count + 1):
        nodes.append(
            {
                "name": f"gpu-{index:02d}",
                "host": f"198.18.1.{index}",
                "roles": ["worker"],
                "hostKey": HOST_KEY.format(index),
                "topology": {"rack": f"r{(index - 1) // 16:02d}"},
                "gpu": {"count": 8, "model": "H100-SXM-80GB"},
            }
        )
    values["nodes"] = nodes
    values["acceptance"] = acceptance
    return load_spec(values, secret)


def step_stdout(spec: Spec, plan: render.Plan, busbw: dict[str, float], diag_fail: set[str]) -> str:
    """What the acceptance step prints for these results (its last loop's format)."""
    passing = (FIXTURES / "dcgmi-diag-r2.constructed.pass.json").read_text()
    failing = (FIXTURES / "dcgmi-diag-r2.constructed.fail.json").read_text()
    lines = []
    for line in plan.lines:
        node, _, _, _, record = line.split(" ")
        diag = failing if node in diag_fail else passing
        nccl = packed(scaled_all_reduce(busbw[node]))
        lines.append(f"{render.OUTPUT_PREFIX}node {node} {record} done 600 {packed(diag)} {nccl}")
    return "progress that is not a result\n" + "\n".join(lines) + "\n"


# ---- the objects, against the real schemas ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def onprem() -> Spec:
    return load_spec(*stack_values("onprem"))


def test_one_job_per_gpu_node_pinned_with_the_taints_tolerated(onprem: Spec) -> None:
    template = render.dump_all(
        [render.job_template(onprem.nodes, onprem.acceptance, onprem.kueue, 1200, multi_gpu=True)]
    )
    for node in render.tested_nodes(onprem.nodes, onprem.acceptance.nodes):
        assert node.gpu is not None
        job = yaml.safe_load(render.fill_job(template, node.name, node.gpu.count))
        assert kubernetes_errors(job, onprem.kubernetes_version) == [], node.name
        pod = job["spec"]["template"]["spec"]
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node.name]}]}]
        tolerated = {(t["key"], t["effect"]) for t in pod["tolerations"]}
        assert ("nvidia.com/gpu", "NoSchedule") in tolerated
        assert ("mlcluster.io/acceptance", "NoSchedule") in tolerated
        [diag] = pod["initContainers"]
        [nccl] = pod["containers"]
        assert diag["resources"]["limits"]["nvidia.com/gpu"] == nccl["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert "dcgmi diag -r 2 -j" in diag["command"][-1]
        assert nccl["args"][nccl["args"].index("-g") + 1] == "8"
        assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 1200
        assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == render.QUEUE_NAME
    one_gpu = yaml.safe_load(
        render.fill_job(
            render.dump_all([render.job_template(onprem.nodes, onprem.acceptance, onprem.kueue, 600, multi_gpu=False)]),
            "x",
            1,
        )
    )
    assert kubernetes_errors(one_gpu, onprem.kubernetes_version) == []
    assert [c["name"] for c in one_gpu["spec"]["template"]["spec"]["containers"]] == ["dcgm-diag"]
    # The schema check can fail: a Job with a wrong field is refused.
    broken = copy.deepcopy(one_gpu)
    broken["spec"]["backofLimit"] = 0
    assert kubernetes_errors(broken, onprem.kubernetes_version)


def test_job_names_fit_and_stay_apart() -> None:
    long = "n" * 63
    assert len(render.job_name(long)) <= 63
    assert render.job_name(long) != render.job_name("n" * 62 + "m")
    assert render.job_name("gpu-1") == "acceptance-gpu-1"


def test_the_multi_node_all_reduce_is_a_train_job_gang_admitted_by_kueue(onprem: Spec) -> None:
    groups = render.node_groups(onprem.nodes, onprem.kueue, onprem.acceptance.nodes)
    assert [(g.name, g.nodes) for g in groups] == [
        ("r07-h100-sxm-80gb-8gpu", ("gpu-1", "gpu-2")),
        ("r08-h100-sxm-80gb-8gpu", ("gpu-3", "gpu-4")),
    ]
    runtime = render.training_runtime(onprem.acceptance, onprem.nodes)
    crd = chart_crd(*TRAINER, "trainer.kubeflow.org_trainingruntimes.yaml")
    assert custom_resource_errors(runtime, crd, "trainingruntimes") == []
    for group in groups:
        job = render.train_job(onprem.acceptance, onprem.kueue, onprem.network, group, 1200)
        crd = chart_crd(*TRAINER, "trainer.kubeflow.org_trainjobs.yaml")
        assert custom_resource_errors(job, crd, "trainjobs") == [], group.name
        # Kueue's TrainJob integration admits the whole job or nothing: its queue label is the gang admission.
        assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == render.QUEUE_NAME
        assert job["spec"]["trainer"]["numNodes"] == 2
        patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        pod = patch["template"]["spec"]["template"]["spec"]
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        # One term per node: a metadata.name field selector takes one value (the API server refuses more).
        assert [term["matchFields"] for term in terms] == [
            [{"key": "metadata.name", "operator": "In", "values": [node]}] for node in group.nodes
        ]
    broken = render.train_job(onprem.acceptance, onprem.kueue, onprem.network, groups[0], 1200)
    broken["spec"]["trainer"]["numNode"] = 2
    assert custom_resource_errors(broken, crd, "trainjobs")
    for document in render.kueue_objects(onprem.kueue, onprem.nodes, onprem.acceptance):
        assert crd_errors(document, KUEUE_CRDS[document["kind"]]) == [], document["kind"]


def test_with_rdma_the_all_reduce_holds_the_rdma_device_and_ipc_lock_and_is_judged_as_rdma() -> None:
    values, secret = stack_values("onprem")
    values = {**values, "network": {"rdma": {"enabled": True, "nics": {"ifNames": ["ibp24s0"]}}}}
    spec = load_spec(values, secret)
    group = render.node_groups(spec.nodes, spec.kueue, spec.acceptance.nodes)[0]
    job = render.train_job(spec.acceptance, spec.kueue, spec.network, group, 1200)
    limits = job["spec"]["trainer"]["resourcesPerNode"]["limits"]
    assert limits == {"nvidia.com/gpu": "8", spec.network.rdma.resource_name: 1}
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    pod = patch["template"]["spec"]["template"]["spec"]
    assert pod["containers"] == [{"name": "node", "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}]
    assert custom_resource_errors(job, chart_crd(*TRAINER, "trainer.kubeflow.org_trainjobs.yaml"), "trainjobs") == []
    assert multi_node_fabric(spec) == "rdma"
    floor = spec.acceptance.acceptance_spec().floor_for("all-reduce", "H100-SXM-80GB", "rdma")
    assert floor is not None and floor.gbps == 100.0 and floor.fabric == "rdma"


def test_without_rdma_the_all_reduce_has_no_default_floor_only_the_outlier_rule(onprem: Spec) -> None:
    group = render.node_groups(onprem.nodes, onprem.kueue, onprem.acceptance.nodes)[0]
    job = render.train_job(onprem.acceptance, onprem.kueue, onprem.network, group, 1200)
    assert job["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "8"}
    assert multi_node_fabric(onprem) == "tcp"
    # The on-prem example runs over TCP: the RDMA-era 100 GB/s would fail every rack; no upstream figure exists.
    assert onprem.acceptance.acceptance_spec().floor_for("all-reduce", "H100-SXM-80GB", "tcp") is None


def test_kueue_runs_the_trainjob_integration_the_gang_needs(onprem: Spec) -> None:
    from components.render.kueue import integrations

    assert "trainer.kubeflow.org/trainjob" in integrations(onprem.kubeflow)


def test_the_dcgm_image_is_the_one_the_pinned_gpu_operator_runs(onprem: Spec) -> None:
    values = yaml.safe_load(
        (require_upstream() / "charts" / "gpu-operator" / onprem.gpu_operator.version / "values.yaml").read_text()
    )
    dcgm = values["dcgm"]
    assert onprem.acceptance.dcgm_image == f"{dcgm['repository']}/{dcgm['image']}:{dcgm['version']}"


def test_floors_of_issue_36_say_they_are_unconfirmed() -> None:
    from components.acceptance.spec import DEFAULT_FLOORS

    h100 = [f for f in DEFAULT_FLOORS if f.gpu_model == "H100"]
    assert h100 and all(f.source.startswith(ISSUE_36_AI_CLUSTER_RUNTIME) for f in h100)
    # A floor for H100 covers the nodes named H100-SXM-80GB.
    assert h100[0].matches("all-reduce", "H100-SXM-80GB", h100[0].fabric)
    assert not h100[0].matches("all-reduce", "H1000", h100[0].fabric)


# ---- the retest rules through the step's input -------------------------------------------------------------------


def _previous(spec: Spec, plan: render.Plan, failed: set[str] = frozenset()) -> dict[str, Any]:
    """The `acceptance` output a run of `plan` leaves behind (each node's driver as report() keeps it)."""
    by_name = {node.name: node for node in spec.nodes}
    nodes = {
        name: {
            "record": record,
            "result": "fail" if name in failed else "pass",
            "reasons": ["x"] if name in failed else [],
            "driver": render.driver_of(spec.gpu_operator, by_name[name], None),
        }
        for name, record in plan.records.items()
    }
    return {"nodes": nodes, "retest": spec.acceptance.retest, "level": plan.level}


TRIGGERS: list[tuple[str, Any, list[str]]] = [
    ("nothing changed", lambda v: None, []),
    ("driver bumped", lambda v: v["gpuOperator"].update(driverVersion="580.95.05"), ["gpu-01", "gpu-02", "gpu-03"]),
    ("GPU Operator upgraded", lambda v: v["gpuOperator"].update(version="v26.7.1"), ["gpu-01", "gpu-02", "gpu-03"]),
    ("node replaced (new host key)", lambda v: v["nodes"][2].update(hostKey=HOST_KEY.format(99)), ["gpu-02"]),
    ("node added", lambda v: v["nodes"].append(dict(v["nodes"][3], name="gpu-04", host="198.18.1.4")), ["gpu-04"]),
    ("level raised", lambda v: v["acceptance"].update(level="burn-in"), ["gpu-01", "gpu-02", "gpu-03"]),
    ("level lowered", lambda v: v["acceptance"].update(level="quick"), []),
    ("retest token, no failures", lambda v: v["acceptance"].update(retest="2026-12-03"), []),
    ("a label changed", lambda v: v["nodes"][1].update(labels={"team": "a"}), []),
]


@pytest.mark.parametrize(("change", "edit", "tested"), TRIGGERS, ids=[t[0] for t in TRIGGERS])
def test_what_retests_a_node(change: str, edit: Any, tested: list[str]) -> None:
    spec = fleet_spec(3)
    first = render.plan_tests(spec, None, {})
    assert sorted(first.due) == ["gpu-01", "gpu-02", "gpu-03"]
    previous = _previous(spec, first)
    values, secret = stack_values("lab")
    values = copy.deepcopy(values)
    # The same stack as data, so a change is an edit of its values.
    values["nodes"] = [{k: v for k, v in node.items()} for node in _values_of(spec)]
    values["acceptance"] = {}
    edit(values)
    changed = load_spec(values, secret)
    plan = render.plan_tests(changed, previous, {})
    assert sorted(plan.due) == tested, change
    same_input = render.step_input(changed, plan) == render.step_input(spec, first)
    # The step's input changes exactly when a node is due: a lowered level tests nothing and changes nothing.
    if not tested:
        assert same_input, change
    else:
        assert not same_input, change


def _values_of(spec: Spec) -> list[dict[str, Any]]:
    out = []
    for node in spec.nodes:
        entry: dict[str, Any] = {"name": node.name, "host": node.host, "roles": list(node.roles)}
        if node.host_key:
            entry["hostKey"] = node.host_key
        if node.topology:
            entry["topology"] = dict(node.topology)
        if node.gpu:
            entry["gpu"] = {"count": node.gpu.count, "model": node.gpu.model}
        out.append(entry)
    return out


def test_the_retest_token_retests_exactly_the_failed_nodes() -> None:
    spec = fleet_spec(3)
    first = render.plan_tests(spec, None, {})
    previous = _previous(spec, first, failed={"gpu-02"})
    assert render.plan_tests(spec, previous, {}).due == {}
    asked = replace(spec, acceptance=replace(spec.acceptance, retest="2026-12-03"))
    plan = render.plan_tests(asked, previous, {})
    assert list(plan.due) == ["gpu-02"]
    assert "retest asked" in plan.due["gpu-02"][0]
    # After that run, the token is in gpu-02's record: the next up tests nothing.
    assert render.plan_tests(asked, _previous(asked, plan), {}).due == {}


def test_a_host_driver_change_retests_that_node() -> None:
    spec = fleet_spec(2)
    drivers = {"gpu-01": "570.86.15", "gpu-02": "570.86.15"}
    first = render.plan_tests(spec, None, drivers)
    plan = render.plan_tests(spec, _previous(spec, first), {**drivers, "gpu-02": "580.95.05"})
    assert plan.due == {"gpu-02": ("driver changed: 570.86.15 → 580.95.05",)}


def test_the_wave_column_bounds_each_wave() -> None:
    spec = fleet_spec(64)
    plan = render.plan_tests(spec, None, {})
    waves = [int(line.split(" ")[2]) for line in plan.lines]
    # 64 nodes, at most 10 % at once: waves of 6 (and one of 4).
    assert max(waves) == 11 and max(waves.count(w) for w in set(waves)) == 6


# ---- the 64-node fixture: output, CTRF, quarantine ----------------------------------------------------------------


def test_sixty_four_nodes_two_fail_and_exactly_they_are_quarantined(tmp_path: Path) -> None:
    spec = fleet_spec(64)
    plan = render.plan_tests(spec, None, {})
    busbw = {f"gpu-{i:02d}": 360.0 + (i % 7) for i in range(1, 65)}
    busbw["gpu-17"] = 360.0 * 0.6  # 40 % below its peers' median, above the 150 GB/s floor
    stdout = step_stdout(spec, plan, busbw, diag_fail={"gpu-42"})
    result = render.parse_step_output(spec, stdout)
    assert len(result.evidence) == 64
    outcome = render.report(spec, result, plan, now_ms=1_764_720_000_000)
    assert outcome.failed == ("gpu-17", "gpu-42")
    assert len(outcome.passed) == 62
    summary = outcome.summary
    assert summary["quarantined"] == ["gpu-17", "gpu-42"]
    slow = summary["nodes"]["gpu-17"]
    assert slow["result"] == "fail" and "below the median" in slow["reasons"][0]
    assert slow["busbwGBps"] == pytest.approx(216.0, abs=0.01) and slow["floorGBps"] == 150.0
    broken = summary["nodes"]["gpu-42"]
    assert broken["result"] == "fail" and any("memory" in reason for reason in broken["reasons"])
    assert summary["nodes"]["gpu-01"]["record"] == plan.records["gpu-01"]
    assert summary["gpuModels"] == [
        {"gpuModel": "H100-SXM-80GB", "nodes": 64, "passed": 62, "failed": 2, "medianBusbwGBps": pytest.approx(363.0)}
    ]
    ctrf = outcome.ctrf
    assert ctrf["reportFormat"] == "CTRF"
    assert ctrf["results"]["summary"]["tests"] == 64 and ctrf["results"]["summary"]["failed"] == 2
    assert {t["name"] for t in ctrf["results"]["tests"] if t["status"] == "failed"} == {
        "acceptance gpu-17",
        "acceptance gpu-42",
    }
    step = render.quarantine_step(outcome.failed, outcome.passed)
    assert step.settings["FAILED"] == "gpu-17 gpu-42"
    assert "gpu-17" not in step.settings["PASSED"].split() and len(step.settings["PASSED"].split()) == 62
    assert stored_files_of(step.node_script or "")
    config_map = render.summary_config_map(outcome)
    assert config_map["node.gpu-17"] == "fail" and config_map["failed"] == "2"
    # Kept as the issue's evidence: build/ is not under version control.
    out = tmp_path / "acceptance-64.json"
    out.write_text(json.dumps({"summary": summary, "ctrf": ctrf}, indent=1))


def test_a_stuck_node_fails_by_name_and_a_one_gpu_node_needs_no_nccl() -> None:
    values, secret = stack_values("lab")
    spec = load_spec(values, secret)
    plan = render.plan_tests(spec, None, {})
    [line] = plan.lines
    node, gpus, _, _, record = line.split(" ")
    assert gpus == "1"
    passing = (FIXTURES / "dcgmi-diag-r2.constructed.pass.json").read_text()
    done = f"{render.OUTPUT_PREFIX}node {node} {record} done 90 {packed(passing)} -\n"
    outcome = render.report(spec, render.parse_step_output(spec, done), plan, now_ms=0)
    assert outcome.failed == () and outcome.passed == (node,)
    assert "no NCCL test: one GPU" in outcome.summary["nodes"][node]["notes"][0]
    stuck = f"{render.OUTPUT_PREFIX}node {node} {record} stuck 1200 - -\n"
    outcome = render.report(spec, render.parse_step_output(spec, stuck), plan, now_ms=0)
    assert outcome.failed == (node,)
    assert outcome.summary["nodes"][node]["reasons"][0].startswith(f"{node}: its test did not finish within")


def test_a_slow_group_fails_its_all_reduce_without_quarantining_a_node() -> None:
    spec = fleet_spec(4, fabric="rdma")
    plan = render.plan_tests(spec, None, {})
    stdout = step_stdout(spec, plan, {n: 360.0 for n in plan.records}, set())
    [group] = render.node_groups(spec.nodes, spec.kueue, spec.acceptance.nodes)
    stdout += f"{render.OUTPUT_PREFIX}group {group.name} done {packed(scaled_all_reduce(40.0))}\n"
    outcome = render.report(spec, render.parse_step_output(spec, stdout), plan, now_ms=0)
    [multi] = outcome.summary["multiNode"]
    assert multi["result"] == "fail" and "below the 100 GB/s floor" in multi["reasons"][0]
    assert outcome.failed == ()


# ---- the program: resources, options and the preview warning -----------------------------------------------------


def test_the_program_runs_acceptance_after_the_platform_on_the_first_control_plane(run_stack: Any) -> None:
    run = run_stack("onprem")
    step = run.named("cp-1-acceptance")
    assert step.raw_inputs["connection"]["host"] == "10.20.0.11"
    assert step.inputs["logging"] == "stderr"
    depends = set(step.depends_on)
    releases = {r.name: r.urn for r in run.resources if r.type == "kubernetes:helm.sh/v3:Release"}
    for release in ("gpu-operator", "kueue", "kubeflow-trainer"):
        assert releases[release] in depends, release
    quarantine = run.named("cp-1-acceptance-quarantine")
    assert step.urn in quarantine.depends_on
    outputs = run.run.outputs
    assert "acceptance" in outputs and "acceptanceReport" in outputs


def test_acceptance_is_off_where_it_cannot_run(run_stack: Any) -> None:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["acceptance"] = {"enabled": False}
    run = run_stack("onprem", values=values, secret=secret)
    assert not [r for r in run.resources if "acceptance" in r.name and r.type == "command:remote:Command"]


def test_the_next_preview_warns_about_each_node_that_failed(run_stack: Any) -> None:
    spec = load_spec(*stack_values("onprem"))
    plan = render.plan_tests(spec, None, {})
    previous = _previous(spec, plan, failed={"gpu-3"})
    previous["nodes"]["gpu-3"]["reasons"] = ["bus bandwidth 90 GB/s is below the 150 GB/s floor"]
    run = run_stack("onprem", mocks=PreviewMocks({"acceptance": previous}))
    warned = [w for w in run.run.warnings if w.startswith("mlcluster:acceptance:")]
    assert len(warned) == 1
    assert re.search(r"gpu-3 failed acceptance at the last up \(bus bandwidth 90 GB/s", warned[0])
    assert "acceptance.retest" in warned[0]


@pytest.mark.parametrize(
    ("change", "key", "needle"),
    [
        ({"level": "thorough"}, "acceptance.level", "thorough"),
        ({"floors": [{"test": "loopback", "gbps": 100, "source": " "}]}, "acceptance.floors[0].source", "where"),
        (
            {"floors": [{"test": "loopback", "gbps": 100, "source": "ours", "fabric": "eks"}]},
            "acceptance.floors[0].fabric",
            "loopback",
        ),
        ({"outlierFraction": 1.5}, "acceptance.outlierFraction", ""),
        ({"ncclTestsImage": "nvcr.io/nvidia/pytorch:latest"}, "acceptance.ncclTestsImage", "not pinned"),
        ({"dcgmImage": "nvcr.io/nvidia/cloud-native/dcgm"}, "acceptance.dcgmImage", "not pinned"),
        ({"namespace": "Bad_Name"}, "acceptance.namespace", ""),
    ],
)
def test_bad_settings_name_their_key(change: dict[str, Any], key: str, needle: str) -> None:
    from components.config.schema import ConfigError

    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["acceptance"] = change
    with pytest.raises(ConfigError) as error:
        load_spec(values, secret)
    report = error.value.report()
    assert key in report and needle in report
