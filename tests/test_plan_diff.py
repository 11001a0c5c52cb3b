"""Offline plan diff: data-driven cases on small plan documents, the real program twice, and the CLI."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.plan.diff import COMMAND, RELEASE, diff_plans, render
from components.plan.writer import plan_document

from .conftest import PROJECT, load_spec, stack_values
from .test_plan_cli import plan

NODES = ("gpu-1", "gpu-2", "cpu-1")


def command(node: str, step: str, script: str, **inputs: Any) -> dict[str, Any]:
    return {
        "type": COMMAND,
        "name": f"{node}-{step}",
        "urn": f"urn:pulumi:lab::mlcluster::mlcluster:node_prep:NodePrep${COMMAND}::{node}-{step}",
        "runsOn": node,
        "inputs": {"create": script, "delete": f"echo leaving {node}", **inputs},
        "options": {"protect": False},
    }


def release(name: str, version: str, values: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": RELEASE,
        "name": name,
        "urn": f"urn:pulumi:lab::mlcluster::mlcluster:layer:Layer${RELEASE}::{name}",
        "inputs": {"name": name, "chart": name, "version": version, "namespace": name, "values": values},
        "options": {"protect": False},
    }


def base_plan() -> dict[str, Any]:
    resources = []
    for node in NODES:
        resources.append(command(node, "os", "apt-get install -y jq"))
        resources.append(command(node, "kubelet", "GC_LOW=70\nGC_HIGH=80\nwrite kubelet config"))
    resources.append(release("gpu-operator", "v26.7.0", {"driver": {"enabled": True}, "mig": {"strategy": "none"}}))
    resources.append(release("kueue", "0.19.2", {}))
    return {"project": "mlcluster", "stack": "lab", "resources": resources, "outputs": {"kubeconfig": "[secret]"}}


def edit(kind: str, name: str, change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(plan: dict[str, Any]) -> None:
        for resource in plan["resources"]:
            if resource["type"] == kind and (name == "*" or resource["name"].endswith(name)):
                change(resource)

    return apply


def set_gc_low(resource: dict[str, Any]) -> None:
    resource["inputs"]["create"] = resource["inputs"]["create"].replace("GC_LOW=70", "GC_LOW=65")


def rename_stack(plan: dict[str, Any]) -> None:
    plan["stack"] = "lab-2"
    for resource in plan["resources"]:
        resource["urn"] = resource["urn"].replace("urn:pulumi:lab::", "urn:pulumi:lab-2::")


def drop(name: str) -> Callable[[dict[str, Any]], None]:
    def apply(plan: dict[str, Any]) -> None:
        plan["resources"] = [r for r in plan["resources"] if r["name"] != name]

    return apply


def add_step(plan: dict[str, Any]) -> None:
    plan["resources"].append(command("gpu-2", "image-disk", "mkfs.xfs /dev/nvme1n1"))


# (case, change to the later plan, expected {(node, step): kind}, expected {release: [changed keys]})
CASES: list[tuple[str, Callable[[dict[str, Any]], None], dict[tuple[str, str], str], dict[str, list[str]]]] = [
    ("nothing changed", lambda plan: None, {}, {}),
    ("another stack of the same program", rename_stack, {}, {}),
    (
        "kubelet threshold: the kubelet step re-runs on every node",
        edit(COMMAND, "-kubelet", set_gc_low),
        {(node, "kubelet"): "re-runs" for node in NODES},
        {},
    ),
    (
        "chart version bump: one release",
        edit(RELEASE, "gpu-operator", lambda r: r["inputs"].update(version="v26.8.0")),
        {},
        {"gpu-operator": ["version"]},
    ),
    (
        "values key changes",
        edit(RELEASE, "gpu-operator", lambda r: r["inputs"]["values"].update(driver={"enabled": False}, dcgm=True)),
        {},
        {"gpu-operator": ["values dcgm", "values driver.enabled"]},
    ),
    ("a step added", add_step, {("gpu-2", "image-disk"): "added"}, {}),
    ("a node's step removed", drop("cpu-1-os"), {("cpu-1", "os"): "removed"}, {}),
    ("a release removed", drop("kueue"), {}, {"kueue": ["(removed)"]}),
    (
        "triggers replace the step",
        edit(COMMAND, "gpu-1-os", lambda r: r["inputs"].update(triggers=["v2"])),
        {("gpu-1", "os"): "replaced"},
        {},
    ),
    (
        "only the on-delete script",
        edit(COMMAND, "gpu-2-os", lambda r: r["inputs"].update(delete="echo bye")),
        {("gpu-2", "os"): "changed"},
        {},
    ),
    (
        "replaceOnChanges names an input",
        edit(COMMAND, "cpu-1-kubelet", lambda r: (set_gc_low(r), r["options"].update(replaceOnChanges=["create"]))),
        {("cpu-1", "kubelet"): "replaced"},
        {},
    ),
    (
        "first values key of a release",
        edit(RELEASE, "kueue", lambda r: r["inputs"]["values"].update(replicas=2)),
        {},
        {"kueue": ["values replicas"]},
    ),
    (
        "stdin (credentials wiring) re-runs the step",
        edit(COMMAND, "gpu-1-kubelet", lambda r: r["inputs"].update(stdin="[secret]")),
        {("gpu-1", "kubelet"): "re-runs"},
        {},
    ),
]


def release_keys(change: Any) -> list[str]:
    if change.kind != "changed":
        return [f"({change.kind})"]
    keys = [c.key for c in change.identity + change.inputs] + [f"values {c.key}" for c in change.values]
    return sorted(keys)


@pytest.mark.parametrize(("case", "change", "steps", "releases"), CASES, ids=[c[0] for c in CASES])
def test_diff_cases(case, change, steps, releases) -> None:
    old = base_plan()
    new = copy.deepcopy(old)
    change(new)
    diff = diff_plans(old, new)
    assert {(c.node, c.step): c.kind for c in diff.steps} == steps, case
    assert {r.release: release_keys(r) for r in diff.releases} == releases, case
    assert not diff.resources and not diff.outputs, case
    assert diff.empty == (not steps and not releases)


def test_inputs_under_ignore_changes_do_not_rerun() -> None:
    old = base_plan()
    edit(COMMAND, "-kubelet", lambda r: r["options"].update(ignoreChanges=["create"]))(old)
    new = copy.deepcopy(old)
    edit(COMMAND, "-kubelet", set_gc_low)(new)
    assert diff_plans(old, new).empty
    edit(COMMAND, "gpu-1-kubelet", lambda r: r["inputs"].update(stdin="[secret]"))(new)
    assert [(c.node, c.step, c.kind, c.why) for c in diff_plans(old, new).steps] == [
        ("gpu-1", "kubelet", "re-runs", "stdin changed")
    ]


def test_values_known_only_during_up_say_so() -> None:
    old = base_plan()
    new = copy.deepcopy(old)
    edit(RELEASE, "gpu-operator", lambda r: r["inputs"]["values"].update(driver={"enabled": "[computed]"}))(new)
    assert "values ~ driver.enabled: true -> (known only during up)" in render(diff_plans(old, new))


def test_script_lines_are_shown_for_a_rerun() -> None:
    old = base_plan()
    new = copy.deepcopy(old)
    edit(COMMAND, "gpu-1-kubelet", set_gc_low)(new)
    (change,) = diff_plans(old, new).steps
    assert change.script == ["-GC_LOW=70", "+GC_LOW=65"]
    text = render(diff_plans(old, new))
    assert "gpu-1" in text and "~ kubelet" in text and "+GC_LOW=65" in text
    assert "summary: 1 step(s) re-run and 0 replaced on 1 node(s)" in text


def program_plan(run_stack, values: dict[str, Any], secret: list[str]) -> dict[str, Any]:
    run = run_stack("onprem", values=values, secret=secret)
    return plan_document(run.run, project="mlcluster", stack="onprem", spec=load_spec(values, secret))


def test_gc_threshold_change_touches_only_the_steps_that_carry_the_kubelet_config(run_stack) -> None:
    values, secret = stack_values("onprem")
    old = program_plan(run_stack, values, secret)
    changed = copy.deepcopy(values)
    changed["kubelet"]["imageGCLowThresholdPercent"] = 65
    new = program_plan(run_stack, changed, secret)
    diff = diff_plans(old, new)
    carrying = {
        (r["runsOn"], r["name"].removeprefix(f"{r['runsOn']}-"))
        for r in new["resources"]
        if r["type"] == COMMAND and "imageGCLowThresholdPercent: 65" in str(r["inputs"].get("create"))
    }
    assert carrying, "no node step carries the kubelet configuration"
    # Each node's kubelet-restart step carries a digest of its tuning, so it re-runs (in its batch) too.
    # The tuning step runs inside each node's prepare command: that command re-runs, and the diff names the
    # step inside it that changed, with only that step's lines (kubeadm-init carries the kubelet config too).
    assert {step for _, step in carrying} == {"prepare", "kubeadm-init"}
    restarts = {(node, "kubelet-restart") for node, step in carrying if step == "prepare"}
    assert {(c.node, c.step) for c in diff.steps} == carrying | restarts
    assert {c.kind for c in diff.steps} == {"re-runs"}
    for c in diff.steps:
        if c.step == "kubelet-restart":
            assert [line[:15] for line in c.script] == ["-TUNING_DIGEST=", "+TUNING_DIGEST="], c.script
        elif c.step == "kubeadm-init":
            assert c.script == ["-imageGCLowThresholdPercent: 70", "+imageGCLowThresholdPercent: 65"]
        else:
            assert c.why.startswith("script changed in kubelet-tuning; the whole command re-runs"), c.why
            changed_lines = ["-imageGCLowThresholdPercent: 70", "+imageGCLowThresholdPercent: 65"]
            assert c.script == ["[kubelet-tuning]", *changed_lines]
    assert not diff.releases and not diff.resources and not diff.outputs


def test_chart_bump_changes_one_release_and_no_node(run_stack) -> None:
    values, secret = stack_values("onprem")
    old = program_plan(run_stack, values, secret)
    bumped = copy.deepcopy(values)
    bumped["kueue"]["version"] = "0.19.3"
    diff = diff_plans(old, program_plan(run_stack, bumped, secret))
    assert not diff.steps and not diff.resources
    assert [(r.release, [str(c) for c in r.identity], r.values, r.inputs) for r in diff.releases] == [
        ("kueue", ["~ version: 0.19.2 -> 0.19.3"], [], [])
    ]


def test_compare_cli(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    assert plan("--stack", "onprem", "--out", str(old)).returncode == 0
    stack = yaml.safe_load((PROJECT / "stacks" / "Pulumi.onprem.yaml").read_text())
    stack["config"]["mlcluster:nodes"][6]["labels"]["team"] = "vision"
    stack["config"]["mlcluster:gpuOperator"]["version"] = "v26.7.1"
    changed = tmp_path / "Pulumi.changed.yaml"
    changed.write_text(yaml.safe_dump(stack))
    result = plan("--stack-file", str(changed), "--out", str(new), "--compare", str(old))
    assert result.returncode == 0, result.stderr
    report = result.stdout[result.stdout.index(f"changes since {old}") :]
    assert "  gpu-2\n    ~ kubeadm-join" in report and ",team=vision" in report
    assert "~ gpu-operator" in report and "~ version: v26.7.0 -> v26.7.1" in report
    assert "summary: 1 step(s) re-run and 0 replaced on 1 node(s), 0 added, 0 removed; 1 release(s) change" in report
    assert json.loads((new / "plan.json").read_text())["stack"] == "changed"
    # Comparing a plan with itself, written over the same folder, shows nothing.
    same = plan("--stack", "onprem", "--out", str(old), "--compare", str(old))
    assert same.returncode == 0 and f"changes since {old}: no changes" in same.stdout


def test_compare_with_no_plan_exits_2(tmp_path: Path) -> None:
    result = plan("--stack", "onprem", "--out", str(tmp_path / "out"), "--compare", str(tmp_path / "missing"))
    assert result.returncode == 2 and "holds no plan.json" in result.stderr
    assert not (tmp_path / "out").exists()
