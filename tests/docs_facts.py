"""Numbers and claims the docs state about the code, generated from the code so that they cannot drift.

A fact sits inline in Markdown as `<!-- fact:NAME -->value<!-- /fact -->` (invisible when rendered):

    python -m tests.docs_facts --write      # (make docs) rewrite every fact in README.md and docs/*.md
    python -m tests.docs_facts              # exit 1 and name each stale fact

tests/test_docs.py fails on a stale or unknown fact. A measured figure (docs/benchmarks.md's tables) is not
generated here; where another page repeats one, the fact is read from that table, so the two agree.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

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


def benchmark_table(header: str) -> list[dict[str, str]]:
    """The rows (by column header, as written) of the docs/benchmarks.md table that has a column `header`."""
    lines = BENCHMARKS.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and header in _cells(line):
            headers = _cells(line)
            rows: list[dict[str, str]] = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(headers, _cells(row), strict=True)))
            return rows
    raise LookupError(f"{BENCHMARKS.name} has no table with a column {header!r}")


def benchmark_table_column(header: str) -> list[str]:
    """One column of the docs/benchmarks.md table that has it, as written."""
    return [row[header] for row in benchmark_table(header)]


def leading_number(cell: str) -> float:
    """A table cell's own figure: `26.3 (26.1)` (the previous release's in brackets) is 26.3, `**0**` is 0."""
    return float(cell.split(maxsplit=1)[0].strip("*"))


def fleet_wall_seconds(run: str) -> Callable[[], str]:
    """A bootstrap benchmark's wall time, rounded as prose states it, from docs/benchmarks.md's table."""

    def wall() -> str:
        rows = dict(zip(benchmark_table_column("run"), benchmark_table_column("wall s"), strict=True))
        return str(round(leading_number(rows[run])))

    return wall


BASTION = "on a bastion (all nodes behind it)"


def bastion_connections(stack: str, nodes: str) -> Callable[[], str]:
    """The connections a bastion holds at the end of a first `up` (the model), from docs/benchmarks.md's table."""

    def held() -> str:
        (row,) = [r for r in benchmark_table(BASTION) if (r["stack"], r["nodes"]) == (stack, nodes)]
        return row[BASTION]

    return held


MEASURED = "SSH fleet, platform layers off (measured)"
"""The connections table's row measured on the SSH fleet (tests/fleet/test_connections.py), beside the model's."""


def measured_connections(column: str) -> Callable[[], str]:
    """A figure of the measured row: per worker, on cp-1, on the bastion (the cell's number)."""

    def figure() -> str:
        (row,) = [r for r in benchmark_table(BASTION) if r["stack"] == MEASURED]
        return row[column].rsplit(": ", 1)[-1]

    return figure


def busiest_node_connections() -> str:
    """The first control plane's connections in the model, the same at every size (docs/benchmarks.md's table)."""
    modelled = [r["busiest node"] for r in benchmark_table(BASTION) if r["stack"] != MEASURED]
    found = {cell.split(": ", 1)[1] for cell in modelled}
    if len(found) != 1:
        raise ValueError(f"the busiest node's connections differ by size: {sorted(found)}")
    return found.pop()


DIALS = "peak dials in flight to the bastion"


def peak_dials(lanes: str) -> Callable[[], str]:
    """The most dials in flight to the fleet's bastion in docs/benchmarks.md's "Dials in flight at once" table,
    with the dial lanes `on` or `off`."""

    def figure() -> str:
        (row,) = [r for r in benchmark_table(DIALS) if r["dial lanes"].startswith(lanes)]
        return str(int(leading_number(row[DIALS])))

    return figure


def peak_sessions_per_host() -> str:
    return str(max(int(leading_number(v)) for v in benchmark_table_column("peak sessions per host")))


PLAN_MOMENT = "2026-12-03T04:59:30Z"
"""Both plans of an example are made for one moment: the join credentials' mint window follows the clock."""


def _onprem_nodes(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["name"]: node for node in config["mlcluster:nodes"]}


def _placement_change(config: dict[str, Any]) -> None:
    nodes = _onprem_nodes(config)
    nodes["gpu-1"]["host"] = "10.20.0.131"
    nodes["gpu-2"]["user"] = "deploy"


def _gc_chart_label_change(config: dict[str, Any]) -> None:
    config["mlcluster:kubelet"]["imageGCLowThresholdPercent"] = 65
    config["mlcluster:gpuOperator"]["version"] = "v26.7.1"
    _onprem_nodes(config)["gpu-2"]["labels"]["team"] = "vision"


def _label_taint_change(config: dict[str, Any]) -> None:
    gpu = _onprem_nodes(config)["gpu-2"]
    gpu["labels"] = {"team": "vision"}
    gpu["taints"] = ["team=vision:NoSchedule"]


PLAN_EXAMPLES: dict[str, Callable[[dict[str, Any]], None]] = {
    "plan-example-placement": _placement_change,
    "plan-example-gc-chart-label": _gc_chart_label_change,
    "plan-example-label-taint": _label_taint_change,
}
"""Edits of stacks/Pulumi.onprem.yaml whose plan comparison the docs show (`make plan` then `--compare`)."""


def _plan(stack_file: Path, out: Path, *extra: str) -> str:
    """What `python -m components.plan` prints, run in this process (a process each cost a second of imports)."""
    from components.plan.__main__ import main as plan_main

    printed, said = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(said):
        code = plan_main(["--stack-file", str(stack_file), "--out", str(out), "--at", PLAN_MOMENT, *extra])
    assert code == 0, f"the plan of {stack_file.name} exited {code}: {said.getvalue()[-2000:]}"
    return printed.getvalue()


def _step_lines(block: list[str]) -> list[str]:
    """A node's block as its steps and why they change, without the script lines that differ per node."""
    return [line for line in block[1:] if line.startswith(("    ~ ", "    + ", "    - "))]


def folded(report: str) -> str:
    """In the nodes section, a node whose steps and reasons are those of the node shown before it is named on one
    line instead of repeated (a GC change re-runs the same two steps on every node)."""
    out: list[str] = []
    lines = report.splitlines()
    in_nodes, index = False, 0
    shown: list[str] = []
    same: list[str] = []

    def flush() -> None:
        if same:
            out.append(f"  {', '.join(same)}: the same steps as {shown[0].strip()}")
            same.clear()

    while index < len(lines):
        line = lines[index]
        if not line.startswith(" "):
            flush()
            in_nodes = in_nodes if not line else line.startswith("nodes (")
        if not (in_nodes and line.startswith("  ") and not line.startswith("   ")):
            out.append(line)
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].startswith("    "):
            end += 1
        block = lines[index:end]
        if shown and _step_lines(block) == _step_lines(shown):
            same.append(line.strip())
        else:
            flush()
            shown = block
            out.extend(block)
        index = end
    flush()
    return "\n".join(out)


@cache
def plan_examples() -> dict[str, str]:
    """Each example's `--compare` report as `make plan` prints it, from "changes since" to the summary."""
    import tempfile

    import yaml

    reports = {}
    with tempfile.TemporaryDirectory(prefix="mlcluster-docs-") as scratch:
        folder = Path(scratch)
        base = PROJECT / "stacks" / "Pulumi.onprem.yaml"
        _plan(base, folder / "old")
        for name, change in PLAN_EXAMPLES.items():
            stack = yaml.safe_load(base.read_text())
            change(stack["config"])
            stack_file = folder / f"Pulumi.{name}.yaml"
            stack_file.write_text(yaml.safe_dump(stack, sort_keys=False))
            printed = _plan(stack_file, folder / name, "--compare", str(folder / "old"))
            report = printed[printed.index("changes since ") :]
            report = report[: report.index("\n", report.index("\nsummary: ") + 1)]
            report = report.replace(f"changes since {folder / 'old'}:", "changes since build/onprem:")
            reports[name] = f"\n```text\n{folded(report.rstrip())}\n```\n"
    return reports


def plan_example(name: str) -> Callable[[], str]:
    return lambda: plan_examples()[name]


def outputs_read() -> str:
    from components.plan.__main__ import OUTPUTS_READ

    names = [f"`{name}`" for name in OUTPUTS_READ]
    return ", ".join(names[:-1]) + f" and {names[-1]}"


def onprem_held_out_warning() -> str:
    """What the on-prem example's Kueue inventory warns about the GPUs that serving holds outside the queues."""
    from components.config.load import spec_from_values
    from components.config.rules import kueue_inventory
    from components.config.schema import Problems

    from .conftest import stack_values

    values, secret = stack_values("onprem")
    problems = Problems()
    kueue_inventory(spec_from_values(values, lambda key: key in secret), problems)
    (held,) = [str(w) for w in problems.warnings if "held outside Kueue" in w.message]
    return held


FACTS: dict[str, Callable[[], str]] = {
    "stack-outputs-read": outputs_read,
    "kueue-onprem-held-out": onprem_held_out_warning,
    "suite-tests": lambda: str(len(collected_tests())),
    "fleet-tests": lambda: str(sum(1 for t in collected_tests() if t.startswith("tests/fleet/"))),
    "render-tests": lambda: str(len(collected_tests("render"))),
    "etcd-tests": lambda: str(len(collected_tests("etcd"))),
    "quick-tests": lambda: str(quick_tests()),
    "gpu-taint-providers": gpu_taint_providers,
    "peak-sessions-per-host": peak_sessions_per_host,
    "fleet-wall-1-1": fleet_wall_seconds("1 CP + 1 worker"),
    "fleet-wall-1-16": fleet_wall_seconds("1 CP + 16 workers"),
    **{name: plan_example(name) for name in PLAN_EXAMPLES},
    "connections-busiest-node": busiest_node_connections,
    "connections-measured-worker": measured_connections("per worker (typical)"),
    "connections-measured-first-control-plane": measured_connections("busiest node"),
    "connections-measured-bastion": measured_connections(BASTION),
    "connections-bastion-generated-100": bastion_connections("generated", "100"),
    "connections-bastion-generated-1000": bastion_connections("generated", "1,000"),
    "connections-bastion-onprem-100": bastion_connections("on-prem example", "100"),
    "connections-bastion-onprem-1000": bastion_connections("on-prem example", "1,000"),
    "dials-peak-lanes": peak_dials("on"),
    "dials-peak-no-lanes": peak_dials("off"),
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
