"""Plan time vs fleet size: the offline plan of generated stacks, each in a fresh process (as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from .stacks import generated_values

PROJECT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class PlanTiming:
    nodes: int
    resources: int
    seconds: float


def write_stack_file(nodes: int, folder: Path) -> Path:
    values = generated_values(nodes)
    config = {f"mlcluster:{k}": v for k, v in values.items()}
    # The key is a placeholder, but plans refuse plaintext keys: mark it as an encrypted value.
    config["mlcluster:ssh"]["privateKey"] = {"secure": "v1:benchmark-placeholder"}
    path = folder / f"Pulumi.bench{nodes}.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return path


def time_plan(nodes: int) -> PlanTiming:
    with tempfile.TemporaryDirectory() as folder:
        stack_file = write_stack_file(nodes, Path(folder))
        out = Path(folder) / "plan"
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "components.plan", "--stack-file", str(stack_file), "--out", str(out)],
            cwd=PROJECT,
            check=True,
            capture_output=True,
            timeout=600,
        )
        seconds = time.perf_counter() - started
        resources = len(json.loads((out / "plan.json").read_text())["resources"])
    return PlanTiming(nodes, resources, seconds)
