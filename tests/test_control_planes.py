"""The control planes the last `up` left are the ones the stack keeps, first first: the program refuses removing,
demoting or reordering them from the previous deployment's record, naming the key (components/render/control_planes.py).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.plan.__main__ import main as plan_main
from components.render.control_planes import OUTPUT, control_plane_change_problem, recorded_names

from .conftest import PROJECT, load_spec, stack_values

RECORDED = ["cp-1", "cp-2", "cp-3"]


def onprem(change: Any = None) -> Any:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    if change is not None:
        change(values["nodes"])
    return load_spec(values, secret)


def _swap(nodes: list[dict[str, Any]]) -> None:
    nodes[0], nodes[1] = nodes[1], nodes[0]


def _drop_first(nodes: list[dict[str, Any]]) -> None:
    del nodes[0]


def _demote_first(nodes: list[dict[str, Any]]) -> None:
    nodes[0]["roles"] = ["worker"]


def _demote_second(nodes: list[dict[str, Any]]) -> None:
    nodes[1]["roles"] = ["worker"]


def _drop_third(nodes: list[dict[str, Any]]) -> None:
    del nodes[2]


def _swap_others(nodes: list[dict[str, Any]]) -> None:
    nodes[1], nodes[2] = nodes[2], nodes[1]


CASES = [
    ("unchanged", None, None),
    ("the first two swapped", _swap, "mlcluster:nodes: cp-2 is now the first control plane, but cp-1 ran kubeadm init"),
    ("the first removed", _drop_first, "mlcluster:nodes: cp-1, the cluster's first control plane"),
    ("the first made a worker", _demote_first, "mlcluster:nodes[0].roles: cp-1 is the cluster's first control plane"),
    ("another made a worker", _demote_second, "mlcluster:nodes[1].roles: cp-2 was a control plane"),
    # A control plane other than the first may leave (its kubeadm reset takes it out of etcd) or move.
    ("another removed", _drop_third, None),
    ("the others reordered", _swap_others, None),
]


@pytest.mark.parametrize(("case", "change", "refusal"), CASES, ids=[c[0] for c in CASES])
def test_what_the_stack_may_do_to_its_control_planes(case: str, change: Any, refusal: str | None) -> None:
    problem = control_plane_change_problem(RECORDED, onprem(change).control_planes, onprem(change).nodes)
    if refusal is None:
        assert problem is None, case
    else:
        assert problem is not None and problem.startswith(refusal), problem


def test_before_the_first_deployment_or_with_an_unreadable_record_nothing_is_refused() -> None:
    spec = onprem(_swap)
    for recorded in (None, {}, [], "cp-1", [1, 2]):
        assert control_plane_change_problem(recorded, spec.control_planes, spec.nodes) is None
    assert recorded_names(onprem().control_planes) == RECORDED


def test_the_offline_plan_refuses_a_reorder_against_the_deployed_control_planes(tmp_path: Path, capsys: Any) -> None:
    stack = yaml.safe_load((PROJECT / "stacks" / "Pulumi.onprem.yaml").read_text())
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({OUTPUT: RECORDED}))
    kept = tmp_path / "Pulumi.kept.yaml"
    kept.write_text(yaml.safe_dump(stack))
    _swap(stack["config"]["mlcluster:nodes"])
    swapped = tmp_path / "Pulumi.swapped.yaml"
    swapped.write_text(yaml.safe_dump(stack))
    for path, code in ((swapped, 2), (kept, 0)):
        arguments = ["--stack-file", str(path), "--out", str(tmp_path / path.stem), "--stack-outputs", str(outputs)]
        assert plan_main(arguments) == code, path.name
    printed = capsys.readouterr()
    assert (
        "mlcluster:nodes: cp-2 is now the first control plane, but cp-1 ran kubeadm init" in printed.out + printed.err
    )


def test_a_worker_made_a_control_plane_is_refused_naming_its_roles() -> None:
    from components.render.control_planes import promoted_worker_problem, recorded_workers

    spec = onprem()
    workers = recorded_workers(spec)
    assert workers[:2] == ["cpu-1", "cpu-2"]
    assert promoted_worker_problem(workers, spec.nodes) is None

    def promote(nodes: list[dict[str, Any]]) -> None:
        nodes[3]["roles"] = ["control-plane"]

    problem = promoted_worker_problem(workers, onprem(promote).nodes)
    assert problem is not None and problem.startswith("mlcluster:nodes[3].roles: cpu-1 joined as a worker")
    # Before the first deployment, or a record of another shape: nothing to compare with.
    for recorded in (None, {}, "cpu-1", [3]):
        assert promoted_worker_problem(recorded, onprem(promote).nodes) is None
    # A worker removed and added back as a control plane in a later up is a new node: allowed.
    assert promoted_worker_problem([w for w in workers if w != "cpu-1"], onprem(promote).nodes) is None


def test_the_offline_plan_refuses_a_promoted_worker(tmp_path: Path, capsys: Any) -> None:
    from components.render.control_planes import WORKERS_OUTPUT

    stack = yaml.safe_load((PROJECT / "stacks" / "Pulumi.onprem.yaml").read_text())
    workers = [n["name"] for n in stack["config"]["mlcluster:nodes"] if "control-plane" not in n["roles"]]
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({OUTPUT: RECORDED, WORKERS_OUTPUT: workers}))
    stack["config"]["mlcluster:nodes"][3]["roles"] = ["control-plane"]
    path = tmp_path / "Pulumi.promoted.yaml"
    path.write_text(yaml.safe_dump(stack))
    arguments = ["--stack-file", str(path), "--out", str(tmp_path / "out"), "--stack-outputs", str(outputs)]
    assert plan_main(arguments) == 2
    printed = capsys.readouterr()
    assert "mlcluster:nodes[3].roles: cpu-1 joined as a worker at the last up" in printed.out + printed.err
