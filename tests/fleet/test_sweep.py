"""The fault sweep's own machinery: a restart resets what a real restart resets, a dropped connection reads as
pulumi-command's error, and the sweep catches the swap check's old form (its negative control)."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.render import shell

from ..test_script_checks import OLD_SWAP_CHECK
from .engine import FleetEngine, failure_text
from .hosts import HostSpec
from .sweep import SCENARIOS, Sweeper, Target

pytestmark = pytest.mark.fleet


def test_a_restart_keeps_the_disk_and_resets_what_lived_in_memory(fleet) -> None:
    hosts = fleet(HostSpec("n-1", swap=True))
    host = hosts["n-1"]
    host.run(
        "mkdir -p /etc/modules-load.d /etc/sysctl.d /etc/systemd/system"
        " && echo br_netfilter > /etc/modules-load.d/k8s.conf"
        " && echo 'net.ipv4.ip_forward = 1' > /etc/sysctl.d/k8s.conf"
        " && sed -i 's|^/swap.img|# off: /swap.img|' /etc/fstab"
        " && touch /etc/systemd/system/kept.service /etc/systemd/system/gone.service"
        " && mkdir /sys/module/overlay /run/marker"
    )
    state = json.loads((host.state_dir / "db.json").read_text())
    state["services"] = {
        "kept": {"enabled": True, "active": False, "starts": 0, "restarts": 0},
        "gone": {"enabled": False, "active": True, "starts": 1, "restarts": 0},
    }
    (host.state_dir / "db.json").write_text(json.dumps(state))
    sessions_before = len(host.sessions())

    hosts.reboot("n-1")

    after = host.state()
    assert after["swap"] is False  # the fstab line is commented out: no swap at boot
    assert after["sysctl"]["net.ipv4.ip_forward"] == "1"
    assert sorted(host.run("ls /sys/module").stdout.split()) == ["br_netfilter"]  # overlay was loaded by hand
    assert {name: s["active"] for name, s in after["services"].items()} == {"kept": True, "gone": False}
    assert not host.exists("/run/marker")  # /run is memory
    assert host.exists("/etc/systemd/system/kept.service")  # the disk stays
    # sshd answers again with the same host key (the engine's pinned key still matches).
    engine = FleetEngine()
    try:
        connection = {"host": host.address, "user": "root", "privateKey": hosts.client_private_key}
        result = engine.ssh.run({**connection, "hostKey": host.host_key}, "echo back; : mlcluster-check", None)
    finally:
        engine.close()
    assert result.returncode == 0 and result.stdout.strip() == "back"
    assert len(host.sessions()) == sessions_before + 2  # start and end of that one session


def test_a_dropped_connection_fails_the_step_as_pulumi_command_says_and_its_commands_go_on(fleet) -> None:
    hosts = fleet(HostSpec("n-1"))
    host = hosts["n-1"]
    host.set(holdOnce={r"swapoff -a": "held.json"})
    engine = FleetEngine()
    outcome: dict[str, object] = {}

    def drop() -> None:
        held = host.state_dir / "held.json"
        deadline = time.monotonic() + 30
        while not held.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(json.loads(held.read_text())["pid"])
        hosts.drop_connection("n-1", pid)
        (host.state_dir / "release").touch()
        outcome["dropped"] = pid

    dropper = threading.Thread(target=drop)
    dropper.start()
    try:
        connection = {"host": host.address, "user": "root", "privateKey": hosts.client_private_key}
        result = engine.ssh.run(
            {**connection, "hostKey": host.host_key}, "swapoff -a; echo after > /root/after; : mlcluster-check", None
        )
    finally:
        dropper.join()
        engine.close()
    assert "dropped" in outcome and result.returncode == 255, (result.stdout, result.stderr)
    text = failure_text("n-1-swap", connection, "swapoff -a", result)
    assert "error: wait: remote command exited without exit status or exit signal: running" in text, text
    # The session's command went on without its connection.
    deadline = time.monotonic() + 10
    while not host.exists("/root/after") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert host.read("/root/after").strip() == "after"
    assert host.state()["swap"] is False


@pytest.fixture
def old_swap_check(tmp_path: Path) -> Iterator[None]:
    """components/scripts with swap.sh's check in its old form, for the program the engine runs."""
    scripts = tmp_path / "scripts"
    shutil.copytree(shell.SCRIPTS, scripts)
    body = (scripts / "swap.sh").read_text()
    current = body.split("\n")[3:5]
    assert current[0].startswith("active=$(swapon --show --noheadings)"), current
    (scripts / "swap.sh").write_text(body.replace(current[0] + "\n" + current[1], OLD_SWAP_CHECK))
    original = shell.SCRIPTS
    shell.SCRIPTS = scripts
    shell.script_source.cache_clear()
    shell._without_head.cache_clear()
    try:
        yield
    finally:
        shell.SCRIPTS = original
        shell.script_source.cache_clear()
        shell._without_head.cache_clear()


@pytest.mark.parametrize("form", ["current", "old"])
def test_the_sweep_catches_the_old_swap_check(fleet, tmp_path, request, form) -> None:
    """The negative control: with `swapon --show` failing once on a host whose swap is on, the current check stops
    the preparation and the next up finishes; the old form printed `ok: swap is off`, the preparation was recorded,
    and kubeadm init failed on swap in that up and in every later one."""
    if form == "old":
        request.getfixturevalue("old_swap_check")
    scenario = SCENARIOS["bootstrap"]
    hosts = fleet(*scenario.hosts)
    sweeper = Sweeper(scenario, hosts, tmp_path / "sweep")
    try:
        row = sweeper.trial(Target("bootstrap", "fail", "cp-1", "swapon --show --noheadings"))
    finally:
        sweeper.close()
    if form == "current":
        assert row.recovered, row
        assert row.first_up == "cp-1-prepare / swap: the call's error"
    else:
        assert not row.recovered
        assert row.first_up.startswith("cp-1-kubeadm-init"), row
        assert "the second up failed: cp-1-kubeadm-init" in row.problem, row
        # Swap stayed on, and that is what stopped both inits.
        assert hosts["cp-1"].state()["swap"] is True
        assert hosts["cp-1"].read("/var/log/mlcluster/kubeadm-init.log").count("[ERROR Swap]") == 2
