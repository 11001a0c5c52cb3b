"""Bootstrap on the SSH fleet with realistic, scaled-down latencies: critical path, no-op re-run, SSH sessions.

Needs root and network namespaces (the test fleet). Latencies are the real operations' typical durations
divided by SCALE, so the shape of the critical path is kept while a run takes seconds.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from tests.fleet import Fleet, FleetEngine, FleetRun, HostSpec  # noqa: E402
from tests.fleet.measure import peak_concurrent_sessions  # noqa: E402

SCALE = 10
REAL_SECONDS = {
    # Typical durations on a real node (seconds), longest matching command prefix wins.
    "apt-get update": 10,
    "apt-get install": 20,
    "dnf makecache": 10,
    "dnf install": 20,
    "kubeadm init": 60,
    "kubeadm join": 30,
    "kubeadm token": 1,
    "kubeadm reset": 10,
    "systemctl restart": 2,
    "systemctl enable": 1,
    "curl": 1,
}
LATENCIES = {operation: seconds / SCALE for operation, seconds in REAL_SECONDS.items()}


@dataclass
class BootstrapFigures:
    label: str
    control_planes: int
    workers: int
    wall_seconds: float
    steps: int
    changed_steps: int
    sessions_per_step_max: int
    peak_sessions_per_host: int


def _changed(run: FleetRun) -> int:
    return sum(1 for s in run.steps if s.stdout and any(line.startswith("changed:") for line in s.stdout.splitlines()))


def bootstrap(
    control_planes: int, workers: int, *, second_run: bool = False, workers_parallel: int = 64, label: str = ""
) -> list[BootstrapFigures]:
    names = [f"cp-{i + 1}" for i in range(control_planes)] + [f"w-{i + 1}" for i in range(workers)]
    specs = [HostSpec(name) for name in names]
    figures = []
    with Fleet.running(specs) as fleet:
        for name in names:
            fleet[name].set(latencies=LATENCIES)
        nodes = [fleet[n].node("control-plane" if n.startswith("cp-") else "worker") for n in names]
        sections: dict[str, Any] = {}
        if control_planes > 1:
            sections["cluster"] = {"controlPlaneEndpoint": f"{fleet[names[0]].address}:6443"}
        values, secret = fleet.stack_values(nodes, **sections)
        engine = FleetEngine(max_workers=workers_parallel)
        try:
            runs = [engine.up(values, secret)]
            if second_run:
                runs.append(engine.up(values, secret))
        finally:
            engine.close()
        for index, run in enumerate(runs):
            run.raise_error()
            # SSH sessions of this run per (host, step): the engine runs only what changed, so a no-op re-run
            # opens none.
            per_run = max(Counter((s.host, s.step) for s in run.steps).values(), default=0)
            figures.append(
                BootstrapFigures(
                    label=(label or f"{control_planes} CP + {workers} workers") + (" (re-run)" if index else ""),
                    control_planes=control_planes,
                    workers=workers,
                    wall_seconds=run.wall_seconds,
                    steps=len(run.steps),
                    changed_steps=_changed(run),
                    sessions_per_step_max=int(per_run),
                    peak_sessions_per_host=max(peak_concurrent_sessions(h) for h in fleet.hosts.values()),
                )
            )
    return figures


def all_figures() -> list[BootstrapFigures]:
    return [
        *bootstrap(1, 1),
        *bootstrap(1, 16, second_run=True),
        *bootstrap(3, 16),
        # The obvious alternative: the same steps over the same plain ssh client, one at a time (a shell
        # loop over the hosts, or Ansible with forks=1).
        *bootstrap(1, 16, workers_parallel=1, label="1 CP + 16 workers, one step at a time"),
    ]
