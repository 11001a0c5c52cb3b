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
from components.plan.writer import host_key_fingerprint, plan_document

from .conftest import PROJECT, load_spec, stack_values
from .test_plan_cli import plan_here as plan

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
    # Each node's kubelet command carries a digest of its tuning (in its kubelet-restart part), so it re-runs
    # (in its batch) too.
    # The tuning step runs inside each node's prepare command: that command re-runs, and the diff names the
    # step inside it that changed, with only that step's lines (kubeadm-init carries the kubelet config too).
    assert {step for _, step in carrying} == {"prepare", "kubeadm-init"}
    restarts = {(node, "kubelet") for node, step in carrying if step == "prepare"}
    assert {(c.node, c.step) for c in diff.steps} == carrying | restarts
    assert {c.kind for c in diff.steps} == {"re-runs"}
    for c in diff.steps:
        if c.step == "kubelet":
            assert c.why.startswith("script changed in kubelet-restart; the whole command re-runs"), c.why
            digest = ["[kubelet-restart]", "-TUNING_DIGEST=", "+TUNING_DIGEST="]
            assert [line[:15] if "DIGEST" in line else line for line in c.script] == digest, c.script
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


# Both plans of a comparison read the program's clock at one moment: made a second apart across an hour, the join
# credentials' mint window would differ (test_plans_made_at_different_moments_say_so).
AT = ("--at", "2026-12-03T04:59:30Z")


def test_compare_cli(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    assert plan("--stack", "onprem", "--out", str(old), *AT).returncode == 0
    stack = yaml.safe_load((PROJECT / "stacks" / "Pulumi.onprem.yaml").read_text())
    stack["config"]["mlcluster:nodes"][6]["labels"]["team"] = "vision"
    stack["config"]["mlcluster:gpuOperator"]["version"] = "v26.7.1"
    changed = tmp_path / "Pulumi.changed.yaml"
    changed.write_text(yaml.safe_dump(stack))
    result = plan("--stack-file", str(changed), "--out", str(new), "--compare", str(old), *AT)
    assert result.returncode == 0, result.stderr
    # The review's first screen: the changes come first, before everything planned.
    assert result.stdout.startswith("What `up` does: stack changed")
    report = result.stdout[result.stdout.index(f"changes since {old}") : result.stdout.index("everything planned")]
    # The label reaches the joined Node through the first control plane's node-metadata step, whose diff names the
    # node and the label; gpu-2's join does not re-run (on a joined node it would only say "already joined").
    assert "  cp-1\n    ~ node-metadata" in report and "\n        +gpu-2 label team=vision\n" in report
    assert "kubeadm-join" not in report
    # The example's warnings are listed (not new: the earlier plan has them too).
    assert "warnings (1, 0 new: +)\n    mlcluster:kueue.teams: " in report
    assert "~ gpu-operator" in report and "~ version: v26.7.0 -> v26.7.1" in report
    # The operator's new version is in every GPU node's acceptance record: the four are tested again, and said so.
    assert "~ acceptance               re-runs: tests 4 node(s): gpu-1 (operator v26.7.0 -> v26.7.1); gpu-2" in report
    assert "summary: 2 step(s) re-run and 0 replaced on 1 node(s), 0 added, 0 removed; 1 release(s) change" in report
    assert json.loads((new / "plan.json").read_text())["stack"] == "changed"
    # Comparing a plan with itself, written over the same folder, shows nothing.
    same = plan("--stack", "onprem", "--out", str(old), "--compare", str(old), *AT)
    assert same.returncode == 0 and f"changes since {old}: no changes" in same.stdout


def test_plans_made_at_different_moments_say_so(tmp_path: Path) -> None:
    """The onprem stack has control planes to join, so its mint window is the UTC hour: one stack planned at 04:59
    and at 05:01 differs in join-credentials only, and the diff says the clock moved it, not the stack."""
    early, late = tmp_path / "early", tmp_path / "late"
    assert plan("--stack", "onprem", "--out", str(early), "--at", "2026-12-03T04:59:00Z").returncode == 0
    result = plan("--stack", "onprem", "--out", str(late), "--at", "2026-12-03T06:01:00+01:00", "--compare", str(early))
    assert result.returncode == 0, result.stderr
    report = result.stdout[result.stdout.index("changes since") :]
    assert "cp-1\n    ~ join-credentials         re-runs: script changed; its script names the mint window" in report
    assert "(2026-12-03T04:59:00+00:00 and 2026-12-03T05:01:00+00:00)" in report
    assert "-MINTED_FOR=2026-12-03T04\n        +MINTED_FOR=2026-12-03T05" in report
    assert "summary: 1 step(s) re-run and 0 replaced on 1 node(s)" in report
    assert json.loads((late / "plan.json").read_text())["at"] == "2026-12-03T05:01:00+00:00"
    # Within the hour the plans agree, and a moment without a UTC offset is refused (whose hour would it be?).
    same = plan("--stack", "onprem", "--out", str(late), "--at", "2026-12-03T04:01Z", "--compare", str(early))
    assert same.returncode == 0 and "no changes" in same.stdout
    naive = plan("--stack", "onprem", "--out", str(tmp_path / "naive"), "--at", "2026-12-03T05:01")
    assert naive.returncode == 2 and "has no UTC offset" in naive.stderr


def test_compare_with_no_plan_exits_2(tmp_path: Path) -> None:
    result = plan("--stack", "onprem", "--out", str(tmp_path / "out"), "--compare", str(tmp_path / "missing"))
    assert result.returncode == 2 and "holds no plan.json" in result.stderr
    assert not (tmp_path / "out").exists()


# Host keys and the fingerprints `ssh-keygen -lf` printed for them.
KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHG1+hK5IaqEerF+AQ1yDD+AXmnNtbw5meP4ib0ETJ0w"
FINGERPRINT_A = "SHA256:apDFVJPchTb3Iz80jKjwaQ6lyZldwgkFc4A6BPADUso"
KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAzRmcgPphu8I1o6CZndFCtsZvC+Xgur5XzQP2Cfo2bd"
FINGERPRINT_B = "SHA256:toerEyYar+xD3EnDJEnuL+C9OJuiqY6OX67WGf4cWeU"


def test_host_key_fingerprints_are_the_ones_ssh_keygen_prints() -> None:
    assert host_key_fingerprint(KEY_A) == FINGERPRINT_A and host_key_fingerprint(KEY_B) == FINGERPRINT_B
    assert host_key_fingerprint(f"{KEY_A} root@cp-1") == FINGERPRINT_A
    assert host_key_fingerprint(None) is None and host_key_fingerprint("ssh-ed25519 not*base64") == "(not a public key)"


def set_node(index: int, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def apply(values: dict[str, Any]) -> None:
        values["nodes"][index].update(fields)

    return apply


def set_ssh(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def apply(values: dict[str, Any]) -> None:
        values["ssh"].update(fields)

    return apply


def with_bastion(host: str = "10.20.0.2") -> Callable[[dict[str, Any]], None]:
    def apply(values: dict[str, Any]) -> None:
        values["ssh"]["bastion"] = {"host": host, "user": "jump", "hostKey": KEY_B}
        # A bastion carries SSH only: the provider needs an API address this machine reaches.
        values["cluster"]["apiAddress"] = "127.0.0.1:6443"

    return apply


EVERY_NODE: set[str] = set()
"""Stands for all of the stack's nodes in the cases below."""

# (case, change before, change after, nodes whose placement changes, changed facts shown for each)
PLACEMENT_CASES: list[tuple[str, Any, Callable[[dict[str, Any]], None], set[str], list[str]]] = [
    ("node address", None, set_node(5, host="10.20.0.131"), {"gpu-1"}, ["~ host: 10.20.0.31 -> 10.20.0.131"]),
    ("node port", None, set_node(5, port=2222), {"gpu-1"}, ["~ port: 22 -> 2222"]),
    ("node user", None, set_node(5, user="deploy"), {"gpu-1"}, ["~ user: ubuntu -> deploy"]),
    ("ssh user", None, set_ssh(user="admin"), EVERY_NODE, ["~ user: ubuntu -> admin"]),
    ("ssh port", None, set_ssh(port=2200), EVERY_NODE, ["~ port: 22 -> 2200"]),
    (
        "node host key",
        set_node(5, hostKey=KEY_B),
        set_node(5, hostKey=KEY_A),
        {"gpu-1"},
        [f"~ hostKey: {FINGERPRINT_B} -> {FINGERPRINT_A}"],
    ),
    (
        "bastion added",
        None,
        with_bastion(),
        EVERY_NODE,
        [
            "+ bastion.auth: privateKey",
            "+ bastion.host: 10.20.0.2",
            f"+ bastion.hostKey: {FINGERPRINT_B}",
            "+ bastion.port: 22",
            "+ bastion.user: jump",
        ],
    ),
    (
        "bastion address",
        with_bastion(),
        with_bastion("10.20.0.3"),
        EVERY_NODE,
        ["~ bastion.host: 10.20.0.2 -> 10.20.0.3"],
    ),
]


@pytest.mark.parametrize(
    ("case", "before", "after", "nodes", "shown"), PLACEMENT_CASES, ids=[c[0] for c in PLACEMENT_CASES]
)
def test_a_changed_ssh_target_shows_per_node_and_reruns_its_steps(run_stack, case, before, after, nodes, shown) -> None:  # noqa: PLR0917
    values, secret = stack_values("onprem")
    if before is not None:
        before(values)
    old = program_plan(run_stack, values, secret)
    changed = copy.deepcopy(values)
    after(changed)
    new = program_plan(run_stack, changed, secret)
    expected = nodes or {n["name"] for n in values["nodes"]}
    assert set(new["placement"]) == {n["name"] for n in values["nodes"]}
    diff = diff_plans(old, new)
    assert {node: [str(c) for c in keys] for node, keys in diff.placement.items()} == dict.fromkeys(expected, shown)
    # The connection is an input of every step on the node: `up` runs each of them again, on the new target.
    steps_on = {
        (r["runsOn"], r["name"].removeprefix(f"{r['runsOn']}-"))
        for r in new["resources"]
        if r["type"] == COMMAND and r["runsOn"] in expected
    }
    # No step keeps a recorded connection (ignoreChanges): the admin kubeconfig's re-read dials the new target too.
    assert not [r["name"] for r in new["resources"] if "connection" in r["options"].get("ignoreChanges", [])]
    reruns = {(c.node, c.step) for c in diff.steps if c.kind == "re-runs"}
    # A GPU node's new host key is a new machine to acceptance (its record's machine id): it is tested again, and
    # the review says which node and why.
    retested = {("cp-1", "acceptance")} if case == "node host key" else set()
    assert steps_on and reruns == steps_on | retested
    assert {c.why for c in diff.steps if c.kind == "re-runs" and c.step != "acceptance"} == {"connection changed"}
    for change in (c for c in diff.steps if c.step == "acceptance" and c.node not in expected):
        assert change.why.startswith("tests 1 node(s): gpu-1 (machine SHA256:"), change.why
    # The node's copy of the scripts goes to the new target (pulumi-command's update would not copy again).
    copies = {(c.node, c.step, c.kind) for c in diff.steps if c.kind != "re-runs"}
    assert copies == {(node, "scripts", "replaced") for node in expected}
    assert values["ssh"]["privateKey"] not in json.dumps(new)


def test_plan_placement_has_no_secret_and_says_when_host_keys_are_not_pinned(run_stack) -> None:
    values, secret = stack_values("onprem")
    values["ssh"]["insecureIgnoreHostKeys"] = True
    del values["nodes"][0]["hostKey"]
    document = program_plan(run_stack, values, secret)
    assert values["ssh"]["privateKey"] not in json.dumps(document)
    assert document["placement"]["cp-1"] == {
        "host": "10.20.0.11",
        "port": 22,
        "user": "ubuntu",
        "hostKey": "not pinned (insecureIgnoreHostKeys)",
        "auth": "privateKey",
    }
    assert document["placement"]["cp-2"]["hostKey"] == host_key_fingerprint(values["nodes"][1]["hostKey"])
    assert document["placement"]["cp-2"]["hostKey"].startswith("SHA256:")


def test_a_removed_step_says_what_its_removal_runs() -> None:
    """A removed step runs its recorded on-delete script; one without any runs nothing, and one kept with
    retainOnDelete is only forgotten. The report says which: a reviewer must not read a drain into a removal
    that runs none, nor miss one that does."""
    old = base_plan()
    old["resources"][1]["inputs"].pop("delete")  # the first node's kubelet step: no on-delete script
    old["resources"][2]["options"]["retainOnDelete"] = True  # the second node's os step
    removed = {r["name"] for r in old["resources"][:3]}
    new = {**old, "resources": [r for r in old["resources"] if r["name"] not in removed]}
    whys = {(c.node, c.step): c.why for c in diff_plans(old, new).steps}
    first, second = NODES[0], NODES[1]
    assert whys == {
        (first, "os"): f"step removed: its on-delete script runs on {first}",
        (first, "kubelet"): "step removed: it has no on-delete script: nothing runs",
        (second, "os"): "step removed: forgotten (retainOnDelete): nothing runs",
    }
    replaced = copy.deepcopy(old)
    for resource in replaced["resources"][:2]:
        resource["inputs"]["triggers"] = ["v2"]
    whys = {(c.node, c.step): c.why for c in diff_plans(old, replaced).steps}
    assert whys[(first, "os")] == "replaced (triggers changed): on-delete script runs, then the step"
    assert whys[(first, "kubelet")] == "replaced (triggers changed): no on-delete script, then the step"


def test_a_connection_fact_an_older_plan_did_not_record_is_no_change(run_stack) -> None:
    """Plans record how each step authenticates (`auth`) since ssh.agent; a plan from before has no such fact: that is
    not a changed connection (nothing re-runs for it). A real change of it, key to agent, is."""
    values, secret = stack_values("onprem")
    new = program_plan(run_stack, values, secret)
    old = copy.deepcopy(new)
    for resource in old["resources"]:
        if isinstance(resource.get("connection"), dict):
            resource["connection"].pop("auth", None)
    for facts in old["placement"].values():
        facts.pop("auth", None)
    assert diff_plans(old, new).empty
    agent = copy.deepcopy(new)
    for resource in agent["resources"]:
        if isinstance(resource.get("connection"), dict):
            resource["connection"]["auth"] = "agent (SSH_AUTH_SOCK)"
    changed = diff_plans(new, agent)
    assert changed.steps and {c.why for c in changed.steps if c.kind == "re-runs"} == {"connection changed"}


def test_a_change_kueue_makes_immutable_previews_as_a_replacement_of_named_objects(run_stack) -> None:
    """A GPU taint's effect changes the flavor's tolerations and a level more changes the Topology's levels; Kueue
    0.19's CRDs make both immutable, so the objects get new names (render.kueue.named_after) and the review says
    they are replaced, and that the queues move to the new flavor (tests/fleet/test_kueue_day2.py applies it)."""
    values, secret = stack_values("onprem")
    old = program_plan(run_stack, values, secret)
    changed = copy.deepcopy(values)
    for node in changed["nodes"]:
        if "gpu" in node:
            node["taints"] = ["nvidia.com/gpu.class=training:NoSchedule"]
    changed["kueue"]["topology"]["levels"] = ["block", "rack", "row"]
    for node in changed["nodes"]:
        if "topology" in node:
            node["topology"]["row"] = "w1"
    diff = diff_plans(old, program_plan(run_stack, changed, secret))
    kinds = {c.resource.rsplit("::", 1)[1]: c.kind for c in diff.resources}
    assert kinds["datacenter"] == kinds["h100-sxm-80gb"] == "replaced"
    assert {kinds[team] for team in ("llm", "vision")} == {"changed"}
    flavor = next(c for c in diff.resources if c.resource.endswith("::h100-sxm-80gb"))
    assert [c.key for c in flavor.keys if c.key.startswith("metadata")] == ["metadata.name"]
    text = render(diff)
    assert "± kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor::h100-sxm-80gb (replaced: the new object" in text
