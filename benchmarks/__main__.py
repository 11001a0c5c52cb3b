"""`python -m benchmarks [--sizes 10,100,1000]`: figures measured in one run, as a table."""

from __future__ import annotations

import argparse
import sys

from .plan_speed import time_plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--sizes", default="10,100,1000", help="fleet sizes for the plan-time figure")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
