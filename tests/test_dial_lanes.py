"""Dial lanes: whatever `pulumi up --parallel` is, no more SSH steps dial one sshd at once than its MaxStartups less
one (components/cluster/connection.py `dial_lanes`), so OpenSSH's default `MaxStartups 10:30:100` never drops
one. Checked on the program's dependency graph as the engine schedules it with no parallelism limit (the worst
`--parallel`): each resource starts once everything it depends on finished, each runs for a random time."""

from __future__ import annotations

import copy
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from benchmarks.stacks import generated_values
from components.config.load import read_stack_file
from components.plan.engine import RecordedResource

COMMAND = "command:remote:Command"
COPY = "command:remote:CopyToRemote"
NEWCOMER = Path(__file__).parent / "fixtures" / "newcomer"
BASTION_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def newcomer(stack: str) -> tuple[dict[str, Any], list[str]]:
    config, secret_keys = read_stack_file(NEWCOMER / f"Pulumi.{stack}.yaml")
    values = {
        key.split(":", 1)[1]: raw if key.endswith(":kubernetesVersion") else json.loads(raw)
        for key, raw in config.items()
    }
    return values, [k.split(":", 1)[1] for k in secret_keys]


def behind_bastion(nodes: int, max_startups: int | None = None) -> dict[str, Any]:
    values = generated_values(nodes)
    bastion: dict[str, Any] = {"host": "198.18.250.1", "hostKey": BASTION_KEY}
    if max_startups is not None:
        bastion["maxStartups"] = max_startups
    values["ssh"] = {**values["ssh"], "bastion": bastion}
    values["cluster"] = {**values["cluster"], "apiAddress": "127.0.0.1:6443"}
    return values


def first_hop(resource: RecordedResource) -> str:
    connection = resource.raw_inputs["connection"]
    proxy = connection.get("proxy")
    return str((proxy or connection)["host"])


def dials_on_create(resource: RecordedResource) -> bool:
    return resource.type == COPY or (resource.type == COMMAND and bool(resource.raw_inputs.get("create")))


def peak_dials(resources: list[RecordedResource], seed: int) -> dict[str, int]:
    """Schedule the graph with unlimited parallelism and random step times; by first hop, the most SSH resources
    running (so possibly dialling) at one moment. A dependency on a component waits for all of its children."""
    rng = random.Random(seed)
    by_urn = {r.urn: r for r in resources}
    children: dict[str, list[str]] = defaultdict(list)
    for r in resources:
        children[r.parent].append(r.urn)
    finish: dict[str, float] = {}

    def done_at(urn: str) -> float:
        if urn in finish:
            return finish[urn]
        resource = by_urn.get(urn)
        if resource is None:
            return 0.0
        waits = [done_at(dep) for dep in resource.depends_on]
        if resource.parent in by_urn and not by_urn[resource.parent].custom:
            waits.append(0.0)
        start = max(waits, default=0.0)
        if resource.custom:
            end = start + rng.uniform(1.0, 100.0)
        else:
            # A component is done when its children are.
            end = max([start, *(done_at(child) for child in children[urn])])
        finish[urn] = end
        spans[urn] = (start, end)
        return end

    spans: dict[str, tuple[float, float]] = {}
    for urn in by_urn:
        done_at(urn)
    events: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for urn, (start, end) in spans.items():
        resource = by_urn[urn]
        if resource.type in (COMMAND, COPY) and dials_on_create(resource):
            events[first_hop(resource)] += [(start, 1), (end, -1)]
    peaks = {}
    for hop, marks in events.items():
        running = peak = 0
        for _, delta in sorted(marks):  # an end before a start at the same moment
            running += delta
            peak = max(peak, running)
        peaks[hop] = peak
    return peaks


CASES = {
    # name: (values, secret keys, the most steps that may dial one host at once)
    "on-prem example (no bastion)": ("onprem", None, 9),
    "newcomer: 3 + 8 Rocky behind a bastion": ("newcomer:rocky-bastion", None, 9),
    "40 nodes behind a bastion": (behind_bastion(40), ["ssh"], 9),
    "40 nodes behind a bastion that allows 5": (behind_bastion(40, max_startups=5), ["ssh"], 4),
}


@pytest.mark.parametrize("case", list(CASES))
def test_no_more_steps_dial_a_host_at_once_than_its_max_startups_allows(run_stack, case: str) -> None:
    source, secret, lanes = CASES[case]
    if isinstance(source, str) and source.startswith("newcomer:"):
        values, secret = newcomer(source.split(":", 1)[1])
        run = run_stack(values=values, secret=secret)
    elif isinstance(source, str):
        run = run_stack(source)
    else:
        run = run_stack(values=source, secret=secret)
    resources = run.resources
    for seed in range(5):
        peaks = peak_dials(resources, seed)
        assert peaks and max(peaks.values()) <= lanes, (seed, sorted(peaks.items(), key=lambda kv: -kv[1])[:3])
    if "behind a bastion" in case:
        # Every step goes through the bastion, and its lanes are full at some moment: the bound is reached.
        assert len(peaks) == 1 and max(peaks.values()) == lanes


def test_without_the_lanes_the_same_fleet_dials_the_bastion_in_crowds(run_stack) -> None:
    """The bound is the lanes' doing: declared as allowing 10,000, the 40-node fleet's steps dial the bastion
    tens at once (more than OpenSSH's default MaxStartups starts dropping at)."""
    run = run_stack(values=behind_bastion(40, max_startups=10_000), secret=["ssh"])
    assert min(max(peak_dials(run.resources, seed).values()) for seed in range(5)) > 30


def test_lanes_are_dependencies_only_so_removing_a_node_changes_no_other_step(run_stack) -> None:
    """A node added or removed re-chains the lanes after it; the engine diffs inputs, so no other step re-runs
    (the other nodes' inputs are identical), and the order stays the registration order."""
    values = behind_bastion(12)
    fewer = copy.deepcopy(values)
    fewer["nodes"] = [n for n in fewer["nodes"] if n["name"] != "node-5"]
    before = {r.urn: r for r in run_stack(values=values, secret=["ssh"]).resources}
    after = {r.urn: r for r in run_stack(values=fewer, secret=["ssh"]).resources}
    common = set(before) & set(after)
    assert all("node-5" in urn or "upgrade-" in urn for urn in set(before) - common)
    changed = sorted(after[urn].name for urn in common if before[urn].inputs != after[urn].inputs)
    # What lists the nodes changes (their kubelet batches, labels and taints, the acceptance step's table of the GPU
    # nodes it covers, node-5 among them), no node's own step.
    assert set(changed) <= {
        "cp-1-join-credentials",
        "cp-1-node-metadata",
        "cp-1-acceptance",
        "h100-sxm-80gb",
        "prometheus-rule-mlcluster-alerts",
    }, changed
    rechained = [urn for urn in common if before[urn].depends_on != after[urn].depends_on]
    assert any("::node-1" in urn for urn in rechained), "removing a node re-chains the lanes after it"


def test_a_max_startups_below_two_is_refused_with_its_key(run_stack) -> None:
    from components.config.load import spec_from_values
    from components.config.schema import ConfigError

    values = behind_bastion(3, max_startups=1)
    values["ssh"]["maxStartups"] = 0
    with pytest.raises(ConfigError) as error:
        spec_from_values(values, lambda key: key == "ssh")
    text = str(error.value)
    assert "ssh.bastion.maxStartups" in text and "ssh.maxStartups" in text, text
