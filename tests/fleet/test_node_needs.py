"""What a node needs of a Kubernetes minor (components/config/support.py NODE_NEEDS), on the SSH fleet: a cgroup v1
host (a tmpfs at /sys/fs/cgroup, as such a host has) and a containerd too old for the minor are refused by the os
and containerd steps, before any step changes the host, at a bootstrap and at a minor upgrade."""

from __future__ import annotations

import pytest

from components.config.spec import DEFAULT_KUBERNETES_VERSION

from .hosts import PREVIOUS_MINOR_VERSION, HostSpec
from .steps import prepared, step_outputs

pytestmark = pytest.mark.fleet

CGROUP_REFUSAL = f"this host runs cgroup v1; Kubernetes {DEFAULT_KUBERNETES_VERSION.rsplit('.', 1)[0]} needs cgroup v2"


def test_a_cgroup_v1_host_is_refused_before_any_step_changes_it(fleet, fleet_engine) -> None:
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1", cgroup="v1"))
    values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane"), hosts["w-1"].node()])
    run = fleet_engine.up(values, secret)
    assert run.error is not None and "(w-1-prepare)" in str(run.error)
    message = str(run.error)
    assert "error: step os failed" in message and CGROUP_REFUSAL in message, message[-600:]
    assert list(step_outputs(prepared(run, "w-1"))) == ["os"]
    # Nothing on the host moved: swap still on, no package, no kernel setting.
    state = hosts["w-1"].state()
    assert state.get("swap") is True and not state.get("packages") and not state.get("sysctl"), state
    # The cgroup v2 host's own steps are not what failed.
    assert "ok: cgroup v2" in (step_outputs(prepared(run, "cp-1")).get("os") or "")


def test_a_cgroup_v1_cluster_stays_on_its_minor_when_the_upgrade_would_break_it(fleet, fleet_engine) -> None:
    """1.34 runs on cgroup v1: the cluster bootstraps there. The upgrade to 1.35 re-runs the os step with the new
    minor's needs, which refuses the host before kube-packages switches its repository or any kubelet moves."""
    hosts = fleet(HostSpec("cp-1", cgroup="v1"), HostSpec("w-1", cgroup="v1", os="rocky-9"))
    values, secret = hosts.stack_values(
        [hosts["cp-1"].node("control-plane"), hosts["w-1"].node()], kubernetesVersion=PREVIOUS_MINOR_VERSION
    )
    first = fleet_engine.up(values, secret)
    first.raise_error()
    assert "ok: cgroup v1 (Kubernetes" in (step_outputs(prepared(first, "cp-1")).get("os") or "")
    upgraded = fleet_engine.up({**values, "kubernetesVersion": DEFAULT_KUBERNETES_VERSION}, secret)
    assert upgraded.error is not None and CGROUP_REFUSAL in str(upgraded.error), str(upgraded.error)[-600:]
    (cluster,) = hosts.clusters()
    assert cluster["version"] == PREVIOUS_MINOR_VERSION
    for name in ("cp-1", "w-1"):
        packages = hosts[name].state()["packages"]
        assert packages["kubelet"].split("-")[0] == PREVIOUS_MINOR_VERSION, (name, packages)
        assert cluster["nodes"][name]["kubeletVersion"] == PREVIOUS_MINOR_VERSION


def test_a_containerd_older_than_the_minor_needs_stops_at_the_containerd_step(fleet, fleet_engine) -> None:
    hosts = fleet(HostSpec("cp-1", containerd="1.5.9"))
    values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane")])
    run = fleet_engine.up(values, secret)
    assert run.error is not None
    message = str(run.error)
    assert "error: step containerd failed" in message, message[-600:]
    assert "containerd 1.5.9 is installed; Kubernetes 1.35 needs containerd >= 1.6" in message, message[-600:]
    assert "kubelet" not in hosts["cp-1"].state().get("packages", {})
