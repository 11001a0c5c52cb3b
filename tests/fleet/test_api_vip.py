"""cluster.apiVip on the fleet: real keepalived and haproxy on three control planes (stubs/daemons.py), the API server
stand-in on each, joins whose discovery goes through the VIP over the network, and the VIP's failover measured."""

from __future__ import annotations

import contextlib
import http.client
import json
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from .hosts import STUBS, Fleet, FleetHost, HostSpec
from .measure import MEASUREMENTS
from .test_bootstrap import assert_a_second_run_changes_nothing, calls

pytestmark = pytest.mark.fleet

VIP_PORT = 8443
PROBE_SECONDS = 0.05
FAILOVER_LIMIT_SECONDS = 10.0
"""keepalived's takeover after a silent holder is 3 adverts + skew (~3.4 s); ARP and haproxy's checks add a little."""


def _context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context


def ready_through(address: str, port: int = VIP_PORT, timeout: float = 0.5) -> bool:
    """GET /readyz through the VIP from outside the control planes (the test machine is on the fleet's bridge)."""
    return why_not_ready(address, port, timeout) is None


def why_not_ready(address: str, port: int = VIP_PORT, timeout: float = 0.5) -> str | None:
    """None when /readyz answered 200 through the VIP, else what went wrong (a status, a refusal, a timeout)."""
    connection = http.client.HTTPSConnection(address, port, timeout=timeout, context=_context())
    try:
        connection.request("GET", "/readyz")
        status = connection.getresponse().status
        return None if status == 200 else f"status {status}"
    except OSError as error:
        return f"{type(error).__name__}: {error}"
    finally:
        connection.close()


def holders(hosts: Fleet, vip: str, names: list[str]) -> list[str]:
    return [n for n in names if hosts[n].run(f"ip -o -4 addr show to {vip}/32").stdout.strip()]


def outage_after(vip: str, action: Any, *, settle: float = 15.0) -> float:
    """Seconds from `action` to the last failed probe through the VIP (0.0 when none failed), probing every 50 ms
    until the VIP has answered for 2 s after a failure (5 s when none failed); an error after `settle` seconds."""
    assert ready_through(vip), "the VIP did not answer before the fault"
    started = time.monotonic()
    action()
    last_failure: float | None = None
    deadline = started + settle
    while time.monotonic() < deadline:
        probe = time.monotonic()
        if not ready_through(vip):
            last_failure = probe
        elif (last_failure is not None and probe - last_failure > 2.0) or (
            last_failure is None and probe - started > 5.0
        ):
            break
        time.sleep(PROBE_SECONDS)
    else:
        raise AssertionError(f"the VIP {vip}:{VIP_PORT} did not answer again within {settle:.0f}s")
    return round(last_failure - started, 2) if last_failure is not None else 0.0


def _wait_until(condition: Any, what: str, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds:.0f}s: {what}"
        time.sleep(0.2)


def _daemons(host: FleetHost, code: str) -> None:
    script = f"import sys; sys.path.insert(0, {str(STUBS)!r}); import daemons, _stub; {code}"
    done = host.run(f"{sys.executable} -s -c {json.dumps(script)}", check=False)
    assert done.returncode == 0, done.stderr


def test_three_control_planes_hold_the_vip_and_it_moves_in_seconds(fleet, fleet_engine) -> None:
    hosts = fleet(
        HostSpec("cp-1"),
        HostSpec("cp-2", os="ubuntu-24.04"),
        HostSpec("cp-3", os="rocky-9"),
        HostSpec("w-1", os="ubuntu-22.04"),
        HostSpec("w-2"),
        HostSpec("cp-4", os="debian-13"),
    )
    vip = hosts.address(200)
    control_planes = ["cp-1", "cp-2", "cp-3"]
    nodes = [hosts[n].node("control-plane") for n in control_planes] + [hosts["w-1"].node()]
    values, secret = hosts.stack_values(nodes, cluster={"apiVip": {"address": f"{vip}/24"}})
    run = fleet_engine.up(values, secret)
    run.raise_error()
    MEASUREMENTS["apiVip 3cp+1w first up wall seconds"] = round(run.wall_seconds, 2)

    # kubeadm's documents carry the VIP; every join's discovery went through it, over the network.
    init = yaml.safe_load_all(hosts["cp-1"].read("/etc/kubernetes/mlcluster/kubeadm-init.yaml"))
    cluster_config = next(d for d in init if d["kind"] == "ClusterConfiguration")
    assert cluster_config["controlPlaneEndpoint"] == f"{vip}:{VIP_PORT}"
    assert vip in cluster_config["apiServer"]["certSANs"]
    (cluster,) = hosts.clusters()
    assert cluster["endpoint"] == f"{vip}:{VIP_PORT}"
    for name in ("cp-2", "cp-3", "w-1"):
        (join,) = calls(hosts[name], "kubeadm", "join")
        assert join.get("discoveredThrough") == f"{vip}:{VIP_PORT}", join
        assert f"server: https://{vip}:{VIP_PORT}" in hosts[name].read("/etc/kubernetes/kubelet.conf")
    assert f"server: https://{vip}:{VIP_PORT}" in hosts["cp-1"].read("/etc/kubernetes/admin.conf")
    # The first control plane checked the address was free before anything held it, and holds it now.
    assert f"ok: {vip} is free" in (run.step("cp-1-api-vip").stdout or "")
    assert "is free" not in (run.step("cp-2-api-vip").stdout or "")
    assert run.step("cp-1-api-vip").ended <= run.step("cp-2-api-vip").started
    assert holders(hosts, vip, control_planes) == ["cp-1"]
    for name in control_planes:
        state = hosts[name].state()
        assert state["services"]["keepalived"]["active"] and state["services"]["haproxy"]["active"], name
        assert "# mlcluster: cluster.apiVip" in hosts[name].read("/etc/keepalived/keepalived.conf")
        assert f"bind *:{VIP_PORT}" in hosts[name].read("/etc/haproxy/haproxy.cfg")
    assert ready_through(vip)
    assert_a_second_run_changes_nothing(hosts, fleet_engine, values, secret)

    # Failover, three runs of each fault, always on whichever control plane holds the VIP then.
    measured: dict[str, list[float]] = {"keepalived stopped": [], "holder off the network": [], "API server down": []}
    for _ in range(3):
        (holder,) = holders(hosts, vip, control_planes)
        measured["keepalived stopped"].append(
            outage_after(vip, lambda h=hosts[holder]: h.run("systemctl stop keepalived"))
        )
        (moved_to,) = holders(hosts, vip, control_planes)
        assert moved_to != holder
        hosts[holder].run("systemctl start keepalived")
    for _ in range(3):
        (holder,) = holders(hosts, vip, control_planes)
        # The holder drops off the network (a dead NIC, switch port or host, as the others see it): no priority-0
        # advert, so they take over once three adverts are missed.
        measured["holder off the network"].append(
            outage_after(vip, lambda h=hosts[holder]: h.run("ip link set eth0 down"))
        )
        others = [n for n in control_planes if n != holder]
        (moved_to,) = holders(hosts, vip, others)
        assert moved_to != holder
        hosts[holder].run("ip link set eth0 up")
        _wait_until(lambda m=moved_to: holders(hosts, vip, control_planes) == [m], f"{holder} gave the VIP up")
    for _ in range(3):
        (holder,) = holders(hosts, vip, control_planes)
        measured["API server down"].append(
            outage_after(vip, lambda h=hosts[holder]: _daemons(h, "daemons.stop('kube-apiserver')"))
        )
        # haproxy on the holder reaches the other API servers: the VIP stays where it is.
        assert holders(hosts, vip, control_planes) == [holder]
        _daemons(hosts[holder], "daemons.start_apiserver(_stub.Host())")
    MEASUREMENTS["apiVip failover: seconds the API did not answer through the VIP (3 runs each)"] = measured
    for fault, seconds in measured.items():
        assert max(seconds) < FAILOVER_LIMIT_SECONDS, (fault, seconds)
    assert min(measured["holder off the network"]) > 0.0, "a lost holder went unnoticed: the probe measures nothing"

    # Day 2, with the VIP elsewhere: a control plane and a worker join through it; every control plane's load
    # balancer and keepalived take the new member by a reload, and the API answers through the VIP all along.
    (holder,) = holders(hosts, vip, control_planes)
    values["nodes"] += [hosts["cp-4"].node("control-plane"), hosts["w-2"].node()]
    with probing(vip) as failures:
        grown = fleet_engine.up(values, secret)
    grown.raise_error()
    assert failures == [], f"the API did not answer through the VIP while a control plane joined: {failures}"
    for name in ("cp-4", "w-2"):
        (join,) = calls(hosts[name], "kubeadm", "join")
        assert join.get("discoveredThrough") == f"{vip}:{VIP_PORT}"
    for name in control_planes:
        output = grown.step(f"{name}-api-vip").stdout or ""
        assert "haproxy.cfg written, haproxy reloaded" in output and "keepalived reloaded" in output, output
        assert f"server cp-4 {hosts['cp-4'].address}:6443" in hosts[name].read("/etc/haproxy/haproxy.cfg")
    assert holders(hosts, vip, [*control_planes, "cp-4"]) == [holder], "a reload moved the VIP"
    MEASUREMENTS["apiVip day-2: control plane and worker joined through the VIP held by"] = holder

    # The control plane leaves again: it stops answering for the VIP, the others drop it from their configs. Its
    # drain waits for a pod that takes 6 s to stop (inside the default 30 s grace period), so the others' new configs
    # are live for longer than keepalived's takeover (3 missed adverts) before its own reset: it must stay a backup.
    leaving = hosts["cp-4"].address
    with hosts.cluster_lock() as cluster:
        cluster.setdefault("pods", {})["slow-to-stop"] = {"node": "cp-4", "stopSeconds": 6}
    values["nodes"] = [n for n in values["nodes"] if n["name"] != "cp-4"]
    with probing(vip) as failures, watching_holders(hosts, vip, [*control_planes, "cp-4"]) as seen:
        shrunk = fleet_engine.up(values, secret)
    shrunk.raise_error()
    drain = shrunk.step("cp-4-drain-on-removal", "delete")
    assert drain.ended - drain.started >= 6.0, "the drain did not wait for the pod: the window is not exercised"
    assert seen == [(holder,)], f"while cp-4 left, the VIP was held by {seen}"
    assert failures == [], f"the API did not answer through the VIP while a control plane left: {failures}"
    for name in control_planes:
        output = shrunk.step(f"{name}-api-vip").stdout or ""
        assert f"ok: {leaving} stays a VRRP peer while its haproxy answers" in output, output
        assert "cp-4" not in hosts[name].read("/etc/haproxy/haproxy.cfg")
    services = hosts["cp-4"].state()["services"]
    assert not services["keepalived"]["enabled"] and not services["keepalived"]["active"]
    assert not services["haproxy"]["enabled"] and not services["haproxy"]["active"]

    # The next change of the step (the interface named instead of found) drops the stopped peer, VIP unmoved.
    values["cluster"]["apiVip"]["interface"] = "eth0"
    with probing(vip) as failures, watching_holders(hosts, vip, control_planes) as seen:
        renamed = fleet_engine.up(values, secret)
    renamed.raise_error()
    assert seen == [(holder,)] and failures == [], (seen, failures)
    for name in control_planes:
        output = renamed.step(f"{name}-api-vip").stdout or ""
        assert "keepalived.conf written, keepalived reloaded" in output and "stays a VRRP peer" not in output, output
        assert leaving not in hosts[name].read("/etc/keepalived/keepalived.conf")


@contextlib.contextmanager
def sampled_every(seconds: float, sample: Callable[[], None]) -> Iterator[None]:
    """Call `sample` in a thread of its own every `seconds` while the block runs, and once the block has ended."""
    done = threading.Event()

    def loop() -> None:
        while not done.is_set():
            sample()
            time.sleep(seconds)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        sample()


@contextlib.contextmanager
def watching_holders(hosts: Fleet, vip: str, names: list[str]) -> Iterator[list[tuple[str, ...]]]:
    """Which of `names` hold the VIP, sampled every 0.2 s while the block runs; yields each distinct holding in
    the order seen (one holder all along: a list of one)."""
    seen: list[tuple[str, ...]] = []

    def watch() -> None:
        holding = tuple(holders(hosts, vip, names))
        if not seen or seen[-1] != holding:
            seen.append(holding)

    with sampled_every(0.2, watch):
        yield seen


@contextlib.contextmanager
def probing(vip: str) -> Iterator[list[str]]:
    """Probe the API through the VIP every 50 ms while the block runs; yields the failed probes, each as its time
    (monotonic seconds) and what went wrong."""
    failures: list[str] = []

    def probe() -> None:
        started = time.monotonic()
        failure = why_not_ready(vip)
        if failure is not None:
            failures.append(f"{started:.2f} ({time.monotonic() - started:.2f}s): {failure}")

    with sampled_every(PROBE_SECONDS, probe):
        yield failures


def test_an_address_someone_holds_is_refused_before_anything_else_runs(fleet, fleet_engine) -> None:
    hosts = fleet(HostSpec("cp-1"), HostSpec("cp-2"), HostSpec("squatter"))
    taken = hosts["squatter"].address
    nodes = [hosts[n].node("control-plane") for n in ("cp-1", "cp-2")]
    values, secret = hosts.stack_values(nodes, cluster={"apiVip": {"address": f"{taken}/24"}})
    run = fleet_engine.up(values, secret)
    assert run.error is not None
    message = str(run.error)
    assert message.startswith("command:remote:Command (cp-1-api-vip):"), message[:200]
    assert f"cluster.apiVip {taken} is in use: another machine answers for it" in message
    assert not calls(hosts["cp-1"], "kubeadm"), "kubeadm ran although the VIP was taken"
    assert "keepalived" not in hosts["cp-2"].state().get("packages", {}), "cp-2 went on after cp-1's refusal"
