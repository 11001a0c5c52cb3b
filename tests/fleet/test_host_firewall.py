"""RHEL-family and Ubuntu hosts with their firewall on and SELinux enforcing: the ports open, the nodes join."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .hosts import HostSpec
from .stubs._stub import blocking_firewall
from .test_bootstrap import assert_a_second_run_changes_nothing, calls

pytestmark = pytest.mark.fleet

# What lib.sh opens, spelled out here so a dropped port fails the test.
CONTROL_PLANE = {"6443/tcp", "2379-2380/tcp", "10250/tcp", "10257/tcp", "10259/tcp"}
WORKER = {"10250/tcp", "10256/tcp", "30000-32767/tcp"}
CALICO = {"179/tcp", "4789/udp", "5473/tcp"}


def test_rocky_nodes_with_firewalld_running_and_selinux_enforcing_join(fleet, fleet_engine) -> None:
    hosts = fleet(HostSpec("cp-1", os="rocky-9"), HostSpec("w-1", os="rocky-9"))
    for name in ("cp-1", "w-1"):
        hosts[name].set(firewalld="running", selinux="Enforcing")
    values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane"), hosts["w-1"].node()])
    run = fleet_engine.up(values, secret)
    run.raise_error()

    assert sorted(hosts.clusters()[0]["nodes"]) == ["cp-1", "w-1"]
    control_plane, worker = hosts["cp-1"].state()["firewalld"], hosts["w-1"].state()["firewalld"]
    assert set(control_plane["permanent"]) == set(control_plane["runtime"]) == CONTROL_PLANE | CALICO
    assert set(worker["permanent"]) == set(worker["runtime"]) == WORKER | CALICO
    # One reload per host, after the ports were added, and the API server port open before the worker joined.
    assert control_plane["reloads"] == 1 and worker["reloads"] == 1
    reload_cp = calls(hosts["cp-1"], "firewall-cmd", "--reload")[0]["t1"]
    assert reload_cp < calls(hosts["w-1"], "kubeadm", "join")[0]["t0"]
    for name in ("cp-1", "w-1"):
        os_step = run.step(f"{name}-os").stdout or ""
        assert "ok: SELinux Enforcing (left as it is)" in os_step and "ok: host firewall: firewalld" in os_step
    assert "changed: firewalld opens 6443/tcp" in (run.step("cp-1-kubeadm-init").stdout or "")

    assert_a_second_run_changes_nothing(hosts, fleet_engine, values, secret)
    assert hosts["cp-1"].state()["firewalld"]["reloads"] == 1


def test_ubuntu_nodes_with_ufw_active_join(fleet, fleet_engine) -> None:
    hosts = fleet(HostSpec("cp-1", os="ubuntu-24.04"), HostSpec("w-1", os="ubuntu-24.04"))
    for name in ("cp-1", "w-1"):
        hosts[name].set(ufw="active")
    values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane"), hosts["w-1"].node()])
    fleet_engine.up(values, secret).raise_error()
    assert sorted(hosts.clusters()[0]["nodes"]) == ["cp-1", "w-1"]
    ufw = {name: set(hosts[name].state()["ufw"]["rules"]) for name in ("cp-1", "w-1")}
    assert ufw["cp-1"] == {p.replace("-", ":") for p in CONTROL_PLANE | CALICO}
    assert ufw["w-1"] == {p.replace("-", ":") for p in WORKER | CALICO}


def test_the_firewall_stub_blocks_the_api_server_until_the_port_is_open(tmp_path: Path) -> None:
    """The negative the join relies on: a running firewalld without 6443/tcp drops the join."""
    (tmp_path / "settings.json").write_text(json.dumps({"firewalld": "running"}))
    assert blocking_firewall(tmp_path, "6443/tcp") == "firewalld"
    (tmp_path / "db.json").write_text(json.dumps({"firewalld": {"permanent": ["6443/tcp"], "runtime": []}}))
    assert blocking_firewall(tmp_path, "6443/tcp") == "firewalld", "a permanent rule filters nothing before --reload"
    (tmp_path / "db.json").write_text(json.dumps({"firewalld": {"permanent": [], "runtime": ["6443/tcp"]}}))
    assert blocking_firewall(tmp_path, "6443/tcp") is None
    (tmp_path / "settings.json").write_text(json.dumps({"firewalld": "stopped", "ufw": "active"}))
    assert blocking_firewall(tmp_path, "6443/tcp") == "ufw"
