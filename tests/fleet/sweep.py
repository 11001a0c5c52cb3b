"""The fault sweep: every distinct call a scenario makes fails once, and a plain later `up` finishes the job.

For each scenario (a 1 + 1 bootstrap, a minor upgrade of 1 + 2, a certificate renewal, the joins of an HA
bootstrap: 2 control planes + 1 worker, the API VIP, and acceptance turned on over 2 GPU nodes) a reference run without
faults lists every distinct call the fleet's stubs record during the swept `up` (and each phase of the calls
that work in phases: `kubeadm init`'s). Then, from the same starting point each time (`Fleet.snapshot`):

1. one fault: that call fails once (`failOnce`), or the host restarts while the call runs (`holdOnce`, then
   `Fleet.reboot`), or the SSH connection of the session running it drops (`Fleet.drop_connection`; the
   session's commands go on without it, as after a network cut);
2. `up`: it must fail naming the host and the step (and, for a call fault, with the call's message), unless
   the call is in TOLERATED with the reason its failure is not the step's;
3. the fault cleared, the clock 3 h later (join tokens and uploaded certificate keys age), `up` again: it must
   succeed and leave the same cluster as the reference (every Node, version, package, service, kernel setting,
   and every resource in the state);
4. `up` once more: it must run nothing.

`python -m tests.fleet.sweep` runs it (`make sweep`; root and network namespaces, as the fleet) and prints the
table; `--write docs/fault-sweep.md` writes it there; `--only REGEX` sweeps the calls matching REGEX. The exit
status is 1 when any row did not recover.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import json
import logging
import multiprocessing
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from components.config.spec import DEFAULT_KUBERNETES_VERSION

from ..gpu_host import H200_LSPCI
from .engine import FleetEngine, FleetRun
from .hosts import PREVIOUS_MINOR_VERSION, Fleet, HostSpec

T = TypeVar("T")
HOURS = 3600.0
INJECTED = "injected fault: {line} failed"
RECOVERY_DELAY = 3 * HOURS
"""How much later the retry runs: long enough for a certificate key (2 h) to expire, not a join token (24 h)."""
TOLERATED: dict[str, str] = {
    r"systemctl is-(?:active|enabled) --quiet \S+": (
        "its exit status is the answer (0 yes, anything else no); a no leads to `systemctl enable --now` or"
        " `restart`, which repeats the work and stops the step when systemd cannot act"
    ),
    r"dpkg-query -W -f=\$\{Version\} \S+": (
        "1 is dpkg-query's 'no such package' (any other status stops the step); the pinned install that follows"
        " is idempotent"
    ),
    r"kubectl --kubeconfig /etc/kubernetes/admin.conf --server https://127\.0\.0\.1:6443 --tls-server-name kubernetes"
    r" get --raw /readyz": (
        "a poll: the renewal waits for this node's restarted API server with it, and one failed poll is one more"
        " poll until its deadline"
    ),
    r"crictl exec \S+ etcdctl --endpoints=https://127\.0\.0\.1:2379 \S+ \S+ \S+ endpoint health": (
        "a poll: the renewal waits for this node's etcd member with it (unhealthy while it loads its data), and one"
        " failed poll is one more poll until its deadline"
    ),
    r"kubectl --kubeconfig /etc/kubernetes/admin\.conf -n \S+ get (?:job|trainjob) \S+ -o "
    r"jsonpath=\{\.status\.conditions\[\?\(@\.status==\"True\"\)\]\.type\}": (
        "a poll: acceptance reads a running test's state with it, and one failed read is one more poll until the"
        " wave's deadline (where a failed read stops the step)"
    ),
}
"""Call patterns whose failure (exit 1) an `up` survives on purpose, with the reason. Such a row must still
end with the same cluster as the reference."""


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    hosts: tuple[HostSpec, ...]
    roles: dict[str, str]
    """Host name -> control-plane or worker."""
    prepare: Callable[[Fleet, FleetEngine, dict[str, Any], list[str]], dict[str, Any]]
    """Brings a started fleet to where the swept `up` begins; returns that up's config values."""
    calls: str = ".*"
    """The calls swept (a regular expression): a scenario that exists for some calls only sweeps those."""
    interrupted: bool = False
    """Also restart the host and drop the connection in the middle of each node step."""
    cluster: dict[str, Any] = field(default_factory=dict)
    """The stack's `cluster` section beside the fleet's defaults (`{subnet}`: the fleet's network, e.g. 198.18.4)."""


def _bootstrap(fleet: Fleet, engine: FleetEngine, values: dict[str, Any], secret: list[str]) -> dict[str, Any]:
    return values


def _minor_upgrade(fleet: Fleet, engine: FleetEngine, values: dict[str, Any], secret: list[str]) -> dict[str, Any]:
    engine.up({**values, "kubernetesVersion": PREVIOUS_MINOR_VERSION}, secret).raise_error()
    return values


def _certificate_renewal(
    fleet: Fleet, engine: FleetEngine, values: dict[str, Any], secret: list[str]
) -> dict[str, Any]:
    engine.up(values, secret).raise_error()
    fleet.advance_clock(345 * 24 * HOURS)  # 20 days left: this up renews
    return values


def _acceptance(fleet: Fleet, engine: FleetEngine, values: dict[str, Any], secret: list[str]) -> dict[str, Any]:
    """GPU nodes up with acceptance off, then the swept up turns it on: gpu-b's DCGM diagnostic fails, so the
    reference quarantines it and a trial must end with exactly that taint."""
    from .gpu import acceptance_health, give_gpus, kueue_flavors  # the GPU stubs are this scenario's only

    model = "H200-SXM-141GB"
    gpu_hosts = [name for name, role in fleet.hosts.items() if name.startswith("gpu-")]
    for name in fleet.hosts:
        give_gpus(fleet[name], [H200_LSPCI] * 8 if name in gpu_hosts else [], None)
    nodes = [
        {**node, "gpu": {"count": 8, "model": model}} if node["name"] in gpu_hosts else node for node in values["nodes"]
    ]
    platform = {
        "nodes": nodes,
        "gpuOperator": {"enabled": True},
        "kueue": {"enabled": True},
        "kubeflow": {"enabled": True},
    }
    engine.up({**values, **platform, "acceptance": {"enabled": False}}, secret).raise_error()
    with fleet.cluster_lock() as cluster:
        kueue_flavors(cluster, model)
        diag = {name: {"diag": "fail" if name == "gpu-b" else "pass"} for name in gpu_hosts}
        acceptance_health(cluster, model, **diag)
    return {**values, **platform}


SCENARIOS = {
    scenario.name: scenario
    for scenario in (
        Scenario(
            "bootstrap",
            "1 control plane (Debian 12) + 1 worker (Rocky 9), first up",
            (HostSpec("cp-1"), HostSpec("w-1", os="rocky-9")),
            {"cp-1": "control-plane", "w-1": "worker"},
            _bootstrap,
            interrupted=True,
        ),
        Scenario(
            "join",
            "2 control planes + 1 worker (Rocky 9) behind an endpoint, first up: the joins and each of their phases",
            (HostSpec("cp-1"), HostSpec("cp-2"), HostSpec("w-1", os="rocky-9")),
            {"cp-1": "control-plane", "cp-2": "control-plane", "w-1": "worker"},
            _bootstrap,
            calls=r"kubeadm join .*",
            interrupted=True,
            cluster={"controlPlaneEndpoint": "k8s-api.fleet.test:6443"},
        ),
        Scenario(
            "vip",
            "2 control planes holding cluster.apiVip (keepalived, haproxy) + 1 worker, first up: the VIP step's calls",
            (HostSpec("cp-1"), HostSpec("cp-2", os="rocky-9"), HostSpec("w-1")),
            {"cp-1": "control-plane", "cp-2": "control-plane", "w-1": "worker"},
            _bootstrap,
            calls=r"(?:apt-get|dnf) install .*keepalived.*|systemctl .*(?:keepalived|haproxy).*",
            interrupted=True,
            cluster={"apiVip": {"address": "{subnet}.200/24"}},
        ),
        Scenario(
            "acceptance",
            "1 control plane + 2 GPU nodes, acceptance turned on: its Jobs, TrainJob, logs and the quarantine taint",
            (HostSpec("cp-1"), HostSpec("gpu-a"), HostSpec("gpu-b", os="rocky-9")),
            {"cp-1": "control-plane", "gpu-a": "worker", "gpu-b": "worker"},
            _acceptance,
            calls=r"kubectl .*",
            interrupted=True,
        ),
        Scenario(
            "upgrade",
            f"1 control plane + 2 workers (Debian 12, Ubuntu 22.04, Rocky 9), {PREVIOUS_MINOR_VERSION} ->"
            f" {DEFAULT_KUBERNETES_VERSION}",
            (HostSpec("cp-1"), HostSpec("w-1", os="ubuntu-22.04"), HostSpec("w-2", os="rocky-9")),
            {"cp-1": "control-plane", "w-1": "worker", "w-2": "worker"},
            _minor_upgrade,
        ),
        Scenario(
            "renewal",
            "1 control plane + 1 worker, certificates renewed 345 days after the bootstrap",
            (HostSpec("cp-1"), HostSpec("w-1")),
            {"cp-1": "control-plane", "w-1": "worker"},
            _certificate_renewal,
        ),
    )
}


@dataclass(frozen=True)
class Target:
    """One fault: `kind` (fail, reboot, drop) at the first call on `host` matching `pattern`."""

    scenario: str
    kind: str
    host: str
    call: str
    """The call as recorded (digits kept), for people."""
    step: str = ""
    """For restarts and drops: the node step the call belongs to (from its failure in the call sweep)."""

    @property
    def pattern(self) -> str:
        return call_pattern(self.call)


@dataclass
class Row:
    target: Target
    first_up: str
    """What the first `up` said: the failing resource and step, or `succeeded`."""
    recovered: bool
    problem: str = ""
    seconds: float = 0.0
    named: bool = False
    """The first up's error named the host and the step (and, for a call fault, carried its message)."""


def call_pattern(line: str) -> str:
    """A regular expression for `line` with every number free: the same call on another day or version."""
    return "".join(r"\d+" if part.isdigit() else re.escape(part) for part in re.split(r"(\d+)", line))


def call_lines(fleet: Fleet, host: str, since: dict[str, int]) -> list[str]:
    """The calls (and phase checkpoints) `host` recorded after the offsets in `since`, in order, as lines."""
    state = fleet[host].state_dir
    lines = []
    for name in ("calls.jsonl", "checkpoints.jsonl"):
        path = state / name
        entries = [json.loads(x) for x in path.read_text().splitlines()[since.get(name, 0) :]] if path.exists() else []
        for entry in entries:
            line = entry.get("checkpoint") or " ".join([entry["tool"], *entry["argv"]])
            lines.append((entry["t0"], line))
    return [line for _, line in sorted(lines)]


def log_offsets(fleet: Fleet, host: str) -> dict[str, int]:
    state = fleet[host].state_dir
    return {
        name: len((state / name).read_text().splitlines()) if (state / name).exists() else 0
        for name in ("calls.jsonl", "checkpoints.jsonl")
    }


def fingerprint(fleet: Fleet, engine: FleetEngine) -> dict[str, Any]:
    """What a finished `up` leaves, independent of the run: the cluster's Nodes, versions and members, each host's
    packages, services, kernel settings and swap, whether its certificates have a year left, and the state's
    resources."""
    now = fleet.now()
    clusters = fleet.clusters()
    found: dict[str, Any] = {
        "clusters": [
            {
                "version": c.get("version"),
                "complete": [k for k in ("kubeadmConfig", "clusterInfo", "addons") if c.get(k)],
                "etcdMembers": sorted(c.get("etcdMembers", {})),
                "nodes": {
                    name: {
                        k: node.get(k)
                        for k in ("labels", "taints", "controlPlane", "kubeletVersion", "controlPlaneVersion")
                    }
                    | {"schedulable": not node.get("unschedulable")}
                    for name, node in sorted(c.get("nodes", {}).items())
                },
            }
            for c in clusters
        ],
        "state": sorted(urn for urn in engine.state if "#" not in urn),
        "replacedWaiting": sorted(urn for urn in engine.state if "#" in urn),
    }
    for name, host in fleet.hosts.items():
        state = host.state()
        expiry = host.run("cat /etc/kubernetes/pki/expiry.json 2>/dev/null || echo '{}'").stdout
        dates = [v for k, v in json.loads(expiry).items() if not k.startswith("ca:")]
        found[name] = {
            "packages": {k: v for k, v in sorted(state.get("packages", {}).items())},
            "held": sorted(state.get("held", [])),
            "services": {k: [v.get("enabled"), v.get("active")] for k, v in sorted(state.get("services", {}).items())},
            "sysctl": {k: v for k, v in sorted(state.get("sysctl", {}).items())},
            "swap": state.get("swap"),
            "modules": sorted(host.run("ls /sys/module").stdout.split()),
            "joined": host.exists("/etc/kubernetes/kubelet.conf"),
            "certificatesWithAYearLeft": bool(dates) and min(dates) - now > 300 * 24 * HOURS,
        }
    return found


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [
            d for i, (e, a) in enumerate(zip(expected, actual, strict=True)) for d in differences(e, a, f"{path}/{i}")
        ]
    if isinstance(expected, dict) and isinstance(actual, dict):
        return [
            d
            for k in sorted(set(expected) | set(actual))
            for d in differences(expected.get(k), actual.get(k), f"{path}/{k}")
        ]
    return [] if expected == actual else [f"{path or '/'}: expected {expected!r}, found {actual!r}"]


def tolerated(target: Target) -> bool:
    return target.kind == "fail" and any(re.fullmatch(p, target.call) for p in TOLERATED)


def summary(run: FleetRun) -> str:
    """The first up's error as a row shows it: the resource, the step inside it, the gist."""
    if run.error is None:
        return "succeeded"
    text = str(run.error)
    resource = re.search(r"\(([^)]+)\)", text)
    step = re.search(r"^error: step (\S+) failed \(exit", text, re.M)
    if "without exit status or exit signal" in text:
        gist = "connection lost"
    elif "ssh: dial tcp" in text or "ssh: handshake" in text:
        gist = "host unreachable"
    elif "injected fault" in text:
        gist = "the call's error"
    else:
        lines = [line for line in text.splitlines() if line.startswith("error: ") and "step " not in line]
        gist = lines[-1].removeprefix("error: ")[:80] if lines else text.splitlines()[-1][:80]
    return f"{resource.group(1) if resource else '?'}{f' / {step.group(1)}' if step else ''}: {gist}"


class Sweeper:
    """One fleet for one scenario: its starting point, reference result, and trials from it."""

    def __init__(self, scenario: Scenario, fleet: Fleet, workdir: Path) -> None:
        self.scenario = scenario
        self.fleet = fleet
        self.engine = FleetEngine()
        self.engine.clock = fleet.now
        nodes = [fleet[n].node(role) for n, role in scenario.roles.items()]
        # `{subnet}` in the cluster section: the fleet's own network (a VIP must be on it).
        cluster = json.loads(json.dumps(scenario.cluster).replace("{subnet}", fleet.address(0).rsplit(".", 1)[0]))
        values, self.secret = fleet.stack_values(nodes, cluster=cluster)
        self.values = scenario.prepare(fleet, self.engine, values, self.secret)
        # The cluster's objects are restored with the hosts and the engine's state: they are one deployment.
        self.saved = (
            copy.deepcopy(self.engine.state),
            copy.deepcopy(self.engine.stack_outputs),
            self.engine.kubernetes.snapshot(),
        )
        self.start = workdir / "start"
        fleet.snapshot(self.start)
        self.expected, self.calls = self._reference()

    def close(self) -> None:
        self.engine.close()

    def _restore(self) -> None:
        self.fleet.restore(self.start)
        self.engine.state, self.engine.stack_outputs = copy.deepcopy(self.saved[0]), copy.deepcopy(self.saved[1])
        self.engine.kubernetes.restore(self.saved[2])

    def _reference(self) -> tuple[dict[str, Any], dict[str, list[str]]]:
        since = {name: log_offsets(self.fleet, name) for name in self.fleet.hosts}
        self.engine.up(self.values, self.secret).raise_error()
        calls = {name: call_lines(self.fleet, name, since[name]) for name in self.fleet.hosts}
        expected = fingerprint(self.fleet, self.engine)
        again = self.engine.up(self.values, self.secret)
        again.raise_error()
        assert again.steps == [], f"{self.scenario.name}: the reference's second up ran {again.steps}"
        return expected, calls

    def targets(self) -> list[Target]:
        """Every distinct call of each host (first occurrence), as a call fault."""
        found = []
        for host, lines in self.calls.items():
            seen: set[str] = set()
            for line in lines:
                if call_pattern(line) not in seen and re.fullmatch(self.scenario.calls, line):
                    seen.add(call_pattern(line))
                    found.append(Target(self.scenario.name, "fail", host, line))
        return found

    def trial(self, target: Target) -> Row:
        self._restore()
        host = self.fleet[target.host]
        started = time.monotonic()
        release = host.state_dir / "release"
        release.unlink(missing_ok=True)
        watcher = None
        if target.kind == "fail":
            host.set(failOnce={target.pattern: INJECTED.format(line=target.call)})
        else:
            host.set(holdOnce={target.pattern: "held.json"})
            watcher = _Interrupter(self.fleet, target)
            watcher.start()
        first = self.engine.up(self.values, self.secret)
        if watcher is not None:
            watcher.join()
        reached = target.pattern not in (host.state_dir / "settings.json").read_text()
        host.set(failOnce={}, holdOnce={})
        release.unlink(missing_ok=True)
        row = Row(target, summary(first), recovered=False)
        text = str(first.error or "")
        row.named = (
            first.error is not None
            and f"({target.host}-" in text
            and (target.kind != "fail" or "injected fault" in text)
        )
        if not reached:
            row.problem = "the call was not reached"
            row.seconds = round(time.monotonic() - started, 1)
            return row
        problems = []
        if watcher is not None and watcher.problem:
            problems.append(watcher.problem)
        elif first.error is None and not tolerated(target):
            problems.append("the fault was not noticed: the first up succeeded")
        elif first.error is not None and not row.named:
            problems.append("the first up's error names neither the host's step nor the call's message")
        # The retry runs whatever the first up said: the table shows whether the next plain up finishes.
        self.fleet.advance_clock(RECOVERY_DELAY)
        second = self.engine.up(self.values, self.secret)
        if second.error is not None:
            problems.append(f"the second up failed: {summary(second)}")
        else:
            found = differences(self.expected, fingerprint(self.fleet, self.engine))
            third = self.engine.up(self.values, self.secret)
            if found:
                problems.append("the second up left another cluster: " + "; ".join(found[:3]))
            elif third.error is not None or third.steps:
                ran = sorted({s.resource for s in third.steps})
                problems.append(f"the third up ran {ran or summary(third)}")
        row.problem = "; ".join(problems)
        row.recovered = not problems
        row.seconds = round(time.monotonic() - started, 1)
        return row


class _Interrupter(threading.Thread):
    """Waits for the held call, then restarts its host or drops its session's connection."""

    def __init__(self, fleet: Fleet, target: Target) -> None:
        super().__init__(daemon=True)
        self.fleet, self.target = fleet, target
        self.problem = ""

    def run(self) -> None:
        try:
            self._interrupt()
        except Exception as error:
            self.problem = f"the interruption failed: {error}"

    def _interrupt(self) -> None:
        host = self.fleet[self.target.host]
        held = host.state_dir / "held.json"
        deadline = time.monotonic() + 120
        while not held.exists():
            if time.monotonic() > deadline:
                self.problem = "the call was not reached within 120 s"
                return
            time.sleep(0.05)
        pid = int(json.loads(held.read_text())["pid"])
        held.unlink()
        if self.target.kind == "reboot":
            self.fleet.reboot(self.target.host)
            return
        session = _session_of(pid)
        self.fleet.drop_connection(self.target.host, pid)
        (host.state_dir / "release").touch()
        # The session's commands go on without their connection: wait until they are done, as a user retrying
        # hours later would find them.
        deadline = time.monotonic() + 120
        while session is not None and Path(f"/proc/{session}").exists():
            if time.monotonic() > deadline:
                self.problem = "the session's commands were still running 120 s after the drop"
                return
            time.sleep(0.05)


def _session_of(pid: int) -> int | None:
    """The fleet-session process (sshd's ForceCommand) that `pid` runs under."""
    current = pid
    while current > 1:
        if "fleet-session" in Path(f"/proc/{current}/cmdline").read_bytes().decode(errors="replace"):
            return current
        status = Path(f"/proc/{current}/status").read_text()
        current = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    return None


# -- running it ------------------------------------------------------------------------------------------


def _with_sweeper(scenario: str, work: Callable[[Sweeper], T]) -> T:
    with tempfile.TemporaryDirectory(prefix="mlcsweep-") as workdir, Fleet.running(SCENARIOS[scenario].hosts) as fleet:
        sweeper = Sweeper(SCENARIOS[scenario], fleet, Path(workdir))
        try:
            return work(sweeper)
        finally:
            sweeper.close()


def discover(scenario: str) -> list[Target]:
    return _with_sweeper(scenario, lambda sweeper: sweeper.targets())


def run_trials(targets: Sequence[Target]) -> list[Row]:
    """In a worker process: one fleet for the scenario of `targets`, each trial from its starting point."""
    (scenario,) = {t.scenario for t in targets}
    # A failed run leaves futures whose exceptions asyncio logs when they are collected: the rows say it better.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)

    def each(sweeper: Sweeper) -> list[Row]:
        rows = []
        for target in targets:
            rows.append(sweeper.trial(target))
            print(progress_line(rows[-1]), flush=True)
        return rows

    return _with_sweeper(scenario, each)


def progress_line(row: Row) -> str:
    mark = "ok " if row.recovered else "NOT"
    target = row.target
    problem = "" if row.recovered else f": {row.problem}"
    return f"{mark} {target.scenario}/{target.host} {target.kind}: {target.call[:70]} ({row.seconds} s){problem}"


def _parallel(targets: list[Target], workers: int) -> list[Row]:
    if not targets:  # a scenario whose steps no fault stopped has no restart or drop rows
        return []
    chunks = [targets[i::workers] for i in range(workers) if targets[i::workers]]
    # Each worker is a fresh interpreter (the program's SDK state and threads do not survive a fork).
    context = multiprocessing.get_context("spawn")
    rows: list[Row] = []
    with concurrent.futures.ProcessPoolExecutor(len(chunks), mp_context=context) as pool:
        futures = [pool.submit(_run_chunk, chunk) for chunk in chunks]
        for future in concurrent.futures.as_completed(futures):
            rows += future.result()
    order = {t: i for i, t in enumerate(targets)}
    return sorted(rows, key=lambda r: order[r.target])


def _run_chunk(chunk: list[Target]) -> list[Row]:
    rows = []
    for scenario in dict.fromkeys(t.scenario for t in chunk):
        rows += run_trials([t for t in chunk if t.scenario == scenario])
    return rows


def interruptions(rows: Sequence[Row]) -> list[Target]:
    """A restart and a connection drop in the middle of each node step the call sweep saw fail: at the
    middle one of the calls (and phases: `kubeadm init @control-plane`) whose failure that step reported."""
    by_step: dict[tuple[str, str, str], list[Row]] = {}
    for row in rows:
        if row.target.kind == "fail" and row.named and SCENARIOS[row.target.scenario].interrupted:
            by_step.setdefault((row.target.scenario, row.target.host, row.first_up.split(":")[0]), []).append(row)
    found = []
    for (scenario, host, step), step_rows in by_step.items():
        middle = step_rows[len(step_rows) // 2].target.call
        for kind in ("reboot", "drop"):
            found.append(Target(scenario, kind, host, middle, step))
    return found


def sweep(scenarios: Sequence[str], only: str | None, workers: int) -> list[Row]:
    targets = [t for s in scenarios for t in discover(s) if only is None or re.search(only, t.call)]
    rows = _parallel(targets, workers)
    return rows + _parallel(interruptions(rows), workers)


KIND_TITLES = {"fail": "the call fails once", "reboot": "the host restarts", "drop": "the SSH connection drops"}


def step_of(row: Row) -> str:
    """The node step a row's fault fell in, without the host (`prepare / swap`, `kubeadm-init`)."""
    if row.target.step:
        return row.target.step.removeprefix(f"{row.target.host}-")
    if row.first_up == "succeeded":
        return "(the first up succeeded)"
    where = row.first_up.split(": ", 1)[0]
    for host in SCENARIOS[row.target.scenario].roles:
        where = where.removeprefix(f"{host}-")
    return where


def by_step(rows: Sequence[Row], before: Sequence[Row]) -> list[str]:
    """Recovered / rows per scenario, fault and step, beside the same for `before` (an earlier tree's run)."""

    def same(row: Row) -> tuple[str, str, str, str]:
        return row.target.scenario, row.target.kind, row.target.host, row.target.pattern

    # A fault is counted under the step it falls in now, also where the earlier tree's first up missed it.
    steps = {same(row): step_of(row) for row in rows}

    def counts(group: Sequence[Row]) -> dict[tuple[str, str, str], list[int]]:
        found: dict[tuple[str, str, str], list[int]] = {}
        for row in group:
            step = steps.get(same(row)) or step_of(row)
            entry = found.setdefault((row.target.scenario, row.target.kind, step), [0, 0])
            entry[0] += row.recovered
            entry[1] += 1
        return found

    now, then = counts(rows), counts(before)
    lines = ["| scenario | fault | step | before | after |", "|---|---|---|---:|---:|"]
    for key in sorted(set(now) | set(then)):
        old = f"{then[key][0]} / {then[key][1]}" if key in then else "-"
        new = f"{now[key][0]} / {now[key][1]}" if key in now else "-"
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {old} | {new} |")
    return lines


def table(rows: Sequence[Row], seconds: float, workers: int, before: Sequence[Row] = ()) -> str:
    recovered = sum(r.recovered for r in rows)
    lines = [
        "# Fault sweep",
        "",
        "Written by `python -m tests.fleet.sweep --write docs/fault-sweep.md` (`make sweep` runs the same and fails",
        "on any row that did not recover); what each row did is in the module's docstring (tests/fleet/sweep.py).",
        "Each row starts from the same point, injects one fault, runs `up` (which must fail naming the host's step),",
        "clears the fault, moves the clock 3 h on, runs `up` (which must finish the job: the same cluster as without",
        "a fault) and `up` again (which must run nothing).",
        "",
        f"**{recovered} of {len(rows)} recovered**, {seconds:.0f} s wall with {workers} workers"
        f" ({os.cpu_count()} CPUs).",
        "",
        "| scenario | fault | recovered / rows |",
        "|---|---|---:|",
    ]
    for scenario in dict.fromkeys(r.target.scenario for r in rows):
        for kind, title in KIND_TITLES.items():
            group = [r for r in rows if r.target.scenario == scenario and r.target.kind == kind]
            if group:
                lines.append(f"| {scenario} | {title} | {sum(r.recovered for r in group)} / {len(group)} |")
    if before:
        lines += [
            "",
            "Before the fixes this sweep led to (the same sweep on the earlier scripts):"
            f" **{sum(r.recovered for r in before)} of {len(before)} recovered**. By step (where the fault falls now):",
            "",
            *by_step(rows, before),
        ]
    lines += [
        "",
        "Calls whose failure (exit 1) is tolerated on purpose (the row still has to end with the same cluster):",
        "",
    ]
    lines += [f"- `{pattern}`: {reason}" for pattern, reason in TOLERATED.items()]
    lines.append("")
    for scenario in dict.fromkeys(r.target.scenario for r in rows):
        lines += [f"## {scenario}: {SCENARIOS[scenario].title}", ""]
        lines += [
            "| host | fault | call | what the first `up` said | second `up` finished | s |",
            "|---|---|---|---|---|---:|",
        ]
        for r in (r for r in rows if r.target.scenario == scenario):
            call = r.target.call if len(r.target.call) <= 90 else r.target.call[:87] + "..."
            fault = r.target.kind + (f" ({r.target.step})" if r.target.step else "")
            finished = "yes" if r.recovered else f"**no**: {r.problem}"
            lines.append(
                f"| {r.target.host} | {fault} | `{call.replace('|', '/')}` | {r.first_up.replace('|', '/')} |"
                f" {finished} | {r.seconds} |"
            )
        lines.append("")
    return "\n".join(lines)


def _row(entry: dict[str, Any]) -> Row:
    return Row(**{**entry, "target": Target(**entry["target"])})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fleet.sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="default: all")
    parser.add_argument("--only", help="sweep only the calls matching this regular expression")
    parser.add_argument("--workers", type=int, default=(os.cpu_count() or 2) + 1)
    parser.add_argument("--write", type=Path, help="write the table to this file")
    parser.add_argument("--json", type=Path, help="write the rows as JSON to this file")
    parser.add_argument("--before", type=Path, help="rows (--json) of an earlier tree's sweep, to compare by step")
    args = parser.parse_args(argv)
    scenarios = args.scenario or list(SCENARIOS)
    started = time.monotonic()
    rows = sweep(scenarios, args.only, args.workers)
    before = [_row(entry) for entry in json.loads(args.before.read_text())] if args.before else []
    text = table(rows, time.monotonic() - started, args.workers, before)
    print(text)
    if args.write:
        args.write.write_text(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    failed = [r for r in rows if not r.recovered]
    print(
        f"sweep: {len(rows) - len(failed)} of {len(rows)} recovered in {time.monotonic() - started:.0f} s",
        file=sys.stderr,
    )
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
