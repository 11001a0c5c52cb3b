"""Numbers and claims the docs state about the code, generated from the code so that they cannot drift.

A fact sits inline in Markdown as `<!-- fact:NAME -->value<!-- /fact -->` (invisible when rendered):

    python -m tests.docs_facts --write      # (make docs) rewrite every fact in README.md and docs/*.md
    python -m tests.docs_facts              # exit 1 and name each stale fact

tests/test_docs.py fails on a stale or unknown fact. A measured figure (docs/benchmarks.md's tables) is not
generated here; where another page repeats one, the fact is read from that table, so the two agree.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

from components.config.providers import cluster_defaults

PROJECT = Path(__file__).resolve().parents[1]
FACT = re.compile(r"<!-- fact:(?P<name>[a-z0-9-]+) -->(?P<value>.*?)<!-- /fact -->", re.DOTALL)
PROVIDER_NAMES = {"gke": "GKE", "eks": "EKS", "aks": "AKS"}


# One collection in a fresh interpreter prints each test's node id and markers (nothing runs).
_COLLECT = """
import json, sys, pytest
class Report:
    def pytest_collection_finish(self, session):
        for item in session.items:
            print("collected " + json.dumps([item.nodeid, sorted({m.name for m in item.iter_markers()})]))
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"], plugins=[Report()]))
"""


@cache
def collected() -> dict[str, frozenset[str]]:
    """Every test the suite collects, by node id, with its markers."""
    result = subprocess.run(
        [sys.executable, "-c", _COLLECT], cwd=PROJECT, capture_output=True, text=True, timeout=300, check=True
    )
    lines = result.stdout.splitlines()
    found = (json.loads(line.removeprefix("collected ")) for line in lines if line.startswith("collected ["))
    return {node: frozenset(markers) for node, markers in found}


def collected_tests(*markers: str) -> tuple[str, ...]:
    """Node ids of the tests that carry every one of `markers` (all of them without)."""
    return tuple(node for node, marks in collected().items() if set(markers) <= marks)


def quick_tests() -> int:
    """What `make check` runs: no fleet, render or etcd marker."""
    return sum(1 for marks in collected().values() if not marks & {"fleet", "render", "etcd"})


def _listing(names: list[str]) -> str:
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names) or "none"


def gpu_taint_providers() -> str:
    """The managed providers whose GPU pools carry nvidia.com/gpu=present:NoSchedule (docs/cloud.md's table)."""
    return _listing([label for name, label in PROVIDER_NAMES.items() if cluster_defaults("existing", name).gpu_taint])


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


BENCHMARKS = PROJECT / "docs" / "benchmarks.md"


def benchmark_table_column(header: str) -> list[str]:
    """One column of the docs/benchmarks.md table that has it, as written."""
    lines = BENCHMARKS.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and header in _cells(line):
            column = _cells(line).index(header)
            rows: list[str] = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(_cells(row)[column])
            return rows
    raise LookupError(f"{BENCHMARKS.name} has no table with a column {header!r}")


def leading_number(cell: str) -> float:
    """A table cell's own figure: `26.3 (26.1)` (the previous release's in brackets) is 26.3, `**0**` is 0."""
    return float(cell.split(maxsplit=1)[0].strip("*"))


def fleet_wall_seconds(run: str) -> Callable[[], str]:
    """A bootstrap benchmark's wall time, rounded as prose states it, from docs/benchmarks.md's table."""

    def wall() -> str:
        rows = dict(zip(benchmark_table_column("run"), benchmark_table_column("wall s"), strict=True))
        return str(round(leading_number(rows[run])))

    return wall


def peak_sessions_per_host() -> str:
    return str(max(int(leading_number(v)) for v in benchmark_table_column("peak sessions per host")))


FACTS: dict[str, Callable[[], str]] = {
    "suite-tests": lambda: str(len(collected_tests())),
    "fleet-tests": lambda: str(sum(1 for t in collected_tests() if t.startswith("tests/fleet/"))),
    "render-tests": lambda: str(len(collected_tests("render"))),
    "etcd-tests": lambda: str(len(collected_tests("etcd"))),
    "quick-tests": lambda: str(quick_tests()),
    "gpu-taint-providers": gpu_taint_providers,
    "peak-sessions-per-host": peak_sessions_per_host,
    "fleet-wall-1-1": fleet_wall_seconds("1 CP + 1 worker"),
    "fleet-wall-1-16": fleet_wall_seconds("1 CP + 16 workers"),
}


def pages() -> list[Path]:
    return [PROJECT / "README.md", *sorted((PROJECT / "docs").glob("*.md"))]


def stated(text: str) -> Iterator[tuple[str, str]]:
    for match in FACT.finditer(text):
        yield match["name"], match["value"]


def problems(page: Path, facts: dict[str, Callable[[], str]] = FACTS) -> list[str]:
    """Each stale or unknown fact on a page, as `page: fact NAME says X, the code says Y`."""
    found = []
    for name, value in stated(page.read_text()):
        if name not in facts:
            found.append(f"{page.name}: unknown fact {name!r} (known: {', '.join(sorted(facts))})")
        elif value != (actual := facts[name]()):
            found.append(f"{page.name}: fact {name} says {value!r}, the code says {actual!r}")
    return found


def rewrite(text: str, facts: dict[str, Callable[[], str]] = FACTS) -> str:
    def current(match: re.Match[str]) -> str:
        name = match["name"]
        value = facts[name]() if name in facts else match["value"]
        return f"<!-- fact:{name} -->{value}<!-- /fact -->"

    return FACT.sub(current, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.docs_facts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the facts in place")
    args = parser.parse_args(argv)
    if args.write:
        for page in pages():
            text = page.read_text()
            if (new := rewrite(text)) != text:
                page.write_text(new)
                print(f"updated {page.relative_to(PROJECT)}")
        return 0
    found = [p for page in pages() for p in problems(page)]
    print("\n".join(found) or "every fact is current")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
