"""The review's first screen (components/plan/review.py): what an `up` does, for the five changes a reviewer meets
most (a first up, a GPU node added, a minor upgrade, a node removed, the SSH key rotated), in the terminal, REVIEW.md
and plan.json; and each distinct script text once in the plan folder."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config.formats import private_key_fingerprint
from components.plan.review import standing_kind

from .conftest import PROJECT
from .test_plan_cli import plan_here

AT = ("--at", "2026-12-05T12:00:00Z")
WORKERS = ["cpu-1", "cpu-2", "gpu-1", "gpu-2", "gpu-3", "gpu-4"]


def _stack(tmp_path: Path, name: str, change: Any = None) -> Path:
    document = yaml.safe_load((PROJECT / "stacks" / "Pulumi.onprem.yaml").read_text())
    if change is not None:
        change(document["config"])
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _outputs(tmp_path: Path, version: str) -> Path:
    path = tmp_path / f"outputs-{version}.json"
    recorded = {"kubernetesVersion": version, "controlPlanes": ["cp-1", "cp-2", "cp-3"], "workers": WORKERS}
    path.write_text(json.dumps(recorded))
    return path


def _first_screen(stdout: str) -> list[str]:
    return stdout[: stdout.index("\neverything planned")].splitlines()


def _plan(tmp_path: Path, name: str, *extra: str) -> list[str]:
    result = plan_here(
        "--stack-file", str(tmp_path / f"Pulumi.{name}.yaml"), "--out", str(tmp_path / name), *extra, *AT
    )
    assert result.returncode == 0, result.stderr
    screen = _first_screen(result.stdout)
    # The same screen in REVIEW.md and plan.json.
    assert (tmp_path / name / "REVIEW.md").read_text() == "\n".join(["```text", *screen, "```"]) + "\n"
    assert json.loads((tmp_path / name / "plan.json").read_text())["review"] == screen
    return screen


@pytest.fixture
def base(tmp_path: Path) -> Path:
    _stack(tmp_path, "base")
    _plan(tmp_path, "base")
    return tmp_path


def test_a_first_up_lists_the_work_per_node_and_counts_the_standing_steps(tmp_path: Path) -> None:
    _stack(tmp_path, "base")
    screen = _plan(tmp_path, "base")
    assert screen[0].startswith("What `up` does: stack base")
    assert "planned as a first up" in screen[2]
    (nodes,) = [line for line in screen if line.startswith("nodes: 9, ")]
    assert "standing steps only check on this up (removal 8, restart 9, upgrade 32)" in nodes
    (cp1,) = [line for line in screen if line.startswith("  cp-1 ")]
    assert "kubeadm-init" in cp1 and "acceptance" in cp1 and "upgrade-drain" not in cp1.split("[")[0]
    assert "  tests gpu-1: new node: never tested" in screen
    assert any(line.startswith("warnings (1)") for line in screen)
    assert len(screen) <= 40, len(screen)


def test_adding_a_gpu_node(base: Path) -> None:
    def add(config: dict[str, Any]) -> None:
        gpu = copy.deepcopy(next(n for n in config["mlcluster:nodes"] if n["name"] == "gpu-4"))
        config["mlcluster:nodes"].append({**gpu, "name": "gpu-5", "host": "10.20.0.35"})

    _stack(base, "added", add)
    screen = _plan(base, "added", "--compare", str(base / "base"), "--stack-outputs", str(_outputs(base, "1.35.8")))
    text = "\n".join(screen)
    assert "  gpu-5\n    + scripts, gpu-preflight, prepare, kubeadm-join, kubelet (5 steps) added" in text
    assert "~ acceptance               re-runs: tests 1 node(s): gpu-5 (new in the plan)" in text
    # The taint line of the node before it does not show as changed (its closing quote moved).
    assert "-gpu-4 taint" not in text and "+gpu-5 taint nvidia.com/gpu=present:NoSchedule" in text
    assert len(screen) <= 60, len(screen)


def test_a_minor_upgrade_groups_the_steps_that_change_alike(base: Path) -> None:
    _stack(base, "old", lambda c: c.__setitem__("mlcluster:kubernetesVersion", "1.34.11"))
    recorded = str(_outputs(base, "1.34.11"))
    _plan(base, "old", "--stack-outputs", recorded)
    _stack(base, "upgrade")
    screen = _plan(base, "upgrade", "--compare", str(base / "old"), "--stack-outputs", recorded)
    text = "\n".join(screen)
    assert "this up upgrades the cluster 1.34.11 -> 1.35.8" in text
    assert "  cpu-1, cpu-2, gpu-1, gpu-2, gpu-3, gpu-4 (the same on each of the 6)" in text
    assert "-TARGET_VERSION=1.34.11" in text and "+TARGET_VERSION=1.35.8" in text
    assert len(screen) <= 130, len(screen)


def test_removing_a_node_says_what_its_deletes_run_where(base: Path) -> None:
    _stack(
        base,
        "removed",
        lambda c: c.__setitem__("mlcluster:nodes", [n for n in c["mlcluster:nodes"] if n["name"] != "gpu-4"]),
    )
    screen = _plan(base, "removed", "--compare", str(base / "base"), "--stack-outputs", str(_outputs(base, "1.35.8")))
    text = "\n".join(screen)
    assert (
        "- kubeadm-join             removed: step removed:"
        " its on-delete script runs on gpu-4: kubeadm-reset (NODE_NAME=gpu-4)" in text
    )
    assert (
        "- gpu-4-drain-on-removal   removed: step removed:"
        " its on-delete script runs on cp-1: drain-node (NODE_NAME=gpu-4" in text
    )
    assert "no longer tests gpu-4" in text


def test_a_key_rotation_shows_on_every_step_that_connects(base: Path) -> None:
    _stack(base, "rotated", lambda c: c["mlcluster:ssh"].__setitem__("privateKey", {"secure": "v1:ROTATED-KEY"}))
    screen = _plan(base, "rotated", "--compare", str(base / "base"))
    text = "\n".join(screen)
    assert "secrets (their encrypted text in the stack file changed; nothing of a secret is shown)" in text
    assert "  ~ ssh.privateKey: " in text and "ROTATED" not in text
    assert "  gpu-1, gpu-2, gpu-3, gpu-4 (the same on each of the 4)" in text
    assert "re-runs: connection changed: ssh.privateKey rotated" in text
    assert "summary: 73 step(s) re-run and 9 replaced on 9 node(s)" in text
    assert len(screen) <= 30, len(screen)


def test_each_distinct_script_text_is_written_once(tmp_path: Path) -> None:
    _stack(tmp_path, "base")
    _plan(tmp_path, "base")
    out = tmp_path / "base"
    node_files = [p for p in (out / "nodes").rglob("*.sh") if ".by-content" not in p.parts]
    shared = sorted((out / "scripts").iterdir())
    # Node files carry settings and name what they source; the library's text is in scripts/ alone.
    library = next(p for p in shared if p.name.startswith("lib-")).read_text()
    assert not [p for p in node_files if library[:2000] in p.read_text()]
    assert sum(len(p.read_text().splitlines()) for p in node_files) < 10_000


def test_the_program_exports_the_connection_keys_fingerprint(tmp_path: Path) -> None:
    """A real preview shows a rotation as this output's change: the public key's fingerprint, never the key."""
    import subprocess

    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    printed = subprocess.run(["ssh-keygen", "-lf", f"{key}.pub"], check=True, capture_output=True, text=True)
    assert private_key_fingerprint(key.read_text()) == printed.stdout.split()[1]
    assert private_key_fingerprint("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----") is None


@pytest.mark.parametrize(
    ("step", "kind"),
    [
        ("upgrade-drain-gpu-1", "upgrade"),
        ("etcd-snapshot", "upgrade"),
        ("gpu-4-drain-on-removal", "removal"),
        ("kubelet-restart", "restart"),
        ("etcd-snapshot-timer", None),
        ("acceptance", None),
        ("kubeadm-join", None),
    ],
)
def test_standing_steps_are_those_that_only_check_on_a_first_up(step: str, kind: str | None) -> None:
    assert standing_kind(step) == kind
