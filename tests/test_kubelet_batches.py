"""Restart batches as Pulumi dependencies: batch k's kubelet-tuning steps wait for all of batch k-1's."""

from __future__ import annotations

import copy

import pytest

from .conftest import stack_values

COMMAND = "command:remote:Command"


def tuning_dependencies(run) -> dict[str, set[str]]:
    """For each node's kubelet-tuning step, the other nodes whose tuning it waits for."""
    tuning = {r.urn: r for r in run.of_type(COMMAND) if r.name.endswith("-kubelet-tuning")}
    node_of = {urn: r.name.removesuffix("-kubelet-tuning") for urn, r in tuning.items()}
    return {node_of[urn]: {node_of[d] for d in r.depends_on if d in node_of} for urn, r in tuning.items()}


@pytest.mark.parametrize(
    ("restart", "expected_batches"),
    [
        ({}, [["cp-1"], ["cp-2"], ["cp-3"], ["cpu-1"], ["cpu-2"], ["gpu-1"], ["gpu-2"], ["gpu-3"], ["gpu-4"]]),
        (
            {"maxUnavailableControlPlanes": 2, "maxUnavailableWorkers": "50%"},
            [["cp-1", "cp-2"], ["cp-3"], ["cpu-1", "cpu-2", "gpu-1"], ["gpu-2", "gpu-3", "gpu-4"]],
        ),
    ],
)
def test_each_batch_waits_for_the_whole_previous_batch(run_stack, restart, expected_batches) -> None:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["kubelet"]["restart"] = restart
    waits = tuning_dependencies(run_stack(values=values, secret=secret))
    assert sorted(waits) == sorted(n for batch in expected_batches for n in batch)
    previous: list[str] = []
    for batch in expected_batches:
        for node in batch:
            assert waits[node] == set(previous), f"{node} waits for {waits[node]}, expected {previous}"
        previous = batch
