"""`python -m benchmarks [--sizes 10,100,1000] [--stacks generated,onprem]`: figures measured in one run, as tables."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .footprint import PlanMeasure, connections_table, measure, parallel_table, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--sizes", default="10,100,1000", help="fleet sizes for the plan figures")
    parser.add_argument("--stacks", default="generated,onprem", help="generated, onprem (the example scaled up)")
    parser.add_argument("--project", type=Path, help="plan another checkout of this project (a before/after)")
    parser.add_argument("--no-fleet", action="store_true", help="skip the SSH fleet figures (they need root)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    print("## Plan and stored state vs fleet size (offline plan, fresh process each)\n")
    print(table([]), flush=True)
    rows: list[tuple[str, PlanMeasure]] = []
    for stack in args.stacks.split(","):
        for size in sizes:
            rows.append((stack, measure(stack, size, *([args.project] if args.project else []))))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    for stack in args.stacks.split(","):
        by_size = {m.footprint.nodes: m for s, m in rows if s == stack}
        if 100 in by_size and 1000 in by_size:
            ratio = by_size[1000].cpu_seconds / by_size[100].cpu_seconds
            print(f"\n{stack}: plan CPU time(1000)/time(100) = {ratio:.1f} (linear would be about 10)")
    print("\n## SSH connections held at the end of a first `up` (one per SSH resource, until the run ends)\n")
    print(connections_table(rows))
    print("\n## First `up` vs --parallel (model: prepare 60 s, init 60 s, join 30 s per node)\n")
    print(parallel_table(sizes))
    if not args.no_fleet:
        print_fleet_figures()
    return 0


def print_fleet_figures() -> None:
    from .bootstrap import LATENCIES, SCALE, all_figures

    print(f"\n## Bootstrap on the SSH fleet (stub latencies = real durations / {SCALE}: {LATENCIES})")
    print(
        "| run | wall s | critical path s (longest host) | steps | steps that changed |"
        " SSH sessions per step | peak sessions per host |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = all_figures()
    for row in rows:
        print(
            f"| {row.label} | {row.wall_seconds:.1f} | {row.critical_path_seconds:.1f} | {row.steps} |"
            f" {row.changed_steps} | {row.sessions_per_step_max} | {row.peak_sessions_per_host} |"
        )
    by_label = {row.label: row for row in rows}
    one = by_label["1 CP + 1 workers"].wall_seconds
    many = by_label["1 CP + 16 workers"].wall_seconds
    rerun = by_label["1 CP + 16 workers (re-run)"].wall_seconds
    naive = by_label["1 CP + 16 workers, one step at a time"].wall_seconds
    print(f"\n1 CP + 16 workers vs 1 CP + 1 worker: {many / one:.2f}x (workers join in parallel)")
    print(f"no-op re-run vs first run: {rerun / many:.2f}x")
    print(f"one step at a time vs mlcluster: {naive / many:.1f}x slower")


if __name__ == "__main__":
    sys.exit(main())
