"""cluster.apiVip on RHEL-family hosts with SELinux enforcing, modelled from the targeted policy's source
(stubs/selinux.py): haproxy_t may not connect to the API servers' 6443 unless haproxy_connect_any is on, and
keepalived_t runs only check scripts labelled for it. The same bootstrap with and without the api-vip step's SELinux
part: the real haproxy and keepalived run on each control plane as the policy lets them."""

from __future__ import annotations

import pytest

from components.render import api_vip, shell

from .hosts import HostSpec
from .test_api_vip import VIP_PORT, holders, ready_through

pytestmark = pytest.mark.fleet

CONTROL_PLANES = ["cp-1", "cp-2", "cp-3"]
IMAGE_DISK = "/dev/loop7"


def _enforcing_fleet(fleet):  # type: ignore[no-untyped-def]
    hosts = fleet(HostSpec("cp-1", os="rocky-9"), HostSpec("cp-2", os="almalinux-9"), HostSpec("cp-3", os="rhel-10"))
    for name in CONTROL_PLANES:
        hosts[name].set(selinux="Enforcing")
    vip = hosts.address(200)
    nodes = [hosts[n].node("control-plane") for n in CONTROL_PLANES]
    values, secret = hosts.stack_values(nodes, cluster={"apiVip": {"address": f"{vip}/24"}})
    return hosts, vip, values, secret


def test_an_enforcing_rhel_family_control_plane_trio_bootstraps_behind_the_vip(fleet, fleet_engine) -> None:
    hosts, vip, values, secret = _enforcing_fleet(fleet)
    run = fleet_engine.up(values, secret)
    run.raise_error()
    assert ready_through(vip) and holders(hosts, vip, CONTROL_PLANES) == ["cp-1"]
    for name in CONTROL_PLANES:
        state = hosts[name].state()["selinux"]
        assert state["booleans"] == {"haproxy_connect_any": True}, name
        # restorecon labelled the check's directory; the script carries its directory's label.
        labelled = {p: t for p, t in state["labels"].items() if p.startswith(api_vip.CHECK_SCRIPT_DIR)}
        assert labelled == {api_vip.CHECK_SCRIPT_DIR: "keepalived_unconfined_script_exec_t"}, (name, labelled)
        # The daemons ran the configuration as written: nothing the policy denies was left in it.
        seen = hosts[name].read("/run/mlcluster-fleet/haproxy.selinux.cfg")
        assert "127.0.0.1:1" not in seen and ":6443 check" in seen, seen
        assert f'script "{api_vip.CHECK_SCRIPT}"' in hosts[name].read("/run/mlcluster-fleet/keepalived.selinux.cfg")
        step = run.step(f"{name}-api-vip").stdout or ""
        assert "changed: SELinux boolean haproxy_connect_any turned on" in step, step
        assert not hosts[name].exists(api_vip.LEGACY_CHECK_SCRIPT)
    # A second run finds everything in place.
    again = fleet_engine.up(values, secret)
    again.raise_error()
    assert again.steps == []


def test_without_the_selinux_boolean_haproxy_cannot_reach_an_api_server_and_init_fails(
    fleet, fleet_engine, monkeypatch
) -> None:
    monkeypatch.setattr(api_vip, "SELINUX_BOOLEANS", ())
    hosts, vip, values, secret = _enforcing_fleet(fleet)
    run = fleet_engine.up(values, secret)
    assert run.error is not None
    message = str(run.error)
    assert "(cp-1-kubeadm-init)" in message, message[-800:]
    # haproxy_t's connects to 6443 are denied: every backend of the VIP is out, so kubeadm's wait through it fails.
    seen = hosts["cp-1"].read("/run/mlcluster-fleet/haproxy.selinux.cfg")
    assert "127.0.0.1:1" in seen and ":6443 check" not in seen, seen
    assert hosts["cp-1"].state()["selinux"]["booleans"] == {}
    assert not ready_through(vip, VIP_PORT)


def _enforcing_image_disk_node(fleet):  # type: ignore[no-untyped-def]
    hosts = fleet(HostSpec("cp-1", os="rocky-9"))
    hosts["cp-1"].set(selinux="Enforcing", disks={IMAGE_DISK: {}})
    disk = {"device": IMAGE_DISK, "filesystem": "xfs", "mountPoint": "/mnt/images"}
    values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane", imageDisk=disk)])
    return hosts, values, secret


def test_an_image_disk_on_an_enforcing_host_gets_containerds_labels_and_the_control_plane_starts(
    fleet, fleet_engine
) -> None:
    hosts, values, secret = _enforcing_image_disk_node(fleet)
    fleet_engine.up(values, secret).raise_error()
    state = hosts["cp-1"].state()
    assert state["mounts"] == {"/mnt/images": IMAGE_DISK}
    assert state["selinux"]["equivalences"] == {"/mnt/images": "/var/lib/containerd"}
    assert state["selinux"]["labels"]["/mnt/images"] == "container_var_lib_t"
    assert state["disks"][IMAGE_DISK]["rootLabel"] == "container_var_lib_t", "the label is on the filesystem"
    assert "containerdErrors" not in state


def test_without_the_labels_the_image_disk_is_unlabeled_and_no_container_starts(
    fleet, fleet_engine, monkeypatch
) -> None:
    real = shell.script_source

    def unlabelled(name: str) -> str:
        text = real(name)
        return text.replace('containerd_labels "$mount_point"', ":") if name == "image-disk.sh" else text

    monkeypatch.setattr(shell, "script_source", unlabelled)
    hosts, values, secret = _enforcing_image_disk_node(fleet)
    run = fleet_engine.up(values, secret)
    assert run.error is not None and "(cp-1-kubeadm-init)" in str(run.error), str(run.error)[-600:]
    assert "error execution phase wait-control-plane" in str(run.error)
    state = hosts["cp-1"].state()
    assert state["selinux"]["labels"]["/mnt/images"] == "unlabeled_t"
    (error,) = state["containerdErrors"]
    assert "permission denied (SELinux: /mnt/images is unlabeled_t" in error, error
