"""Three stacks written as a newcomer writes them from the README alone (issue 35; tests/fixtures/newcomer/): 3
control planes and 8 Rocky GPU workers behind a bastion, an existing EKS cluster, a one-GPU lab with time-slicing.
Each plans offline as `make plan` does (the CLI, in a subprocess), prints each warning once with its key path, the
same list in plan.json, and passes the policy pack: what validation accepts, the review does not block."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import PROJECT

NEWCOMER = Path(__file__).parent / "fixtures" / "newcomer"
STACKS: dict[str, list[str]] = {
    # stack file -> the key paths of the warnings its plan prints, in order
    "rocky-bastion": ["mlcluster:ssh.bastion.maxStartups", "mlcluster:kserve.enabled"],
    "eks": ["mlcluster:monitoring.enabled"],
    "one-gpu-lab": ["mlcluster:kserve.enabled", "mlcluster:kubeflow.enabled"],
}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=PROJECT, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_a_newcomer_stack_plans_with_each_warning_once_and_passes_the_policy_pack(stack: str, tmp_path: Path) -> None:
    stack_file = NEWCOMER / f"Pulumi.{stack}.yaml"
    planned = cli("components.plan", "--stack-file", str(stack_file), "--out", str(tmp_path / "plan"))
    assert planned.returncode == 0, planned.stdout + planned.stderr
    said = (planned.stdout + planned.stderr).splitlines()
    printed = [line.removeprefix("warning: ") for line in said if line.startswith("warning: ")]
    recorded = json.loads((tmp_path / "plan" / "plan.json").read_text())["warnings"]
    assert printed == recorded, (printed, recorded)
    assert len(set(printed)) == len(printed), "a warning printed twice"
    assert [w.split(": ", 1)[0] for w in printed] == STACKS[stack], printed
    policies = cli("components.plan.policies", "--stack-file", str(stack_file))
    assert policies.returncode == 0, policies.stdout + policies.stderr
    verdicts = [line.split()[0] for line in policies.stdout.splitlines()[1:] if line.strip()]
    assert verdicts and set(verdicts) <= {"ok", "n/a"}, policies.stdout
    assert "ok   kueue-quotas-within-inventory" in policies.stdout


def test_the_lab_shares_its_one_gpu_four_ways_and_its_quota_is_the_four() -> None:
    """The issue's case: validation counts a time-sliced GPU as its replicas; the policy pack used to count the
    node's one GPU and block the stack ("nodes have 1")."""
    text = (NEWCOMER / "Pulumi.one-gpu-lab.yaml").read_text()
    assert "timeSlicingReplicas: 4" in text and 'nvidia.com/gpu: "4"' in text
