"""SSH connections a real `pulumi up` holds: pulumi-command dials one client per resource and closes the command's
session, never the client (provider/pkg/provider/remote/commandOutputs.go), so every connection, its sshd and a
bastion's stay until the provider exits at the end of the run. The fleet engine keeps them the same way
(SshRunner: one ControlPersist master per call); these tests count them on the hosts, with `ss`, while the run's
connections are still open, and hold the plan's model (benchmarks/footprint.py: one per SSH resource of the node,
and on a bastion one per SSH resource behind it) to what the hosts show.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from benchmarks.footprint import Connections, ssh_connections
from components.plan.writer import plan_document

from ..conftest import load_spec
from .engine import FleetEngine, FleetRun
from .hosts import Fleet, HostSpec
from .measure import MEASUREMENTS

pytestmark = pytest.mark.fleet


def established(hosts: Fleet, name: str) -> int:
    """TCP connections established to the host's sshd (port 22), seen in its network namespace."""
    result = subprocess.run(
        ["ip", "netns", "exec", hosts.netns(hosts[name]), "ss", "-Htn", "state", "established", "( sport = :22 )"],
        capture_output=True,
        text=True,
        check=True,
    )
    return len(result.stdout.splitlines())


def held_at_each_run_end(hosts: Fleet, engine: FleetEngine) -> dict[str, int]:
    """Filled at the end of each of the engine's runs, while its connections are still open: established
    connections by host."""
    seen: dict[str, int] = {}

    def count(run: FleetRun) -> None:
        seen.update({name: established(hosts, name) for name in hosts.hosts})

    engine.before_release = count
    return seen


def modelled(run: FleetRun, values: dict[str, Any], secret: list[str]) -> Connections:
    """The plan's model of the connections the run's program holds (benchmarks/footprint.py)."""
    assert run.program is not None
    return ssh_connections(
        plan_document(run.program, project="mlcluster", stack="fleet", spec=load_spec(values, secret))
    )


def test_each_command_keeps_its_connection_until_the_run_ends(fleet, fleet_engine) -> None:
    """The engine's rule: one connection per SSH resource that ran, open until the end of the run, then none."""
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"))
    values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane"), hosts["w-1"].node()])
    seen = held_at_each_run_end(hosts, fleet_engine)
    run = fleet_engine.up(values, secret)
    run.raise_error()
    model = modelled(run, values, secret)
    assert seen == model.per_node and run.connections_held == model.total, (seen, model)
    # The provider has exited: nothing stays open.
    assert {name: established(hosts, name) for name in hosts.hosts} == {"cp-1": 0, "w-1": 0}
    # A run that changes nothing dials nothing.
    seen.clear()
    again = fleet_engine.up(values, secret)
    assert again.steps == [] and again.connections_held == 0 and seen == {"cp-1": 0, "w-1": 0}


WIDE_PARALLEL = 64
"""`pulumi up --parallel` on a 16-core machine (the CLI's default, 4 x CPUs)."""


def one_plus_sixteen_behind_a_bastion(fleet, bastion_settings: dict[str, Any] | None = None):
    workers = [f"w-{i}" for i in range(1, 17)]
    hosts = fleet(
        HostSpec("bastion"), HostSpec("cp-1", only_via="bastion"), *(HostSpec(w, only_via="bastion") for w in workers)
    )
    bastion = hosts["bastion"]
    nodes = [hosts["cp-1"].node("control-plane"), *(hosts[w].node() for w in workers)]
    values, secret = hosts.stack_values(
        nodes,
        # The default dial attempts (3), not the fleet's quick 1: pulumi-command's retries are part of the crowd.
        ssh={
            "dialAttempts": 3,
            "bastion": {"host": bastion.address, "hostKey": bastion.host_key, **(bastion_settings or {})},
        },
        cluster={"apiAddress": "127.0.0.1:16443"},
    )
    return hosts, values, secret


def dropped_dials(hosts: Fleet, name: str) -> int:
    """Dials the host's sshd dropped past its MaxStartups (OpenSSH logs each one)."""
    log = hosts[name].dir / "sshd.log"
    return log.read_text().count("past MaxStartups") if log.exists() else 0


def test_without_lanes_a_wide_parallel_crowds_a_default_bastion(fleet) -> None:
    """The failure the dial lanes prevent, on a bastion with OpenSSH's default MaxStartups 10:30:100: declared
    as allowing 1,000 (no lanes), the 1+16 fleet's first `up` at --parallel 64 dials it more than 10 at once, and
    it drops dials (pulumi-command retries each after 100 ms, then 150 ms, in step with the rest of the crowd)."""
    hosts, values, secret = one_plus_sixteen_behind_a_bastion(fleet, {"maxStartups": 1000})
    engine = FleetEngine(max_workers=WIDE_PARALLEL)
    try:
        run = engine.up(values, secret)
        peak = engine.ssh.peak_dials()[hosts["bastion"].address]
    finally:
        engine.close()
    dropped = dropped_dials(hosts, "bastion")
    MEASUREMENTS["1+16 behind a default bastion, --parallel 64, no lanes: peak dials in flight"] = peak
    MEASUREMENTS["1+16 behind a default bastion, --parallel 64, no lanes: dials dropped"] = dropped
    MEASUREMENTS["1+16 behind a default bastion, --parallel 64, no lanes: first up wall seconds"] = round(
        run.wall_seconds, 2
    )
    MEASUREMENTS["1+16 behind a default bastion, --parallel 64, no lanes: first up"] = (
        "failed: " + " ".join(str(run.error).split())[:300] if run.error else "succeeded after retries"
    )
    assert peak > 10, peak


def test_one_plus_sixteen_behind_a_bastion_holds_what_the_model_says(fleet) -> None:
    """1 control plane + 16 workers reachable only through a bastion (OpenSSH's default MaxStartups), `up` at
    --parallel 64: no more than 9 dials are in flight to the bastion at once and it drops none (the dial lanes).
    At the end of the first `up` every node holds one connection per SSH resource of its own, the bastion one per
    SSH resource of every node (and sshd processes to match), as benchmarks/footprint.py models it from the plan."""
    hosts, values, secret = one_plus_sixteen_behind_a_bastion(fleet)
    fleet_engine = FleetEngine(max_workers=WIDE_PARALLEL)
    try:
        seen = held_at_each_run_end(hosts, fleet_engine)
        run = fleet_engine.up(values, secret)
        run.raise_error()
        peaks = fleet_engine.ssh.peak_dials()
    finally:
        fleet_engine.close()
    assert set(peaks) == {hosts["bastion"].address} and peaks[hosts["bastion"].address] <= 9, peaks
    assert dropped_dials(hosts, "bastion") == 0
    MEASUREMENTS["1+16 behind a default bastion, --parallel 64, lanes: peak dials in flight"] = peaks[
        hosts["bastion"].address
    ]
    model = modelled(run, values, secret)
    measured = {name: count for name, count in seen.items() if name != "bastion"}
    assert measured == model.per_node, (measured, model.per_node)
    assert seen["bastion"] == model.total == run.connections_held
    assert established(hosts, "bastion") == 0
    MEASUREMENTS["connections held at the end of a 1+16 first up, per node"] = measured
    MEASUREMENTS["connections held at the end of a 1+16 first up, on the bastion"] = seen["bastion"]
    MEASUREMENTS["1+16 behind a bastion, first up wall seconds"] = round(run.wall_seconds, 2)
