"""Acceptance in the review: a first preview knows the step whole (its script and the node table it tests), and a
retest, a level change and a subset of nodes are each a diff that names the nodes and why (issue: acceptance was
`[computed]` until the GPU preflight ran)."""

from __future__ import annotations

import copy
from typing import Any

from components.config.load import spec_from_values
from components.plan.diff import diff_plans
from components.plan.engine import COMPUTED, PreviewMocks
from components.plan.review import acceptance_review
from components.plan.writer import plan_document
from components.render import acceptance as render

from .conftest import stack_values

STEP = "cp-1-acceptance"


def _plan(run_stack, values: dict[str, Any], secret: list[str], outputs: dict[str, Any] | None = None) -> dict:
    run = run_stack(values=values, secret=secret, mocks=PreviewMocks(outputs or {}))
    spec = spec_from_values(values, lambda key: key in secret)
    return plan_document(run.run, project="mlcluster", stack="onprem", spec=spec, previous=outputs)


def _step(document: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in document["resources"] if r["name"] == STEP)


def _deployed(values: dict[str, Any], secret: list[str], failed: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The `acceptance` output a first up of these values leaves (each node's driver as report() keeps it)."""
    spec = spec_from_values(values, lambda key: key in secret)
    plan = render.plan_tests(spec, None, None)
    by_name = {node.name: node for node in spec.nodes}
    nodes = {
        name: {
            "record": record,
            "result": "fail" if name in failed else "pass",
            "reasons": ["dcgm diag failed"] if name in failed else [],
            "driver": render.driver_of(spec.gpu_operator, by_name[name], None),
        }
        for name, record in plan.records.items()
    }
    return {"acceptance": {"nodes": nodes, "level": plan.level, "retest": spec.acceptance.retest}}


def test_a_first_preview_knows_the_acceptance_step_and_its_node_table(run_stack) -> None:
    """Fails if the step's input becomes unknown at a first preview again (as when it waited for the preflight)."""
    values, secret = stack_values("onprem")
    step = _step(_plan(run_stack, values, secret))
    assert step["inputs"]["create"] != COMPUTED and step["inputs"]["stdin"] != COMPUTED
    nodes = step["inputs"]["stdin"].split("=== nodes\n", 1)[1].split("\n=== ", 1)[0].splitlines()
    assert [line.split(" ")[0] for line in nodes] == ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
    assert all(f"driver={render.DRIVER_AS_TESTED}" in line for line in nodes), nodes
    review = acceptance_review(spec_from_values(values, lambda key: key in secret), None)
    assert review["due"] == {f"gpu-{i}": ["new node: never tested"] for i in range(1, 5)}
    assert not review["dueDecidedDuringUp"] and review["level"] == "standard"
    assert review["floors"][0]["source"].startswith("NVIDIA NVSentinel preflight checks")


def test_a_retest_a_level_raise_and_a_subset_are_each_a_diff(run_stack) -> None:
    """Against a deployment (gpu-2 failed), offline: the review's acceptance section names the nodes tested and why.
    (The step's own input waits for the nodes' drivers here: an offline plan runs every GPU preflight anew, where a
    day-2 `pulumi preview` knows them from the state.)"""
    values, secret = stack_values("onprem")
    deployed = _deployed(values, secret, failed=frozenset({"gpu-2"}))
    before = _plan(run_stack, values, secret, deployed)
    assert before["acceptance"]["due"] == {} and before["acceptance"]["dueDecidedDuringUp"]

    def diff_after(change: dict[str, Any]) -> list[str]:
        changed = copy.deepcopy(values)
        changed["acceptance"] = {**changed.get("acceptance", {}), **change}
        return diff_plans(before, _plan(run_stack, changed, secret, deployed)).acceptance

    driver_note = "and any recorded node whose driver changed (its GPU preflight reads the driver during up)"
    assert diff_after({"retest": "2026-12-05"}) == [
        "tests gpu-2: retest asked: acceptance.retest '' → '2026-12-05'",
        "~ retest:  -> 2026-12-05",
        driver_note,
    ]
    raised = diff_after({"level": "burn-in"})
    assert raised[0] == "tests gpu-1: level raised: standard → burn-in" and len(raised) == 6, raised
    assert "~ level: standard -> burn-in" in raised
    subset = diff_after({"nodes": ["gpu-1", "gpu-2"]})
    assert subset == [
        "- multiNodeGroups[1][0]: gpu-3",
        "- multiNodeGroups[1][1]: gpu-4",
        "- nodes[2]: gpu-3",
        "- nodes[3]: gpu-4",
        driver_note,
    ]
    assert diff_plans(before, _plan(run_stack, values, secret, deployed)).acceptance == []


def test_a_recorded_node_waits_for_its_driver_and_the_review_says_so() -> None:
    values, secret = stack_values("onprem")
    spec = spec_from_values(values, lambda key: key in secret)
    review = acceptance_review(spec, _deployed(values, secret)["acceptance"])
    assert review["dueDecidedDuringUp"] and review["due"] == {}
