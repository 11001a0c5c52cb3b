"""The upgrade sequence as data: its order, its batches, the version-skew policy after every step, its config."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.config.load import spec_from_values
from components.config.schema import ConfigError
from components.config.spec import Spec
from components.render.etcd_snapshots import timer_step
from components.render.node_steps import prepare_steps
from components.render.shell import split_parts
from components.render.upgrade import (
    CONTROL_PLANE_COMPONENTS,
    VERSION_OUTPUT,
    Versions,
    simulate,
    skew_problems,
    upgrade_steps,
    version_change_problem,
)

from .conftest import PROJECT, load_spec, stack_values
from .test_config_validation import HOST_KEY


def cluster(control_planes: int, workers: int, version: str = "1.35.0", **sections: Any) -> Spec:
    nodes = [
        {"name": f"cp-{i + 1}", "host": f"198.18.0.{10 + i}", "roles": ["control-plane"], "hostKey": HOST_KEY}
        for i in range(control_planes)
    ] + [
        {"name": f"w-{i + 1}", "host": f"198.18.0.{50 + i}", "roles": ["worker"], "hostKey": HOST_KEY}
        for i in range(workers)
    ]
    values = {
        "kubernetesVersion": version,
        "cluster": {"name": "lab", **({"controlPlaneEndpoint": "api.lab:6443"} if control_planes > 1 else {})},
        "ssh": {"privateKey": "KEY"},
        "nodes": nodes,
        **{layer: {"enabled": False} for layer in ("gpuOperator", "kueue", "kserve", "kubeflow", "storage")},
        **sections,
    }
    return spec_from_values(values, lambda key: key == "ssh")


def test_the_order_control_planes_one_at_a_time_then_worker_batches() -> None:
    spec = cluster(3, 4, kubelet={"restart": {"maxUnavailableWorkers": "50%"}})
    stages = [[u.resource_name for u in stage] for stage in upgrade_steps(spec)]
    assert stages == [
        ["cp-1-upgrade-preflight"],
        ["cp-1-etcd-snapshot"],
        ["cp-1-upgrade-control-plane"], ["cp-2-upgrade-control-plane"], ["cp-3-upgrade-control-plane"],
        ["cp-1-upgrade-drain-cp-1"], ["cp-1-kubelet"], ["cp-1-upgrade-uncordon-cp-1"],
        ["cp-2-upgrade-drain-cp-2"], ["cp-2-kubelet"], ["cp-2-upgrade-uncordon-cp-2"],
        ["cp-3-upgrade-drain-cp-3"], ["cp-3-kubelet"], ["cp-3-upgrade-uncordon-cp-3"],
        ["cp-1-upgrade-drain-w-1..w-2"], ["w-1-kubelet", "w-2-kubelet"], ["cp-1-upgrade-uncordon-w-1..w-2"],
        ["cp-1-upgrade-drain-w-3..w-4"], ["w-3-kubelet", "w-4-kubelet"], ["cp-1-upgrade-uncordon-w-3..w-4"],
    ]  # fmt: skip
    settings = {u.resource_name: u.step.settings for stage in upgrade_steps(spec) for u in stage}
    # Only the first control plane applies; the others (and workers) run `kubeadm upgrade node`.
    assert [n for n, s in settings.items() if s.get("FIRST_CONTROL_PLANE") == "true"] == ["cp-1-upgrade-control-plane"]
    # A batch's steps name the nodes they touch, its first and last (issue 35: `-w-3` drained w-3 and w-4).
    assert settings["cp-1-upgrade-drain-w-3..w-4"]["NODES"] == "w-3 w-4"
    assert {s["TARGET_VERSION"] for s in settings.values() if "TARGET_VERSION" in s} == {"1.35.0"}
    # Each node's kubelet command: its kubelet upgrade, then the restarts its tuning marked, one script.
    kubelet = next(u.step for stage in upgrade_steps(spec) for u in stage if u.resource_name == "w-3-kubelet")
    assert [name for name, _ in split_parts(kubelet.script or "")] == ["upgrade-kubelet", "kubelet-restart"]
    assert "TARGET_VERSION=1.35.0" in (kubelet.script or "") and "TUNING_DIGEST=" in (kubelet.script or "")


def test_control_planes_drain_and_upgrade_in_their_restart_batches() -> None:
    """maxUnavailableControlPlanes batches the control-plane kubelets as it batches their tuning restarts; a
    batch drains from its own first node; the static pods still move one control plane at a time."""
    spec = cluster(3, 1, kubelet={"restart": {"maxUnavailableControlPlanes": 2}})
    stages = [[u.resource_name for u in stage] for stage in upgrade_steps(spec)]
    assert stages[2:] == [
        ["cp-1-upgrade-control-plane"], ["cp-2-upgrade-control-plane"], ["cp-3-upgrade-control-plane"],
        ["cp-1-upgrade-drain-cp-1..cp-2"], ["cp-1-kubelet", "cp-2-kubelet"], ["cp-1-upgrade-uncordon-cp-1..cp-2"],
        ["cp-3-upgrade-drain-cp-3"], ["cp-3-kubelet"], ["cp-3-upgrade-uncordon-cp-3"],
        ["cp-1-upgrade-drain-w-1"], ["w-1-kubelet"], ["cp-1-upgrade-uncordon-w-1"],
    ]  # fmt: skip
    drain = next(
        u for stage in upgrade_steps(spec) for u in stage if u.resource_name == "cp-1-upgrade-drain-cp-1..cp-2"
    )
    assert drain.targets == ("cp-1", "cp-2") and drain.previous_name == "cp-1-upgrade-drain-cp-1"
    for after, versions in simulate(spec, "1.34.2"):
        assert skew_problems(versions) == [], after


@pytest.mark.parametrize(
    ("control_planes", "workers", "max_unavailable"), [(1, 3, "25%"), (1, 3, "100%"), (3, 3, "1"), (3, 7, "50%")]
)
def test_version_skew_holds_after_every_step(control_planes: int, workers: int, max_unavailable: str) -> None:
    spec = cluster(control_planes, workers, kubelet={"restart": {"maxUnavailableWorkers": max_unavailable}})
    states = list(simulate(spec, "1.34.2"))
    # One state per component moved, so the check below is not vacuous.
    assert len(states) == 1 + control_planes * (len(CONTROL_PLANE_COMPONENTS) + 1) + workers
    for after, versions in states:
        assert skew_problems(versions) == [], after
    final = states[-1][1]
    assert set(final.values()) == {(1, 35)}


def test_the_skew_check_catches_what_upgrading_packages_in_place_did() -> None:
    """kube-packages used to move every kubelet to the new version before any `kubeadm upgrade`."""
    versions: Versions = {("cp-1", c): (1, 34) for c in CONTROL_PLANE_COMPONENTS}
    versions[("cp-1", "kubelet")] = (1, 35)
    versions[("w-1", "kubelet")] = (1, 35)
    assert skew_problems(versions) == [
        "kubelet on cp-1 (1.35) is newer than kube-apiserver 1.34",
        "kubelet on w-1 (1.35) is newer than kube-apiserver 1.34",
    ]


def test_the_skew_check_catches_api_servers_two_minors_apart_and_a_newer_scheduler() -> None:
    versions: Versions = {("cp-1", c): (1, 36) for c in CONTROL_PLANE_COMPONENTS}
    versions |= {("cp-2", c): (1, 34) for c in CONTROL_PLANE_COMPONENTS}
    versions[("cp-2", "kube-scheduler")] = (1, 35)
    problems = skew_problems(versions)
    assert "kube-apiservers more than one minor apart (1.34 and 1.36)" in problems
    assert "kube-scheduler on cp-2 (1.35) vs its kube-apiserver 1.34" in problems


def test_workers_before_the_control_plane_would_break_the_policy() -> None:
    """The model can fail: upgrading a worker's kubelet first is caught at that very step."""
    versions: Versions = {("cp-1", c): (1, 34) for c in CONTROL_PLANE_COMPONENTS}
    versions |= {("cp-1", "kubelet"): (1, 34), ("w-1", "kubelet"): (1, 34)}
    versions[("w-1", "kubelet")] = (1, 35)
    assert skew_problems(versions) == ["kubelet on w-1 (1.35) is newer than kube-apiserver 1.34"]


def test_upgrade_and_snapshot_settings_are_validated_with_their_key_paths() -> None:
    with pytest.raises(ConfigError) as raised:
        cluster(
            1,
            1,
            upgrade={"gpuJobs": "kill", "drainTimeout": "0s", "gpuJobsTimeout": "soon"},
            etcdSnapshots={"schedule": "every day", "retain": 0, "directory": "snapshots", "copyTo": "/var/lib/x/"},
        )
    report = str(raised.value)
    for path in (
        "mlcluster:upgrade.gpuJobs",
        "mlcluster:upgrade.drainTimeout",
        "mlcluster:upgrade.gpuJobsTimeout",
        "mlcluster:etcdSnapshots.schedule",
        "mlcluster:etcdSnapshots.retain",
        "mlcluster:etcdSnapshots.directory",
    ):
        assert path in report, path
    with pytest.raises(ConfigError, match=r"etcdSnapshots\.copyTo: \"/var/lib/s/\" is the snapshot directory"):
        cluster(1, 1, etcdSnapshots={"directory": "/var/lib/s", "copyTo": "/var/lib/s/"})


def test_snapshot_timer_runs_the_same_script_as_the_pre_upgrade_snapshot() -> None:
    spec = cluster(1, 0, etcdSnapshots={"schedule": "*-*-* 02:30:00", "retain": 3})
    timer = timer_step(spec.etcd_snapshots, spec.control_planes).settings
    assert "OnCalendar=*-*-* 02:30:00" in timer["TIMER_UNIT"]
    assert "SNAPSHOT_RETAIN=3" in timer["SNAPSHOT_SCRIPT_TEXT"]
    pre_upgrade = upgrade_steps(spec)[1][0].step
    body = pre_upgrade.script.split("# Step/timer", 1)[1] if pre_upgrade.script else ""
    assert body and body in timer["SNAPSHOT_SCRIPT_TEXT"]


def waits_for(resources: dict[str, Any], name: str) -> set[str]:
    """The names of every resource `name` waits for, directly or through others."""
    by_urn = {r.urn: r for r in resources.values()}
    seen: set[str] = set()
    todo = list(resources[name].depends_on)
    while todo:
        urn = todo.pop()
        if urn in by_urn and by_urn[urn].name not in seen:
            seen.add(by_urn[urn].name)
            todo += by_urn[urn].depends_on
    return seen


def test_the_upgrade_starts_after_every_node_checked_its_own_repository(run_stack) -> None:
    """kube-packages, in every node's preparation, checks that node's repository offers the target (one SSH session
    per node that runs anyway when the version changes); the upgrade's first step waits for all of them."""
    run = run_stack("onprem")
    resources = {r.name: r for r in run.resources}
    nodes = [n for n in resources if n.endswith("-prepare")]
    assert len(nodes) >= 5
    assert set(nodes) <= waits_for(resources, "cp-1-upgrade-preflight")
    # The check above can fail: a preparation waits for no upgrade step.
    assert "cp-1-upgrade-preflight" not in waits_for(resources, nodes[-1])
    spec = load_spec(*stack_values("onprem"))
    for node in spec.nodes:
        [packages] = [s for s in prepare_steps(spec, node) if s.name == "kube-packages"]
        assert packages.settings["NODE_NAME"] == node.name


VERSION_CHANGES = [
    # (the last successful up's version as its output recorded it, kubernetesVersion, the refusal's start or None)
    (None, "1.36.0", None),  # never deployed (or a release that did not record it): nothing to compare
    ({"not": "a version"}, "1.36.0", None),
    ("1.34.2", "1.34.2", None),
    ("1.34.2", "1.34.3", None),
    ("1.34.2", "1.35.0", None),
    ("1.34.2", "1.36.0", "mlcluster:kubernetesVersion: 1.36.0 skips a minor: the cluster runs 1.34.2"),
    ("1.34.2", "1.33.9", "mlcluster:kubernetesVersion: 1.33.9 is older than the cluster's 1.34.2"),
    ("1.34.2", "1.34.1", "mlcluster:kubernetesVersion: 1.34.1 is older than the cluster's 1.34.2"),
    ("1.34.2", "2.0.0", "mlcluster:kubernetesVersion: 2.0.0 changes the major version"),
]


@pytest.mark.parametrize(("recorded", "wanted", "refusal"), VERSION_CHANGES)
def test_a_version_the_cluster_cannot_go_to_is_refused_at_plan_time(recorded, wanted, refusal) -> None:
    """upgrade-preflight.sh's rules, decided from the last successful up's recorded version before any node."""
    problem = version_change_problem(recorded, wanted)
    assert (problem is None) == (refusal is None), problem
    if refusal is not None:
        assert problem is not None and problem.startswith(refusal), problem


def test_the_offline_plan_refuses_a_skipped_minor_against_the_deployed_version(tmp_path) -> None:
    import yaml

    from components.plan.__main__ import main as plan_main

    stack = yaml.safe_load((PROJECT / "stacks" / "Pulumi.lab.yaml").read_text())
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({VERSION_OUTPUT: "1.34.2"}))
    for version, code in (("1.36.0", 2), ("1.35.0", 0)):
        stack["config"]["mlcluster:kubernetesVersion"] = version
        path = tmp_path / f"Pulumi.v{version.replace('.', '-')}.yaml"
        path.write_text(yaml.safe_dump(stack))
        assert (
            plan_main(["--stack-file", str(path), "--out", str(tmp_path / version), "--stack-outputs", str(outputs)])
            == code
        )


def test_a_one_node_cluster_upgrades_its_kubelet_in_place_without_a_drain(run_stack) -> None:
    """A drain on the only node has nowhere to move the pods and waits on every PodDisruptionBudget: the one-node
    lab plans no drain or uncordon, the on-prem example one per batch."""
    lab = {r.name for r in run_stack("lab").resources}
    assert not {n for n in lab if "upgrade-drain" in n or "upgrade-uncordon" in n}, sorted(lab)
    assert any(n.startswith("lab-1-kubelet") or n == "lab-1-kubelet" for n in lab), sorted(lab)
    onprem = {r.name for r in run_stack("onprem").resources}
    assert any("upgrade-drain" in n for n in onprem) and any("upgrade-uncordon" in n for n in onprem)
