"""Kubernetes minor upgrades, etcd snapshots and resuming, on the SSH fleet and its engine with Pulumi's deployment
rules (tests/fleet/engine.py: only changed resources run, the first failure stops new steps).

The stubs hold the versions: kubeadm `upgrade plan|apply|node` enforce kubeadm's version policy against the
version the fleet "API" holds, the kubelet refuses to start newer than an API server, and every version change is
appended to the cluster's history, which the tests check against the version-skew policy entry by entry.
"""

from __future__ import annotations

import copy
import re
import threading
import time
from typing import Any

import pytest

from components.config.spec import DEFAULT_KUBERNETES_VERSION as DEFAULT
from components.render.etcd_snapshots import timer_step
from components.render.upgrade import CONTROL_PLANE_COMPONENTS, Versions, skew_problems

from ..conftest import load_spec
from .engine import FleetEngine, FleetRun
from .hosts import NEXT_MINOR_VERSION as NEXT
from .hosts import PREVIOUS_MINOR_VERSION as PREVIOUS
from .hosts import Fleet, FleetHost, HostSpec
from .measure import MEASUREMENTS
from .steps import step_outputs

pytestmark = pytest.mark.fleet

WORKERS = ("w-1", "w-2", "w-3")
UPGRADE_CALLS = {
    ("kubeadm", "upgrade"),
    ("apt-get", "install"),
    ("dnf", "install"),
    ("systemctl", "restart"),
    ("kubectl", "cordon"),
    ("kubectl", "drain"),
    ("kubectl", "uncordon"),
    ("crictl", "exec"),
}
# A real upgrade takes seconds per operation; with stubs it takes milliseconds, which would hide the order.
SLOW = {"kubeadm upgrade": 1.0, "apt-get install": 0.5, "dnf install": 0.5, "kubectl drain": 0.5}


def versions_of(entry: dict[str, Any]) -> Versions:
    """A history entry of the fleet API as the skew model's (node, component) -> (major, minor)."""
    versions: Versions = {}
    for node, running in entry["nodes"].items():
        if "controlPlaneVersion" in running:
            minor = tuple(int(p) for p in running["controlPlaneVersion"].split(".")[:2])
            versions |= {(node, c): (minor[0], minor[1]) for c in CONTROL_PLANE_COMPONENTS}
        if "kubeletVersion" in running:
            kubelet = tuple(int(p) for p in running["kubeletVersion"].split(".")[:2])
            versions[(node, "kubelet")] = (kubelet[0], kubelet[1])
    return versions


def assert_skew_never_violated(cluster: dict[str, Any]) -> list[str]:
    """Every recorded state of the cluster keeps the version-skew policy; returns the history as table rows."""
    rows = []
    for entry in cluster["history"]:
        problems = skew_problems(versions_of(entry))
        assert problems == [], f"after {entry['event']}: {problems}"
        running = "  ".join(
            f"{n}:cp={v.get('controlPlaneVersion', '-')},kubelet={v.get('kubeletVersion', '-')}"
            for n, v in entry["nodes"].items()
        )
        rows.append(f"{entry['event']:<34} api={entry['version']}  {running}")
    return rows


def upgrade_calls(hosts: Fleet, since: float) -> list[tuple[float, str, str]]:
    """(start, host, call) of every upgrade-relevant stub call after `since`, in time order."""
    found = []
    for name, host in hosts.hosts.items():
        for call in host.calls():
            if call["t0"] >= since and (call["tool"], (call["argv"] or [""])[0]) in UPGRADE_CALLS and call["rc"] == 0:
                found.append((call["t0"], name, " ".join([call["tool"], *call["argv"]])[:90]))
    return sorted(found)


def workers_phase_seconds(log: list[tuple[float, str, str]]) -> float:
    """From the first worker's drain to the last worker's uncordon (their start times, from the call log)."""
    drains = [t for t, h, call in log if h == "cp-1" and any(call.startswith(f"kubectl drain {w}") for w in WORKERS)]
    uncordons = [
        t for t, h, call in log if h == "cp-1" and any(call.startswith(f"kubectl uncordon {w}") for w in WORKERS)
    ]
    assert len(drains) == len(uncordons) == len(WORKERS), log
    return max(uncordons) - min(drains)


def first_index(log: list[tuple[float, str, str]], host: str, prefix: str) -> int:
    return next(i for i, (_, h, call) in enumerate(log) if h == host and call.startswith(prefix))


def packages(host: FleetHost) -> dict[str, str]:
    state = host.state()
    return {p: state["packages"][p].split("-")[0] for p in ("kubeadm", "kubelet", "kubectl")}


def upgrade(engine: FleetEngine, values: dict[str, Any], secret: list[str], version: str, **restart: Any) -> FleetRun:
    values = copy.deepcopy(values)
    values["kubernetesVersion"] = version
    if restart:
        values["kubelet"] = {"restart": restart}
    return engine.up(values, secret)


def one_plus_three(fleet: Any) -> tuple[Fleet, dict[str, Any], list[str]]:
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1", os="ubuntu-22.04"), HostSpec("w-2", os="rocky-9"), HostSpec("w-3"))
    nodes = [hosts["cp-1"].node("control-plane"), *(hosts[w].node() for w in WORKERS)]
    values, secret = hosts.stack_values(nodes, kubernetesVersion=PREVIOUS)
    return hosts, values, secret


def test_one_plus_three_upgrade_in_order_never_skewed_refuses_a_skipped_minor(fleet, fleet_engine) -> None:
    hosts, values, secret = one_plus_three(fleet)
    fleet_engine.up(values, secret).raise_error()
    (cluster,) = hosts.clusters()
    assert cluster["version"] == PREVIOUS

    # 1.34 -> 1.36 skips a minor: refused by the program, naming the key, before any node is touched: `up`
    # (as with --skip-preview) runs no step at all, not even a node's preparation (which would switch its
    # package repository to the 1.36 one).
    calls_before_skip = {n: len(hosts[n].calls()) for n in hosts.hosts}
    skipped = upgrade(fleet_engine, values, secret, NEXT)
    assert skipped.error is not None
    message = str(skipped.error)
    assert f"mlcluster:kubernetesVersion: {NEXT} skips a minor: the cluster runs {PREVIOUS}" in message
    assert skipped.steps == [], [s.resource for s in skipped.steps]
    assert {n: len(hosts[n].calls()) for n in hosts.hosts} == calls_before_skip
    assert all(packages(hosts[n])["kubelet"] == PREVIOUS for n in hosts.hosts)

    # What a reviewer sees: the preview updates the upgrade steps (and kube-packages' repository), runs nothing.
    calls_before = {n: len(hosts[n].calls()) for n in hosts.hosts}
    preview = fleet_engine.preview({**values, "kubernetesVersion": DEFAULT}, secret)
    preview.raise_error()
    updated = preview.with_operation("update")
    assert [n for n in updated if "upgrade" in n or "etcd-snapshot" in n or n.endswith("-kubelet")] == sorted(
        f"{first}-{step}"
        for first, step in [
            ("cp-1", "upgrade-preflight"),
            ("cp-1", "etcd-snapshot"),
            ("cp-1", "upgrade-control-plane"),
            ("cp-1", "kubelet"),
            *[("cp-1", f"upgrade-{verb}-{n}") for verb in ("drain", "uncordon") for n in ("cp-1", "w-1", "w-2", "w-3")],
            *[(w, "kubelet") for w in WORKERS],
        ]
    )
    assert {n: len(hosts[n].calls()) for n in hosts.hosts} == calls_before
    MEASUREMENTS[f"upgrade 1cp+3w preview {PREVIOUS}->{DEFAULT}: resources updated"] = updated

    for name in hosts.hosts:
        hosts[name].set(latencies=SLOW)
    started = time.time()
    # All three workers in one batch: the wall-time comparison below runs the next minor one node at a time.
    run = upgrade(fleet_engine, values, secret, DEFAULT, maxUnavailableWorkers="100%")
    run.raise_error()
    (cluster,) = hosts.clusters()
    assert cluster["version"] == DEFAULT
    for name in hosts.hosts:
        assert packages(hosts[name]) == dict.fromkeys(("kubeadm", "kubelet", "kubectl"), DEFAULT), name
        assert cluster["nodes"][name]["kubeletVersion"] == DEFAULT and not cluster["nodes"][name]["unschedulable"]
    for name in ("cp-1", "w-1", "w-3"):  # DEB: held again (RPM: the repository excludes them)
        assert sorted(hosts[name].state()["held"]) == ["kubeadm", "kubectl", "kubelet"]

    log = upgrade_calls(hosts, started)
    # The order: snapshot, kubeadm upgrade apply, the first control plane's kubelet, then the workers.
    snapshot = first_index(log, "cp-1", "crictl exec")
    apply = first_index(log, "cp-1", f"kubeadm upgrade apply v{DEFAULT}")
    cp_kubelet = first_index(log, "cp-1", "systemctl restart kubelet")
    assert snapshot < apply < cp_kubelet
    # kubeadm's guide: the new kubeadm first, then its plan for the target, then apply.
    new_kubeadm = first_index(log, "cp-1", f"apt-get install -y -q --allow-change-held-packages kubeadm={DEFAULT}")
    assert new_kubeadm < first_index(log, "cp-1", f"kubeadm upgrade plan v{DEFAULT}") < apply
    for worker in WORKERS:
        drain = first_index(log, "cp-1", f"kubectl drain {worker}")
        node = first_index(log, worker, "kubeadm upgrade node")
        kubelet = first_index(log, worker, "systemctl restart kubelet")
        uncordon = first_index(log, "cp-1", f"kubectl uncordon {worker}")
        assert cp_kubelet < drain < node < kubelet < uncordon, worker
    rows = assert_skew_never_violated(cluster)
    MEASUREMENTS[f"upgrade 1cp+3w {PREVIOUS}->{DEFAULT} call log"] = [
        f"{t - started:6.2f}s {h:<5} {c}" for t, h, c in log
    ]
    MEASUREMENTS["upgrade 1cp+3w versions after each step"] = rows
    parallel, parallel_workers = run.wall_seconds, workers_phase_seconds(log)

    # The pre-upgrade snapshot exists, verified, on the first control plane.
    snapshots = hosts["cp-1"].state()["snapshots"]
    assert len(snapshots) == 1 and "etcd-pre-upgrade-" in snapshots[0]["path"]
    assert hosts["cp-1"].exists("/var/lib/mlcluster/etcd-snapshots/" + snapshots[0]["path"].rsplit("/", 1)[1])

    # The same upgrade, one node at a time.
    serial_started = time.time()
    serial_run = upgrade(fleet_engine, values, secret, NEXT, maxUnavailableWorkers="1")
    serial_run.raise_error()
    (cluster,) = hosts.clusters()
    assert cluster["version"] == NEXT
    assert_skew_never_violated(cluster)
    serial_workers = workers_phase_seconds(upgrade_calls(hosts, serial_started))
    MEASUREMENTS["upgrade 1cp+3w wall seconds: workers in one batch vs one at a time"] = {
        "one batch (maxUnavailableWorkers 100%)": round(parallel, 2),
        "one at a time (maxUnavailableWorkers 1)": round(serial_run.wall_seconds, 2),
        "workers' phase, one batch": round(parallel_workers, 2),
        "workers' phase, one at a time": round(serial_workers, 2),
    }
    # Compared over the workers' phase (first drain to last uncordon), where the batch size acts: the whole run
    # also holds the control plane's steps, whose time on a shared CPU varies more than the batches save.
    assert serial_workers > parallel_workers


def test_three_plus_three_resumes_after_a_worker_fails_and_waits_for_a_running_gpu_job(fleet, fleet_engine) -> None:
    hosts = fleet(
        HostSpec("cp-1"),
        HostSpec("cp-2", os="rocky-9"),
        HostSpec("cp-3", os="debian-12", user="deploy"),
        HostSpec("w-1"),
        HostSpec("w-2", os="almalinux-10"),
        HostSpec("w-3", os="ubuntu-22.04"),
    )
    nodes = [hosts[n].node("control-plane") for n in ("cp-1", "cp-2", "cp-3")] + [hosts[w].node() for w in WORKERS]
    values, secret = hosts.stack_values(
        nodes, cluster={"controlPlaneEndpoint": "k8s-api.fleet.test:6443"}, kubernetesVersion=PREVIOUS
    )
    fleet_engine.up(values, secret).raise_error()

    # A running Kueue-admitted job on w-1 finishes 3 s after the upgrade cordons w-1 (so the drain step must wait
    # for it); w-2's `kubeadm upgrade node` fails.
    job_done: list[float] = []

    def job_finishes() -> None:
        deadline = time.time() + 120
        while not hosts.clusters()[0]["nodes"]["w-1"]["unschedulable"] and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(3)
        with hosts.cluster_lock() as cluster:
            del cluster["pods"]["train-0"]
        job_done.append(time.time())

    with hosts.cluster_lock() as cluster:
        cluster["pods"] = {"train-0": {"node": "w-1", "labels": {"kueue.x-k8s.io/podset": "main"}}}
    hosts["w-2"].set(fail={"kubeadm upgrade node": "[upgrade] FATAL: stub: disk full"})
    finisher = threading.Thread(target=job_finishes)
    finisher.start()
    first = upgrade(fleet_engine, values, secret, DEFAULT, maxUnavailableWorkers="1")
    finisher.join()
    assert first.error is not None and "w-2" in str(first.error)
    (cluster,) = hosts.clusters()
    # The job was waited for, not evicted, and only then was w-1 drained.
    drains = [c for c in hosts["cp-1"].calls("kubectl") if c["argv"][:2] == ["drain", "w-1"]]
    assert len(drains) == 1 and drains[0]["t0"] >= job_done[0]
    assert "train-0" not in cluster.get("evicted", [])
    # The wait said what it waited for (and, every PROGRESS_SECONDS, says it again: bytes on the session).
    waited = first.step("cp-1-upgrade-drain-w-1").stdout or ""
    assert re.search(r"waiting: w-1 runs 1 Kueue-admitted job\(s\): pod/train-0 \(\d+s of 7200s\)", waited), waited
    # Stopped at w-2: control planes and w-1 done, w-2 cordoned at the old kubelet, w-3 untouched.
    assert {n: cluster["nodes"][n]["kubeletVersion"] for n in cluster["nodes"]} == {
        "cp-1": DEFAULT, "cp-2": DEFAULT, "cp-3": DEFAULT, "w-1": DEFAULT, "w-2": PREVIOUS, "w-3": PREVIOUS,
    }  # fmt: skip
    assert cluster["nodes"]["w-2"]["unschedulable"] and not cluster["nodes"]["w-3"]["unschedulable"]
    stopped = dict(cluster["nodes"])

    hosts["w-2"].set(fail={})
    resumed_at = time.time()
    second = upgrade(fleet_engine, values, secret, DEFAULT, maxUnavailableWorkers="1")
    second.raise_error()
    (cluster,) = hosts.clusters()
    assert all(node["kubeletVersion"] == DEFAULT and not node["unschedulable"] for node in cluster["nodes"].values())
    # Resumed: what was done is not done again (one apply, no second upgrade of cp-*/w-1), then w-2 and w-3.
    assert len([c for c in hosts["cp-1"].calls("kubeadm") if c["argv"][:2] == ["upgrade", "apply"]]) == 1
    for name in ("cp-1", "cp-2", "cp-3", "w-1"):
        assert [c for c in hosts[name].calls("kubeadm") if c["t0"] >= resumed_at] == [], name
    log = upgrade_calls(hosts, resumed_at)
    assert first_index(log, "w-2", "systemctl restart kubelet") < first_index(log, "cp-1", "kubectl drain w-3")
    rows = assert_skew_never_violated(cluster)
    MEASUREMENTS["upgrade 3cp+3w resume: stopped at"] = {n: v["kubeletVersion"] for n, v in stopped.items()}
    MEASUREMENTS["upgrade 3cp+3w resume: calls of the resuming run"] = [
        f"{t - resumed_at:6.2f}s {h:<5} {c}" for t, h, c in log
    ]
    MEASUREMENTS["upgrade 3cp+3w versions after each step"] = rows


def test_snapshot_timer_and_retention(fleet, fleet_engine) -> None:
    hosts = fleet(HostSpec("cp-1"))
    values, secret = hosts.stack_values(
        [hosts["cp-1"].node("control-plane")], etcdSnapshots={"retain": 2, "copyTo": "/var/backups/etcd"}
    )
    run = fleet_engine.up(values, secret)
    run.raise_error()
    assert "mlcluster-etcd-snapshot.timer enabled" in (run.step("cp-1-etcd-snapshot-timer").stdout or "")
    assert "OnCalendar=daily" in hosts["cp-1"].read("/etc/systemd/system/mlcluster-etcd-snapshot.timer")
    assert hosts["cp-1"].state()["services"]["mlcluster-etcd-snapshot.timer"]["active"]
    # The restore procedure is installed beside it, every control plane named, and refuses to guess a snapshot.
    restore = hosts["cp-1"].run("bash /var/lib/mlcluster/etcd-restore.sh", check=False)
    assert restore.returncode == 1 and "no snapshot given (--snapshot FILE): nothing was changed" in restore.stderr
    assert f"INITIAL_CLUSTER=cp-1=https://{hosts['cp-1'].address}:2380" in hosts["cp-1"].read(
        "/var/lib/mlcluster/etcd-restore.sh"
    )
    # What the timer runs: three scheduled snapshots, each verified, two kept in both places.
    for _ in range(3):
        out = hosts["cp-1"].run("bash /var/lib/mlcluster/etcd-snapshot.sh").stdout
        assert "changed: etcd snapshot /var/lib/mlcluster/etcd-snapshots/etcd-scheduled-" in out
        time.sleep(1.1)  # the name carries the time to the second
        # Verified on the host by the sha256 etcd appended; nothing ran in the container but etcdctl (the image has
        # no etcdutl).
        assert re.search(r"\(sha256 [0-9a-f]{16}, \d+ bytes\)", out), out
    assert {c["argv"][2] for c in hosts["cp-1"].calls("crictl") if c["argv"][0] == "exec"} == {"etcdctl"}
    for directory in ("/var/lib/mlcluster/etcd-snapshots", "/var/backups/etcd"):
        kept = hosts["cp-1"].run(f"ls {directory}").stdout.split()
        assert len(kept) == 2 and all(k.startswith("etcd-scheduled-") for k in kept), kept
        assert hosts["cp-1"].run(f"stat -c %a {directory}").stdout.strip() == "700"
    # A damaged snapshot (a bit flipped on its way to the disk) fails the timer's run, names the damage, and leaves
    # nothing in etcd's data directory or among the kept snapshots.
    hosts["cp-1"].set(damagedSnapshots=True)
    damaged = hosts["cp-1"].run("bash /var/lib/mlcluster/etcd-snapshot.sh", check=False)
    assert damaged.returncode != 0 and "do not match the sha256 etcd appended: damaged" in damaged.stderr
    assert not [f for f in hosts["cp-1"].run("ls /var/lib/etcd").stdout.split() if f.startswith("etcd-")]
    assert len(hosts["cp-1"].run("ls /var/lib/mlcluster/etcd-snapshots").stdout.split()) == 2
    hosts["cp-1"].set(damagedSnapshots=False)
    # The timer step again (as after lost state or a replacement): it changes nothing.
    step = timer_step(load_spec(values, secret).etcd_snapshots, load_spec(values, secret).control_planes)
    assert step.script is not None
    again = hosts["cp-1"].run(step.script).stdout.splitlines()
    assert again and all(line.startswith("ok: ") for line in again), again


def test_a_gpu_job_that_outlasts_the_wait_stops_the_upgrade_with_the_node_cordoned(fleet, fleet_engine) -> None:
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"))
    values, secret = hosts.stack_values(
        [hosts["cp-1"].node("control-plane"), hosts["w-1"].node()], kubernetesVersion=PREVIOUS
    )
    fleet_engine.up(values, secret).raise_error()
    with hosts.cluster_lock() as cluster:
        cluster["pods"] = {"train-0": {"node": "w-1", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}}}
    values = {**values, "upgrade": {"gpuJobsTimeout": "3s"}}
    run = upgrade(fleet_engine, values, secret, DEFAULT)
    assert run.error is not None
    assert (
        "w-1 still runs Kueue-admitted job(s) after 3s: pod/train-0 - the upgrade stops here with w-1 cordoned"
        in str(run.error)
    )
    (cluster,) = hosts.clusters()
    assert cluster["pods"] == {"train-0": {"node": "w-1", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}}}
    assert cluster["nodes"]["w-1"]["unschedulable"] and cluster["nodes"]["w-1"]["kubeletVersion"] == PREVIOUS
    assert not [c for c in hosts["cp-1"].calls("kubectl") if c["argv"][:2] == ["drain", "w-1"]]

    # Allowed to evict: the job's pod goes with the drain and the upgrade finishes.
    values["upgrade"] = {"gpuJobs": "evict"}
    upgrade(fleet_engine, values, secret, DEFAULT).raise_error()
    (cluster,) = hosts.clusters()
    assert cluster["evicted"] == ["train-0"] and cluster["nodes"]["w-1"]["kubeletVersion"] == DEFAULT
    assert not cluster["nodes"]["w-1"]["unschedulable"]


@pytest.mark.parametrize(
    ("lacking", "family", "os_name"),
    [("w-1", "rpm", "rocky 9"), ("w-2", "deb", "ubuntu 22.04")],
    ids=["rpm-family-lacks-kubelet", "deb-family-lacks-kubelet"],
)
def test_a_family_whose_repository_lacks_the_target_stops_the_upgrade_before_anything_moves(
    fleet, fleet_engine, lacking, family, os_name
) -> None:
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1", os="rocky-9"), HostSpec("w-2", os="ubuntu-22.04"))
    nodes = [hosts["cp-1"].node("control-plane"), hosts["w-1"].node(), hosts["w-2"].node()]
    values, secret = hosts.stack_values(nodes, kubernetesVersion=PREVIOUS)
    fleet_engine.up(values, secret).raise_error()
    # The first control plane's own repository (Debian) offers the target version: only the other family's does not.
    hosts[lacking].set(repoLacks=[f"kubelet-{DEFAULT}"])
    since = time.time()
    run = upgrade(fleet_engine, values, secret, DEFAULT)
    assert run.error is not None
    assert (
        f"mlcluster:kubernetesVersion: kubelet {DEFAULT} is not offered by the configured {family} repository of"
        f" {lacking} ({os_name}"
    ) in str(run.error)
    (cluster,) = hosts.clusters()
    assert cluster["version"] == PREVIOUS
    assert {n: v["kubeletVersion"] for n, v in cluster["nodes"].items()} == dict.fromkeys(hosts.hosts, PREVIOUS)
    assert all(packages(hosts[n]) == dict.fromkeys(("kubeadm", "kubelet", "kubectl"), PREVIOUS) for n in hosts.hosts)
    # Nothing of the upgrade ran: no kubeadm upgrade (not even its plan), no cordon or drain, no snapshot.
    assert upgrade_calls(hosts, since) == []
    assert not [c for c in hosts["cp-1"].calls("kubeadm") if c["t0"] >= since and c["argv"][:1] == ["upgrade"]]
    assert (
        f"ok: kubeadm kubelet kubectl {DEFAULT} offered by the deb repository"
        in (step_outputs(run.step("cp-1-prepare", "update"))["kube-packages"])
    )


def test_batch_steps_renamed_after_their_nodes_keep_their_resources_through_the_alias(
    fleet, fleet_engine, monkeypatch
) -> None:
    """A batch's drain and uncordon were named after its first node only; they now name its first and last. A stack
    deployed with the old names runs nothing, replaces nothing and deletes nothing for the rename (the alias)."""
    from components.render import upgrade as upgrade_render

    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"), HostSpec("w-2"))
    nodes = [hosts["cp-1"].node("control-plane"), hosts["w-1"].node(), hosts["w-2"].node()]
    values, secret = hosts.stack_values(nodes, kubelet={"restart": {"maxUnavailableWorkers": "100%"}})

    def first_node_only(step: Any) -> str:
        suffix = f"-{step.targets[0]}" if step.step.name in upgrade_render.BATCH_STEPS else ""
        return f"{step.node.name}-{step.step.name}{suffix}"

    with monkeypatch.context() as before:
        before.setattr(upgrade_render.UpgradeStep, "resource_name", property(first_node_only))
        before.setattr(upgrade_render.UpgradeStep, "previous_name", property(lambda step: None))
        fleet_engine.up(values, secret).raise_error()
    names = {urn.rsplit("::", 1)[-1] for urn in fleet_engine.state}
    assert {"cp-1-upgrade-drain-w-1", "cp-1-upgrade-uncordon-w-1"} <= names

    preview = fleet_engine.preview(values, secret)
    preview.raise_error()
    assert preview.operations["cp-1-upgrade-drain-w-1..w-2"] == "same", preview.operations
    assert not [n for n, op in preview.operations.items() if op in ("create", "replace", "delete")]
    run = fleet_engine.up(values, secret)
    run.raise_error()
    assert run.steps == [] and run.deleted == []
    names = {urn.rsplit("::", 1)[-1] for urn in fleet_engine.state}
    assert {"cp-1-upgrade-drain-w-1..w-2", "cp-1-upgrade-uncordon-w-1..w-2"} <= names
    assert "cp-1-upgrade-drain-w-1" not in names
