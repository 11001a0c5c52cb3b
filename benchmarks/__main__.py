"""`python -m benchmarks [--sizes 10,100,1000]`: figures measured in one run, as a table."""

from __future__ import annotations

import argparse
import sys

from .plan_speed import time_plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--sizes", default="10,100,1000", help="fleet sizes for the plan-time figure")
    parser.add_argument("--no-fleet", action="store_true", help="skip the SSH fleet figures (they need root)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    print("## Plan time vs fleet size (offline plan, fresh process each)")
    print("| nodes | resources | seconds | ms per resource |")
    print("|---:|---:|---:|---:|")
    timings = {}
    for size in sizes:
        timing = time_plan(size)
        timings[size] = timing
        per = 1000 * timing.seconds / timing.resources
        print(f"| {size} | {timing.resources} | {timing.seconds:.2f} | {per:.2f} |", flush=True)
    if 100 in timings and 1000 in timings:
        ratio = timings[1000].seconds / timings[100].seconds
        print(f"\ntime(1000)/time(100) = {ratio:.1f} (linear would be about 10)")
    if not args.no_fleet:
        print_fleet_figures()
    return 0


def print_fleet_figures() -> None:
    from .bootstrap import LATENCIES, SCALE, all_figures

    print(f"\n## Bootstrap on the SSH fleet (stub latencies = real durations / {SCALE}: {LATENCIES})")
    print("| run | wall s | steps | steps that changed | SSH sessions per step | peak sessions per host |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = all_figures()
    for row in rows:
        print(
            f"| {row.label} | {row.wall_seconds:.1f} | {row.steps} | {row.changed_steps} |"
            f" {row.sessions_per_step_max} | {row.peak_sessions_per_host} |"
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
