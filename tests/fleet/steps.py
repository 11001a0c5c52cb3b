"""Node steps inside the commands that ran: a node's preparation is one command (`<node>-prepare`) whose
output is announced step by step; these read one step's output out of it, for tests and benchmarks."""

from __future__ import annotations

from components.render.node_steps import PREPARE_STEP
from components.render.shell import split_output

from .engine import FleetRun, StepRun


def step_outputs(step: StepRun) -> dict[str, str]:
    """Output of each node step a command ran: one entry for a plain step, one per part for a merged one."""
    stdout = step.stdout or ""
    return split_output(stdout) or {step.step: stdout}


def prepared(run: FleetRun, node: str) -> StepRun:
    return run.step(f"{node}-{PREPARE_STEP}")


def step_output(run: FleetRun, node: str, step: str) -> str:
    """What `step` printed on `node` in this run (a preparation step, read from inside the prepare command)."""
    outputs = step_outputs(prepared(run, node))
    assert step in outputs, f"{node}: no step {step} in its prepare command (ran: {sorted(outputs)})"
    return outputs[step]
