"""`python -m components.plan`: files written, exit codes, and no secret anywhere in the output."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import PROJECT

SECRET_MARK = "mlcluster-plan-test-secret-value"


def plan(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m components.plan` as a user runs it: its own process, so what it prints is all a user sees."""
    return subprocess.run(
        [sys.executable, "-m", "components.plan", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def plan_here(*args: str) -> subprocess.CompletedProcess[str]:
    """The same CLI run in this process, for tests that read what the plan says rather than how the process
    ends (a process costs a second of imports). An argparse refusal's exit code is returned as the process's."""
    from components.plan.__main__ import main

    printed, said = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(said):
        try:
            code = main(list(args))
        except SystemExit as stopped:
            code = stopped.code if isinstance(stopped.code, int) else 1
    return subprocess.CompletedProcess(["components.plan", *args], code, printed.getvalue(), said.getvalue())


def test_onprem_plan_writes_review_files(tmp_path: Path) -> None:
    started = time.perf_counter()
    result = plan("--stack", "onprem", "--out", str(tmp_path))
    elapsed = time.perf_counter() - started
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "plan.json").read_text())
    assert document["project"] == "mlcluster" and document["stack"] == "onprem"
    assert set(document["resources"][0]) >= {"type", "name", "parent", "dependsOn", "inputs", "options"}
    options = document["resources"][0]["options"]
    assert set(options) >= {
        "protect",
        "additionalSecretOutputs",
        "deleteBeforeReplace",
        "ignoreChanges",
        "replaceOnChanges",
        "customTimeouts",
    }
    assert document["outputs"]["kubeconfig"] == "[secret]"
    scripts = sorted(p.name for p in (tmp_path / "nodes" / "cp-1").iterdir())
    assert scripts[:9] == [
        "01-cp-1-gpu-preflight.sh",
        "02-cp-1-os.sh",
        "03-cp-1-swap.sh",
        "04-cp-1-kernel-modules.sh",
        "05-cp-1-sysctl.sh",
        "06-cp-1-containerd.sh",
        "07-cp-1-kube-packages.sh",
        "08-cp-1-kubelet-tuning.sh",
        "09-cp-1-kubeadm-init.sh",
    ]
    (reset,) = (tmp_path / "nodes" / "gpu-1").glob("*-gpu-1-kubeadm-join.on-delete.sh")
    # Each node's file is what the node gets (its settings, the files it sources); each shared text is written once.
    (sources,) = [line for line in reset.read_text().splitlines() if line.startswith("# sources, from this plan")]
    shared = [tmp_path / name.strip() for name in sources.split(":", 1)[1].split(",")]
    assert "NODE_NAME=gpu-1" in reset.read_text() and any("kubeadm reset" in f.read_text() for f in shared)
    init = list(yaml.safe_load_all((tmp_path / "configs" / "kubeadm-init.v1beta4.cp-1.yaml").read_text()))
    assert [d["kind"] for d in init] == ["InitConfiguration", "ClusterConfiguration", "KubeletConfiguration"]
    values = yaml.safe_load((tmp_path / "releases" / "gpu-operator.values.yaml").read_text())
    # driver.enabled waits on the GPU preflight's output (driver: auto): unknown until the commands ran.
    assert values["driver"]["enabled"] == "[computed]"
    assert "cp-1" in result.stdout and "gpu-operator" in result.stdout and "resources" in result.stdout
    assert elapsed < 30


def test_plan_is_the_same_every_run(tmp_path: Path) -> None:
    """Same stack, same moment (the program's clock writes the join credentials' mint window): same files."""
    first, second = tmp_path / "a", tmp_path / "b"
    at = ("--at", "2026-12-03T04:59:59Z")
    assert plan("--stack", "onprem", "--out", str(first), *at).returncode == 0
    assert plan("--stack", "onprem", "--out", str(second), *at).returncode == 0
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for relative in files:
        assert (first / relative).read_text() == (second / relative).read_text(), relative


def test_no_secret_is_written(tmp_path: Path) -> None:
    stack = yaml.safe_load((PROJECT / "stacks" / "Pulumi.onprem.yaml").read_text())
    stack_file = tmp_path / "Pulumi.secrettest.yaml"
    stack_file.write_text(yaml.safe_dump(stack))
    out = tmp_path / "out"
    # Offline, encrypted values read as a placeholder; make sure that placeholder never lands in a file.
    from components.config.load import SECRET_PLACEHOLDER

    result = plan("--stack-file", str(stack_file), "--out", str(out))
    assert result.returncode == 0, result.stderr
    written = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert SECRET_PLACEHOLDER not in written
    assert SECRET_PLACEHOLDER not in result.stdout + result.stderr


def test_invalid_config_exits_2_with_the_report(tmp_path: Path) -> None:
    stack = yaml.safe_load((PROJECT / "stacks" / "Pulumi.onprem.yaml").read_text())
    stack["config"]["mlcluster:nodes"][3]["host"] = "10.0.0.300"
    stack["config"]["mlcluster:kubelet"]["imageGCLowThresholdPercent"] = 85
    stack["config"]["mlcluster:ssh"]["privateKey"] = SECRET_MARK
    stack_file = tmp_path / "Pulumi.bad.yaml"
    stack_file.write_text(yaml.safe_dump(stack))
    result = plan("--stack-file", str(stack_file), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert 'mlcluster:nodes[3].host: "10.0.0.300" is not an IP address or DNS name' in result.stderr
    assert "mlcluster:kubelet.imageGCLowThresholdPercent: (85) must be lower than" in result.stderr
    assert "mlcluster:ssh.privateKey: must be set as a secret" in result.stderr
    assert "Traceback" not in result.stderr and SECRET_MARK not in result.stderr
    assert not (tmp_path / "out").exists()


def test_cloud_plan(tmp_path: Path) -> None:
    result = plan("--stack", "cloud", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "plan.json").read_text())
    types = {r["type"] for r in document["resources"]}
    assert "command:remote:Command" not in types
    assert not (tmp_path / "nodes").exists()


def test_the_platform_half_of_a_two_stack_split_plans_without_the_other_stack(tmp_path: Path) -> None:
    """Its kubeconfig comes from the nodes' stack, which an offline plan cannot read: unknown, not a traceback."""
    result = plan("--stack", "platform", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "note: stack acme/mlcluster-nodes/onprem (a StackReference) cannot be read offline" in result.stderr
    document = json.loads((tmp_path / "plan.json").read_text())
    [provider] = [r for r in document["resources"] if r["type"] == "pulumi:providers:kubernetes"]
    assert provider["inputs"]["kubeconfig"] == "[secret]"
    assert sum(r["type"] == "kubernetes:helm.sh/v3:Release" for r in document["resources"]) > 5


def test_the_one_machine_lab_example_plans_as_control_plane_and_gpu_worker(tmp_path: Path) -> None:
    result = plan("--stack", "lab", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "plan.json").read_text())
    assert list(document["placement"]) == ["lab-1"]
    steps = [r["name"] for r in document["resources"] if r["type"] == "command:remote:Command"]
    assert "lab-1-kubeadm-init" in steps and "lab-1-gpu-preflight" in steps
    assert not [s for s in steps if s.endswith("kubeadm-join")], "the only machine initialises, it joins nothing"
    init = list(yaml.safe_load_all((tmp_path / "configs" / "kubeadm-init.v1beta4.lab-1.yaml").read_text()))
    taints = init[0]["nodeRegistration"].get("taints") or []
    # Control plane and worker on one machine: no control-plane NoSchedule taint, or nothing would run on it.
    assert not [t for t in taints if t["key"] == "node-role.kubernetes.io/control-plane"], taints


def test_the_plan_reports_certificate_days_from_the_deployed_stacks_outputs(tmp_path: Path) -> None:
    first = plan_here("--stack", "lab", "--out", str(tmp_path / "first"))
    assert first.returncode == 0, first.stderr
    assert "info: certificates: no record yet" in first.stderr
    soon = (datetime.now(UTC) + timedelta(days=20, hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"certificates": {"renewBefore": "", "notAfter": {"lab-1": {"apiserver": soon}}}}))
    due = plan_here("--stack", "lab", "--out", str(tmp_path / "due"), "--stack-outputs", str(outputs))
    assert due.returncode == 0, due.stderr
    warning = "mlcluster:certificates.renewBeforeDays: 20 days left: apiserver on lab-1"
    assert f"warning: {warning}" in due.stderr
    document = json.loads((tmp_path / "due" / "plan.json").read_text())
    assert [w for w in document["warnings"] if w.startswith(warning)], document["warnings"]
    steps = {r["name"]: r for r in document["resources"]}
    # The step names the renewal date (a UTC midnight), so `up` runs it.
    assert re.search(r"RENEW_BEFORE=\d{4}-\d\d-\d\dT00:00:00Z\n", steps["lab-1-certificates"]["inputs"]["create"])
    # Planned at a later moment (--at), the same record gives the days left then: not due today, due in 180 days.
    later = (datetime.now(UTC) + timedelta(days=200, hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    outputs.write_text(json.dumps({"certificates": {"renewBefore": "", "notAfter": {"lab-1": {"apiserver": later}}}}))
    today = plan_here("--stack", "lab", "--out", str(tmp_path / "today"), "--stack-outputs", str(outputs))
    assert today.returncode == 0 and "info: certificates: 200 days left" in today.stderr, today.stderr
    then = (datetime.now(UTC) + timedelta(days=180)).strftime("%Y-%m-%dT%H:%MZ")
    ahead = plan_here("--stack", "lab", "--out", str(tmp_path / "ahead"), "--stack-outputs", str(outputs), "--at", then)
    assert "warning: mlcluster:certificates.renewBeforeDays: 20 days left: apiserver on lab-1" in ahead.stderr
    assert json.loads((tmp_path / "ahead" / "plan.json").read_text())["at"].startswith(then[:16])
    outputs.write_text("not json")
    broken = plan_here("--stack", "lab", "--out", str(tmp_path / "broken"), "--stack-outputs", str(outputs))
    assert broken.returncode == 2 and "--stack-outputs" in broken.stderr


WRONG_SHAPES = [
    # Each was read as "no record yet" before: a renewal due in 20 days went unsaid.
    ('[{"certificates": {}}]', "is list, not an object of outputs"),
    ('{"certificates": {"lab-1": {"apiserver": "2027-01-01T00:00:00Z"}}}', "output 'certificates' is not what"),
    ('{"joinCredentials": "2026-12-03"}', "output 'joinCredentials' is not what"),
    ('{"kubernetesVersion": "v1.34"}', "output 'kubernetesVersion' is not what"),
]


def test_stack_outputs_of_a_wrong_shape_are_an_error_that_says_the_format(tmp_path: Path) -> None:
    from components.plan.__main__ import stack_outputs_problems

    for text, expected in WRONG_SHAPES:
        problems = stack_outputs_problems(json.loads(text))
        assert len(problems) == 1 and problems[0].startswith(expected), (text, problems)
        assert '"notAfter": {node: {certificate: date}}' in problems[0]
    # What the program exports passes, and outputs it does not read are left alone.
    exported = {
        "kubeconfig": "[secret]",
        "certificates": {"renewBefore": "", "notAfter": {"lab-1": {"apiserver": "2027-01-01T00:00:00Z"}}},
        "joinCredentials": {"mintedFor": "2026-12-03", "nodes": []},
        "kubernetesVersion": "1.34.2",
    }
    assert stack_outputs_problems(exported) == []
    outputs = tmp_path / "outputs.json"
    outputs.write_text(WRONG_SHAPES[1][0])
    refused = plan("--stack", "lab", "--out", str(tmp_path / "plan"), "--stack-outputs", str(outputs))
    assert refused.returncode == 2 and "output 'certificates' is not what this program exports" in refused.stderr


@pytest.mark.parametrize(
    ("outputs", "said"),
    [
        ({"kubernetesVersion": "1.33.4"}, "error: mlcluster:kubernetesVersion: 1.35.8 skips a minor"),
        (
            {"kubernetesVersion": "1.35.8", "controlPlanes": ["cp-2", "cp-1", "cp-3"]},
            "error: mlcluster:nodes: cp-1 is now the first control plane, but cp-2 ran kubeadm init",
        ),
    ],
    ids=["skip-minor", "reordered-control-planes"],
)
def test_a_refusal_from_the_deployed_outputs_is_one_line_and_exit_2(tmp_path: Path, outputs, said) -> None:
    """The refusal is raised where the program reads the last deployment's outputs, so every output computed from
    them fails too; the process says it once, without the tracebacks of those futures (a real process: they are
    logged when it collects them)."""
    recorded = tmp_path / "outputs.json"
    recorded.write_text(json.dumps(outputs))
    result = plan("--stack", "onprem", "--out", str(tmp_path / "plan"), "--stack-outputs", str(recorded))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("planning stack onprem") and len(lines) == 2, result.stderr[:3000]
    assert lines[1].startswith(said) and "Traceback" not in result.stderr


def test_the_outputs_the_plan_takes_are_those_the_program_reads(run_stack, monkeypatch) -> None:
    """OUTPUTS_READ (and so --stack-outputs' help and docs/cluster-care.md's fact) is what the program asks its own
    stack's last deployment for, with acceptance on so that every reader runs."""
    import pulumi

    from components.plan.__main__ import OUTPUTS_READ

    asked: set[str] = set()
    original = pulumi.StackReference.get_output

    def recording(self: pulumi.StackReference, name: Any) -> Any:
        asked.add(str(name))
        return original(self, name)

    monkeypatch.setattr(pulumi.StackReference, "get_output", recording)
    from .conftest import stack_values

    values, secret = stack_values("onprem")
    values = {**values, "acceptance": {"enabled": True}}
    run_stack(values=values, secret=secret)
    assert asked == set(OUTPUTS_READ)
