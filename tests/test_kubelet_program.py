"""The tuning on the mock engine: restart batches as dependencies (batch k waits for all of batch k-1), warnings."""

from __future__ import annotations

import copy
import logging

import pytest

from .conftest import stack_values

COMMAND = "command:remote:Command"


def restart_dependencies(run) -> dict[str, set[str]]:
    """For each node's kubelet command (upgrade, then tuning restarts), the nodes whose kubelet command it waits
    for last: the nearest ones found through everything between them (the batch's drain, the previous batch's
    uncordon), not the whole history."""
    kubelets = {r.urn: r for r in run.of_type(COMMAND) if r.name.endswith("-kubelet")}
    by_urn = {r.urn: r for r in run.resources}
    node_of = {urn: r.name.removesuffix("-kubelet") for urn, r in kubelets.items()}
    nearest: dict[str, set[str]] = {}

    def waited(urn: str) -> set[str]:
        if urn in node_of:
            return {node_of[urn]}
        if urn not in nearest:
            nearest[urn] = {n for d in by_urn[urn].depends_on if d in by_urn for n in waited(d)}
        return nearest[urn]

    urn_of = {node: urn for urn, node in node_of.items()}

    def latest(nodes: set[str]) -> set[str]:
        # A kubelet another one in the set already waits for is implied (the dial lanes add such edges).
        return {n for n in nodes if not any(urn_of[n] in _ancestors(by_urn, urn_of[m]) for m in nodes - {n})}

    return {
        node_of[urn]: latest({n for d in r.depends_on if d in by_urn for n in waited(d)}) for urn, r in kubelets.items()
    }


def _ancestors(by_urn: dict, urn: str) -> set[str]:
    seen: set[str] = set()
    todo = list(by_urn[urn].depends_on)
    while todo:
        current = todo.pop()
        if current in by_urn and current not in seen:
            seen.add(current)
            todo += by_urn[current].depends_on
    return seen


def ancestors(run, name: str) -> set[str]:
    return _ancestors({r.urn: r for r in run.resources}, run.named(name).urn)


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
    run = run_stack(values=values, secret=secret)
    waits = restart_dependencies(run)
    assert sorted(waits) == sorted(n for batch in expected_batches for n in batch)
    previous: list[str] = []
    for batch in expected_batches:
        for node in batch:
            assert waits[node] == set(previous), f"{node} waits for {waits[node]}, expected {previous}"
        previous = batch
    # Each kubelet command waits for every node to be in the cluster (init or join, after the node's tuning),
    # and for its batch's drain.
    assert run.urn_of("cp-1-kubeadm-init") in ancestors(run, "cp-1-kubelet")
    assert run.urn_of("gpu-4-kubeadm-join") in ancestors(run, "cp-1-kubelet")
    last = expected_batches[-1]
    span = last[0] if len(last) == 1 else f"{last[0]}..{last[-1]}"
    drain = run.named(f"cp-1-upgrade-drain-{span}")
    assert drain.urn in run.named(f"{last[-1]}-kubelet").depends_on
    if len(last) > 1:
        # Named after its first node before: that URN is its alias, so a deployed stack keeps the resource.
        assert any(str(a).endswith(f"::cp-1-upgrade-drain-{last[0]}") for a in drain.options.get("aliases") or [])


def test_day_one_is_not_batched_one_node_does_not_hold_back_another(run_stack) -> None:
    run = run_stack("onprem")
    # The tuning runs inside each node's prepare command.
    tuning = {r.urn for r in run.of_type(COMMAND) if r.name.endswith("-prepare")}
    restarts = {r.urn for r in run.of_type(COMMAND) if r.name.endswith("-kubelet")}
    assert len(tuning) == len(restarts) == 9
    checked = 0
    for resource in run.of_type(COMMAND):
        if resource.name.endswith(("-prepare", "-kubeadm-join")):
            node = resource.name.removesuffix("-prepare").removesuffix("-kubeadm-join")
            own = (f"::{node}-prepare", f"::{node}-kubelet")
            others = {u for u in tuning | restarts if not u.endswith(own)}
            assert len(others) == 16, node
            assert not others & set(resource.depends_on), f"{resource.name} waits for another node's tuning"
            checked += 1
    assert checked == 9 + 8


def test_preview_warns_through_the_engine_when_containerd_cannot_honour_the_deadline(run_stack, caplog) -> None:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["kubelet"]["containerdVersion"] = "1.6"
    values["nodes"][5]["kubelet"] = {"containerdVersion": "2.1"}
    with caplog.at_level(logging.WARNING):
        run_stack(values=values, secret=secret)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        w.startswith("mlcluster:kubelet.imagePullProgressDeadline: (30m) cannot be honoured: containerd 1.6")
        for w in warnings
    ), warnings
    assert not any("nodes[5]" in w for w in warnings), warnings


def test_the_offline_plan_lists_the_warnings(tmp_path) -> None:
    import json
    import subprocess
    import sys

    import yaml

    from .conftest import PROJECT

    host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG1sY2x1c3Rlci10ZXN0LWhvc3Qta2V5LTAwMDAwMDAw"
    stack = {
        "config": {
            "mlcluster:kubernetesVersion": "1.34.11",
            "mlcluster:cluster": {"name": "old"},
            "mlcluster:ssh": {"privateKey": {"secure": "v1:PLACEHOLDER"}},
            "mlcluster:nodes": [
                {"name": "cp-1", "host": "198.18.0.10", "roles": ["control-plane"], "hostKey": host_key}
            ],
            "mlcluster:kubelet": {"maxParallelImagePulls": 3},
            **{f"mlcluster:{layer}": {"enabled": False} for layer in ("gpuOperator", "kueue", "kserve", "kubeflow")},
        }
    }
    stack_file = tmp_path / "Pulumi.old.yaml"
    stack_file.write_text(yaml.safe_dump(stack))
    result = subprocess.run(
        [
            *(sys.executable, "-m", "components.plan", "--stack-file", str(stack_file)),
            *("--out", str(tmp_path / "out"), "--at", "2026-12-04T12:00Z"),
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # The warnings of the config (none here) and of the program (the support calendar on the plan's clock).
    expected = "mlcluster:kubernetesVersion: Kubernetes 1.34 reached end of life on 2026-10-27"
    assert f"warning: {expected}" in result.stderr
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert any(w.startswith(expected) for w in plan["warnings"]), plan["warnings"]
