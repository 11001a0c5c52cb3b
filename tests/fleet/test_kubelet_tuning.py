"""Kubelet/containerd tuning over SSH on the fleet: the env file line, re-runs, day-2 batches, the image disk.

Numbers (restarts per node, batch sizes and order) go to build/kubelet-tuning-fleet.json for the report.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from .engine import FleetEngine, FleetRun
from .hosts import Fleet, FleetHost, HostSpec
from .steps import prepared, step_output, step_outputs

pytestmark = pytest.mark.fleet

EXACT_LINE = 'KUBELET_EXTRA_ARGS="--image-gc-low-threshold 70 --image-gc-high-threshold 80"'
DEB_OTHER_LINES = "# site settings, not managed by mlcluster\nHTTPS_PROXY=http://198.18.0.1:3128\nKUBELET_EXTRA_ARGS=\n"
RPM_OTHER_LINES = "KUBELET_EXTRA_ARGS=\n# site settings, not managed by mlcluster\nNO_PROXY=10.0.0.0/8\n"
DISK = "/dev/loop7"
"""A block device node that exists on the machine; only the disk stubs ever see it (checked before use)."""
MEASURED = Path(__file__).resolve().parents[2] / "build" / "kubelet-tuning-fleet.json"


def record(key: str, value: Any) -> None:
    MEASURED.parent.mkdir(exist_ok=True)
    data = json.loads(MEASURED.read_text()) if MEASURED.exists() else {}
    data[key] = value
    MEASURED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def restarts(host: FleetHost, unit: str) -> int:
    return sum(1 for c in host.calls("systemctl") if c["argv"] == ["restart", unit] and c["rc"] == 0)


def restart_counts(hosts: Fleet, unit: str) -> dict[str, int]:
    return {name: restarts(host, unit) for name, host in hosts.hosts.items()}


def check_batches(run: FleetRun, batches: list[list[str]]) -> dict[str, Any]:
    """Each batch's kubelet commands start only after every command of the previous batch ended; returns
    the measured timeline (seconds from the first start) and the peak number of restarts at once."""
    steps = {n: run.step(f"{n}-kubelet") for batch in batches for n in batch}
    for earlier, later in itertools.pairwise(batches):
        last_end = max(steps[n].ended for n in earlier)
        first_start = min(steps[n].started for n in later)
        assert first_start >= last_end, f"{later} started before {earlier} finished"
    t0 = min(s.started for s in steps.values())
    events = sorted([(s.started, 1) for s in steps.values()] + [(s.ended, -1) for s in steps.values()])
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    timeline = {n: [round(s.started - t0, 2), round(s.ended - t0, 2)] for n, s in steps.items()}
    return {"batches": batches, "peak concurrent restart steps": peak, "timeline": timeline}


def up(engine: FleetEngine, values: dict[str, Any], secret: list[str]) -> FleetRun:
    run = engine.up(values, secret)
    run.raise_error()
    return run


def test_flags_line_on_deb_and_rpm_rerun_changes_nothing_day2_restarts_once_per_node_in_batches(
    fleet, fleet_engine
) -> None:
    hosts = fleet(
        HostSpec("cp-1", os="ubuntu-24.04"),
        HostSpec("w-1", os="debian-12"),
        HostSpec("w-2", os="rocky-9", containerd="2.1.4"),
        HostSpec("w-3", os="ubuntu-22.04"),
        HostSpec("w-4", os="almalinux-9", containerd="2.1.4"),
    )
    workers = ["w-1", "w-2", "w-3", "w-4"]
    for name in ("cp-1", "w-1", "w-3"):
        hosts[name].run(f"mkdir -p /etc/default && cat >/etc/default/kubelet <<'EOF'\n{DEB_OTHER_LINES}EOF")
    for name in ("w-2", "w-4"):
        hosts[name].run(f"mkdir -p /etc/sysconfig && cat >/etc/sysconfig/kubelet <<'EOF'\n{RPM_OTHER_LINES}EOF")
    nodes = [hosts["cp-1"].node("control-plane"), *(hosts[w].node() for w in workers)]
    # The classic way: the settings travel as flags in KUBELET_EXTRA_ARGS (kubelet.applyAs: flags).
    values, secret = hosts.stack_values(nodes, kubelet={"applyAs": "flags"})

    up(fleet_engine, values, secret)
    env_file = {"cp-1": "/etc/default/kubelet", "w-1": "/etc/default/kubelet", "w-3": "/etc/default/kubelet"}
    env_file |= {"w-2": "/etc/sysconfig/kubelet", "w-4": "/etc/sysconfig/kubelet"}
    for name, path in env_file.items():
        other = DEB_OTHER_LINES if path.startswith("/etc/default") else RPM_OTHER_LINES
        assert hosts[name].read(path) == other.replace("KUBELET_EXTRA_ARGS=\n", EXACT_LINE + "\n"), name
        assert not hosts[name].exists("/etc/kubernetes/kubelet.conf.d/50-mlcluster-tuning.conf")
    assert not hosts["w-2"].exists("/etc/default/kubelet") and not hosts["w-1"].exists("/etc/sysconfig/kubelet")
    # Day 1: the settings are in place before kubeadm starts the kubelet; nothing to restart.
    day1 = restart_counts(hosts, "kubelet")
    assert day1 == dict.fromkeys(env_file, 0), day1

    # The same program with its state lost (a fresh engine runs every step; with the state nothing would run).
    state_lost = FleetEngine()
    try:
        second = up(state_lost, values, secret)
    finally:
        state_lost.close()
    rerun = restart_counts(hosts, "kubelet")
    assert rerun == day1
    for name in env_file:
        kubelet = step_outputs(second.step(f"{name}-kubelet"))
        assert sorted(kubelet) == ["kubelet-restart", "upgrade-kubelet"], kubelet
        for out in (step_output(second, name, "kubelet-tuning"), *kubelet.values()):
            assert out and all(line.startswith("ok: ") for line in out.splitlines()), out

    containerd_before = restart_counts(hosts, "containerd")
    values["kubelet"] = {"applyAs": "flags", "imageGCLowThresholdPercent": 65}
    third = up(fleet_engine, values, secret)
    after = restart_counts(hosts, "kubelet")
    assert {n: after[n] - day1[n] for n in env_file} == dict.fromkeys(env_file, 1)
    assert restart_counts(hosts, "containerd") == containerd_before
    assert 'KUBELET_EXTRA_ARGS="--image-gc-low-threshold 65 --image-gc-high-threshold 80"' in hosts["w-2"].read(
        "/etc/sysconfig/kubelet"
    )
    # Default: one control plane at a time, then 25% of the 4 workers = 1 at a time.
    measured = check_batches(third, [["cp-1"], ["w-1"], ["w-2"], ["w-3"], ["w-4"]])
    assert measured["peak concurrent restart steps"] == 1
    record(
        "flags (applyAs): kubelet restarts per node (day 1, re-run, 70->65)",
        {n: [day1[n], rerun[n] - day1[n], after[n] - rerun[n]] for n in env_file},
    )
    record("flags (applyAs): restart batches on 70->65", measured)


def test_drop_in_from_1_30_day2_batches_of_half_the_workers_and_containerd_1_6_warns(fleet, fleet_engine) -> None:
    hosts = fleet(
        HostSpec("cp-1"),
        HostSpec("w-1", containerd="2.1.4", os="rocky-9"),
        HostSpec("w-2"),
        HostSpec("w-3", os="ubuntu-22.04", containerd="1.6.38"),
        HostSpec("w-4"),
    )
    workers = ["w-1", "w-2", "w-3", "w-4"]
    nodes = [hosts["cp-1"].node("control-plane"), *(hosts[w].node() for w in workers)]
    values, secret = hosts.stack_values(nodes, kubelet={"restart": {"maxUnavailableWorkers": "50%"}})
    up(fleet_engine, values, secret)
    for name in ("cp-1", *workers):
        drop_in = hosts[name].read("/etc/kubernetes/kubelet.conf.d/50-mlcluster-tuning.conf")
        assert "imageGCLowThresholdPercent: 70" in drop_in and "imageGCHighThresholdPercent: 80" in drop_in
    assert hosts["w-2"].read("/etc/default/kubelet") == (
        'KUBELET_EXTRA_ARGS="--config-dir=/etc/kubernetes/kubelet.conf.d"\n'
    )
    assert "image_pull_progress_timeout" not in hosts["w-3"].read("/etc/containerd/config.toml")
    assert '[plugins."io.containerd.cri.v1.images"]' in hosts["w-1"].read("/etc/containerd/config.toml")
    day1 = restart_counts(hosts, "kubelet")

    values["kubelet"]["imageGCLowThresholdPercent"] = 65
    run = up(fleet_engine, values, secret)
    warning = prepared(run, "w-3").stderr
    assert "warning: containerd 1.6.38 has no image_pull_progress_timeout" in warning
    after = restart_counts(hosts, "kubelet")
    assert {n: after[n] - day1[n] for n in after} == dict.fromkeys(after, 1)
    assert "imageGCLowThresholdPercent: 65" in hosts["w-4"].read(
        "/etc/kubernetes/kubelet.conf.d/50-mlcluster-tuning.conf"
    )
    measured = check_batches(run, [["cp-1"], ["w-1", "w-2"], ["w-3", "w-4"]])
    assert measured["peak concurrent restart steps"] <= 2
    record("drop-in 1.34: kubelet restarts per node on 70->65", {n: after[n] - day1[n] for n in after})
    record("drop-in 1.34 (maxUnavailableWorkers 50%): restart batches on 70->65", measured)


def test_image_disk_formatted_only_when_blank_mounted_by_uuid_and_used_as_containerd_root(fleet, fleet_engine) -> None:
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"), HostSpec("w-2", os="rocky-9"))
    hosts["w-2"].set(disks={DISK: {"type": "ext4"}})
    for name in ("w-1", "w-2"):
        # The stubs, never the real tools, must answer for the device.
        found = hosts[name].run("command -v blkid mkfs mount mountpoint").stdout.split()
        assert found == [f"/usr/local/sbin/{t}" for t in ("blkid", "mkfs", "mount", "mountpoint")], found
    disk = {"device": DISK, "filesystem": "xfs", "mountPoint": "/var/lib/containerd"}
    nodes = [hosts["cp-1"].node("control-plane"), hosts["w-1"].node(imageDisk=disk), hosts["w-2"].node(imageDisk=disk)]
    values, secret = hosts.stack_values(nodes)
    first = up(fleet_engine, values, secret)

    assert [c["argv"] for c in hosts["w-1"].calls("mkfs")] == [["-t", "xfs", DISK]]
    assert hosts["w-2"].calls("mkfs") == []
    for name, fs_type in (("w-1", "xfs"), ("w-2", "ext4")):
        host = hosts[name]
        uuid = host.state()["disks"][DISK]["uuid"]
        assert f"UUID={uuid} /var/lib/containerd {fs_type} defaults,nofail 0 2" in host.read("/etc/fstab")
        assert host.state()["mounts"] == {"/var/lib/containerd": DISK}
        assert 'root = "/var/lib/containerd"' in host.read("/etc/containerd/config.toml")
        unit = host.read("/etc/systemd/system/containerd.service.d/50-mlcluster-image-disk.conf")
        assert "RequiresMountsFor=/var/lib/containerd" in unit
        # Inside the node's one prepare command, the disk is ready before containerd is installed.
        order = list(step_outputs(prepared(first, name)))
        assert order.index("image-disk") < order.index("containerd"), order

    up(fleet_engine, values, secret)
    assert len(hosts["w-1"].calls("mkfs")) == 1 and hosts["w-2"].calls("mkfs") == []
    assert [len(hosts[n].calls("mount")) for n in ("w-1", "w-2")] == [1, 1]
    record(
        "image disk: mkfs calls after two runs",
        {"w-1 (blank)": len(hosts["w-1"].calls("mkfs")), "w-2 (ext4)": len(hosts["w-2"].calls("mkfs"))},
    )
