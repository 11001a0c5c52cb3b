"""Day 2 under the engine's real rules: retries hours later, nodes added a month later, previews, dead hosts."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from components.cluster import kubeadm_cluster
from components.render import join_credentials, shell

from .engine import KUBERNETES_PROVIDER
from .hosts import HostSpec
from .measure import MEASUREMENTS, sessions_per_step
from .stubs._stub import _locked_json

pytestmark = pytest.mark.fleet

HOUR = 3600.0
PREPARE = ("os", "swap", "kernel-modules", "sysctl", "containerd", "kube-packages")


def live_tokens(cluster: dict[str, Any], now: float) -> list[str]:
    return [token for token, expires in cluster["tokens"].items() if expires > now]


def at_utc_hour(hosts: Any, hour: int) -> None:
    """Move the fleet's clock (the program follows it) to `hour`:00 UTC of the next day, so the test knows which
    mint window (components/render/join_credentials.py) each later run falls in."""
    now = datetime.fromtimestamp(hosts.now(), UTC)
    target = (now + timedelta(days=1)).replace(hour=hour, minute=0, second=0, microsecond=0)
    hosts.advance_clock((target - now).total_seconds())


def credential_runs(run: Any) -> int:
    return len([s for s in run.steps if s.resource == "cp-1-join-credentials"])


def test_a_failed_join_retried_hours_and_days_later_and_a_node_added_a_month_later_join(
    fleet, fleet_engine, monkeypatch
) -> None:
    started = time.monotonic()
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"), HostSpec("w-2"))
    fleet_engine.clock = hosts.now
    at_utc_hour(hosts, 1)
    nodes = [hosts["cp-1"].node("control-plane"), hosts["w-1"].node()]
    values, secret = hosts.stack_values(nodes)
    hosts["w-1"].set(fail={"kubeadm join": "error execution phase kubelet-start: timed out waiting for the kubelet"})
    failed = fleet_engine.up(values, secret)
    assert failed.error is not None and "w-1-kubeadm-join" in str(failed.error)
    assert credential_runs(failed) == 1 and not hosts["w-1"].exists("/etc/kubernetes/mlcluster/kubeadm-join.yaml")

    # Three hours later, the same UTC day: the join runs again with the token of that morning, still valid.
    hosts.advance_clock(3 * HOUR)
    again = fleet_engine.up(values, secret)
    assert again.error is not None and "w-1-kubeadm-join" in str(again.error)
    assert credential_runs(again) == 0, "join-credentials ran again within its mint window"
    assert "token id" not in str(again.error), "the join read an expired token"

    # Two days later the morning's token has expired (24 h): the new window mints one, and the join works.
    hosts.advance_clock(2 * 24 * HOUR)
    hosts["w-1"].set(fail={})
    retried = fleet_engine.up(values, secret)
    retried.raise_error()
    assert credential_runs(retried) == 1
    assert sorted(hosts.clusters()[0]["nodes"]) == ["cp-1", "w-1"]
    # The join ran again; the preparation that had finished is recorded and did not.
    assert retried.step("w-1-kubeadm-join").rc == 0
    assert not [s.resource for s in retried.steps if s.step in PREPARE], retried.steps
    MEASUREMENTS["day 2: failed join, +2 days, up again (s)"] = round(retried.wall_seconds, 2)

    hosts.advance_clock(30 * 24 * HOUR)
    values, secret = hosts.stack_values([*nodes, hosts["w-2"].node()])
    added = fleet_engine.up(values, secret)
    added.raise_error()
    assert sorted(hosts.clusters()[0]["nodes"]) == ["cp-1", "w-1", "w-2"]
    # Nothing but the new node's steps (and the batched kubelet restarts that list it) ran.
    assert {s.host for s in added.steps} <= {hosts["w-2"].address, hosts["cp-1"].address}
    assert not [s for s in added.steps if s.host == hosts["w-1"].address]
    MEASUREMENTS["day 2: node added 30 days after init (s)"] = round(added.wall_seconds, 2)
    unchanged = fleet_engine.up(values, secret)
    unchanged.raise_error()
    assert unchanged.steps == [], "a no-change up ran steps"
    MEASUREMENTS["day 2: retry + add scenario wall seconds"] = round(time.monotonic() - started, 2)


def test_without_a_new_mint_window_a_retry_days_later_reads_an_expired_token(fleet, fleet_engine, monkeypatch) -> None:
    """The check above can fail: credentials that are not minted again (the window frozen) are two days old when
    the retried join reads them, and kubeadm refuses the token."""
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"))
    fleet_engine.clock = hosts.now
    at_utc_hour(hosts, 1)
    values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane"), hosts["w-1"].node()])
    first_window: list[str] = []

    def frozen(*args: Any) -> join_credentials.MintDecision:
        made = join_credentials.decide(*args)
        first_window.append(made.minted_for)
        return dataclasses.replace(made, minted_for=first_window[0])

    monkeypatch.setattr("components.cluster.join_credentials.decide", frozen)
    hosts["w-1"].set(fail={"kubeadm join": "error execution phase kubelet-start: timed out waiting for the kubelet"})
    assert fleet_engine.up(values, secret).error is not None
    hosts.advance_clock(2 * 24 * HOUR)
    hosts["w-1"].set(fail={})
    stale = fleet_engine.up(values, secret)
    assert stale.error is not None and "token id" in str(stale.error) and "expired" in str(stale.error)


def test_preview_after_a_lib_sh_edit_replaces_no_kubernetes_resource(fleet, fleet_engine, monkeypatch) -> None:
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"))
    values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane"), hosts["w-1"].node()])
    values["storage"] = {"enabled": True}
    fleet_engine.up(values, secret).raise_error()
    kubernetes = {
        r.name
        for r in fleet_engine.runs[-1].program.resources
        if r.type.startswith("kubernetes:") or r.type == KUBERNETES_PROVIDER
    }
    assert len(kubernetes) > 1, "no Kubernetes resources to check"

    original = shell.script_source
    monkeypatch.setattr(
        shell, "script_source", lambda name: original(name) + ("# a comment\n" if name == "lib.sh" else "")
    )
    sessions = sum(len(h.sessions()) for h in hosts.hosts.values())
    preview = fleet_engine.preview(values, secret)
    preview.raise_error()
    assert sum(len(h.sessions()) for h in hosts.hosts.values()) == sessions, "the preview opened SSH sessions"
    assert "cp-1-prepare" in preview.with_operation("update"), "the lib.sh edit did not reach the steps"
    replaced = sorted(set(preview.with_operation("replace")) & kubernetes)
    MEASUREMENTS["Kubernetes resources replaced in a preview after a lib.sh edit"] = len(replaced)
    assert replaced == []

    # The count can fail: without the stable clusterIdentifier, an edit of the step that prints the
    # kubeconfig shows the provider and everything on it replaced.
    monkeypatch.setattr(
        shell,
        "script_source",
        lambda name: original(name) + ("# a comment\n" if name in ("lib.sh", "admin-kubeconfig.sh") else ""),
    )
    monkeypatch.setattr("components.render.node_steps.script_source", shell.script_source)
    monkeypatch.setattr(kubeadm_cluster, "cluster_identifier", lambda cluster: None)
    broken = fleet_engine.preview(values, secret)
    assert sorted(set(broken.with_operation("replace")) & kubernetes) == sorted(kubernetes)


def test_a_step_that_prints_credentials_and_then_fails_leaves_no_credential_in_the_error(
    fleet, fleet_engine, monkeypatch
) -> None:
    hosts = fleet(HostSpec("cp-1"), HostSpec("cp-2"))
    values, secret = hosts.stack_values(
        [hosts["cp-1"].node("control-plane"), hosts["cp-2"].node("control-plane")],
        cluster={"controlPlaneEndpoint": f"{hosts['cp-1'].address}:6443"},
    )
    # join-credentials creates the token, then the certificate-key upload fails.
    hosts["cp-1"].set(fail={"kubeadm init phase upload-certs": "error uploading certs: etcd timed out"})
    run = fleet_engine.up(values, secret)
    assert run.error is not None
    text = str(run.error)
    assert text.startswith("command:remote:Command (cp-1-join-credentials):") and "upload-certs' failed" in text
    (cluster,) = hosts.clusters()
    tokens = list(cluster["tokens"])
    assert len(tokens) >= 2, "join-credentials made no token before it failed"
    leaked = [t for t in tokens if t in text or t.split(".")[1] in text]
    assert leaked == []

    # The check can fail: the same step printing the token before the upload leaks it into the error text.
    original = shell.script_source
    monkeypatch.setattr(
        shell,
        "script_source",
        lambda name: (
            original(name).replace("\nkey=\n", '\nprintf "%s\\n" "$token"\nkey=\n')
            if name == "join-credentials.sh"
            else original(name)
        ),
    )
    leaky = fleet_engine.up(values, secret)
    assert leaky.error is not None
    new_tokens = set(hosts.clusters()[0]["tokens"]) - set(tokens)
    assert new_tokens and all(t in str(leaky.error) for t in new_tokens)


def test_a_worker_whose_sshd_is_gone_is_removed_and_a_not_ready_one_drains_bounded(fleet, fleet_engine) -> None:
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"), HostSpec("w-2"))
    nodes = {n: hosts[n].node("control-plane" if n == "cp-1" else "worker") for n in ("cp-1", "w-1", "w-2")}
    values, secret = hosts.stack_values(list(nodes.values()))
    fleet_engine.up(values, secret).raise_error()

    hosts["w-2"].vanish()
    sessions = len(hosts["w-2"].sessions())
    marked, secret = hosts.stack_values([nodes["cp-1"], nodes["w-1"], {**nodes["w-2"], "gone": True}])
    mark = fleet_engine.up(marked, secret)
    mark.raise_error()
    # Only the labels and taints step re-runs (on cp-1, through the API): the gone node is no longer its to keep.
    assert [s.resource for s in mark.steps] == ["cp-1-node-metadata"], "marking a node gone ran node steps"
    assert "w-2" not in (mark.step("cp-1-node-metadata").stdout or "")
    values, secret = hosts.stack_values([nodes["cp-1"], nodes["w-1"]])
    removed = fleet_engine.up(values, secret)
    removed.raise_error()
    assert "w-2-kubeadm-join" in removed.deleted and len(hosts["w-2"].sessions()) == sessions
    drain = removed.step("w-2-drain-on-removal", "delete")
    assert "not drained" in (drain.stdout or "") and "deleted" in (drain.stdout or "")
    assert sorted(hosts.clusters()[0]["nodes"]) == ["cp-1", "w-1"]

    # A NotReady node that still answers SSH: the drain is bounded, reported, and the node reset.
    (path,) = (hosts.dir / "cluster").glob("*/cluster.json")
    with _locked_json(path) as cluster:
        cluster["nodes"]["w-1"]["ready"] = False
    values, secret = hosts.stack_values([nodes["cp-1"]])
    run = fleet_engine.up(values, secret)
    run.raise_error()
    drain = run.step("w-1-drain-on-removal", "delete")
    assert "did not drain within 1m" in (drain.stdout or ""), drain.stdout
    assert sessions_per_step(hosts["w-1"])["kubeadm-join-delete"] == 1
    assert sorted(hosts.clusters()[0]["nodes"]) == ["cp-1"]


def test_a_gone_control_plane_leaves_etcd_from_a_healthy_member_before_its_node_goes(fleet, fleet_engine) -> None:
    """cp-3's host is lost: it cannot run its `kubeadm reset` (which is what removes a member), so the removal
    takes its member out through cp-1's etcd, then deletes its Node. etcd's membership then counts 2, and the
    next loss would be survivable again; left at 3 with one dead, a second loss would have stopped the cluster."""
    hosts = fleet(HostSpec("cp-1"), HostSpec("cp-2"), HostSpec("cp-3"))
    planes = [hosts[n].node("control-plane") for n in ("cp-1", "cp-2", "cp-3")]
    endpoint = {"controlPlaneEndpoint": "k8s-api.fleet.test:6443"}
    values, secret = hosts.stack_values(planes, cluster=endpoint)
    fleet_engine.up(values, secret).raise_error()
    assert sorted(hosts.clusters()[0]["etcdMembers"]) == ["cp-1", "cp-2", "cp-3"]

    hosts["cp-3"].vanish()
    with hosts.cluster_lock() as cluster:
        cluster["etcdMembers"]["cp-3"]["started"] = False  # its etcd went with the host
        cluster["nodes"]["cp-3"]["ready"] = False
    gone_id = hosts.clusters()[0]["etcdMembers"]["cp-3"]["id"]
    marked, secret = hosts.stack_values([*planes[:2], {**planes[2], "gone": True}], cluster=endpoint)
    fleet_engine.up(marked, secret).raise_error()
    values, secret = hosts.stack_values(planes[:2], cluster=endpoint)
    calls_before = len(hosts["cp-1"].calls())
    removed = fleet_engine.up(values, secret)
    removed.raise_error()

    drain = removed.step("cp-3-drain-on-removal", "delete")
    assert f"changed: etcd member cp-3 ({gone_id}) removed" in (drain.stdout or ""), drain.stdout
    log = [(c["tool"], " ".join(c["argv"])) for c in hosts["cp-1"].calls()[calls_before:]]
    print("\nremoval of gone cp-3, stub calls on cp-1:")
    for tool, argv in log:
        print(f"  {tool} {argv}")
    removal = next(i for i, (_, argv) in enumerate(log) if "member remove" in argv)
    deletion = next(i for i, (tool, argv) in enumerate(log) if tool == "kubectl" and argv.startswith("delete node"))
    assert removal < deletion, log
    assert any("--label io.kubernetes.pod.namespace=kube-system" in argv for _, argv in log[:removal])
    assert sorted(hosts.clusters()[0]["etcdMembers"]) == ["cp-1", "cp-2"]
    assert sorted(hosts.clusters()[0]["nodes"]) == ["cp-1", "cp-2"]
    assert "cp-3-kubeadm-join" in removed.deleted
    assert not [c for c in hosts["cp-3"].calls("kubeadm") if c["argv"][:1] == ["reset"]], "a gone host was reset"

    # A second `up` finds nothing to do; removing a live control plane the ordinary way still goes through its
    # own `kubeadm reset`, which takes its member out.
    assert fleet_engine.up(values, secret).steps == []
    values, secret = hosts.stack_values(planes[:1], cluster=endpoint)
    fleet_engine.up(values, secret).raise_error()
    assert sorted(hosts.clusters()[0]["etcdMembers"]) == ["cp-1"]


def test_reordered_control_planes_are_refused_before_any_step_where_protect_alone_stops_too_late(
    fleet, fleet_engine, monkeypatch
) -> None:
    """cp-2 listed before cp-1: the program refuses from the last deployment's record, in a preview and in an `up`
    without one, before any step. Without that refusal (the engine's `protect` alone), the `up` ran another
    kubeadm init and reset cp-2's membership before it reached cp-1's protected init and stopped."""
    hosts = fleet(HostSpec("cp-1"), HostSpec("cp-2"))
    planes = [hosts[n].node("control-plane") for n in ("cp-1", "cp-2")]
    endpoint = {"controlPlaneEndpoint": "k8s-api.fleet.test:6443"}
    values, secret = hosts.stack_values(planes, cluster=endpoint)
    first = fleet_engine.up(values, secret)
    first.raise_error()
    assert first.program.outputs["controlPlanes"].value == ["cp-1", "cp-2"]
    assert first.program.outputs["workers"].value == []
    reordered, secret = hosts.stack_values(planes[::-1], cluster=endpoint)

    for run in (fleet_engine.preview(reordered, secret), fleet_engine.up(reordered, secret)):
        assert run.error is not None and run.steps == [], [s.resource for s in run.steps]
        assert "mlcluster:nodes: cp-2 is now the first control plane, but cp-1 ran kubeadm init" in str(run.error)
    assert sorted(hosts.clusters()[0]["etcdMembers"]) == ["cp-1", "cp-2"]

    # The old hazard, shown with the refusal taken out: protect stops the run only at cp-1's init, after the
    # deletes that depend on it ran.
    monkeypatch.setattr(kubeadm_cluster, "control_plane_change_problem", lambda recorded, control_planes, nodes: None)
    hazard = fleet_engine.up(reordered, secret)
    assert hazard.error is not None and "because it is protected" in str(hazard.error)
    deleted = [s.resource for s in hazard.steps if s.action == "delete"]
    assert "cp-2-kubeadm-join" in deleted, deleted


def test_labels_and_taints_follow_the_stack_on_joined_nodes_and_what_others_set_stays(fleet, fleet_engine) -> None:
    """A joined node's labels and taints changed in the stack reach its Node through the first control plane's
    node-metadata step (added, changed, removed); its join does not re-run; a label and a taint someone else set
    survive; an unchanged stack runs nothing."""
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"), HostSpec("w-2"))
    cp = hosts["cp-1"].node("control-plane")
    worker = hosts["w-1"].node(labels={"team": "vision", "tier": "a"}, taints=["dedicated=vision:NoSchedule"])
    other = hosts["w-2"].node(labels={"team": "nlp"})
    values, secret = hosts.stack_values([cp, worker, other])
    first = fleet_engine.up(values, secret)
    first.raise_error()
    said = first.step("cp-1-node-metadata").stdout or ""
    assert "changed: w-1: records the 2 label(s) and 1 taint(s) mlcluster manages" in said, said
    node = hosts.clusters()[0]["nodes"]["w-1"]
    assert node["labels"]["team"] == "vision" and node["annotations"]["mlcluster.io/managed-labels"] == "team,tier"

    # Someone else labels and taints w-1 by hand; a run with no change in the stack runs nothing.
    with hosts.cluster_lock() as cluster:
        cluster["nodes"]["w-1"]["labels"]["ops/owner"] = "alice"
        cluster["nodes"]["w-1"]["taints"].append({"key": "ops/maintenance", "effect": "NoSchedule"})
    assert fleet_engine.up(values, secret).steps == []

    changed_worker = {**worker, "labels": {"team": "nlp", "zone": "b"}, "taints": ["dedicated=nlp:NoSchedule"]}
    values, secret = hosts.stack_values([cp, changed_worker, other])
    preview = fleet_engine.preview(values, secret)
    preview.raise_error()
    assert preview.with_operation("update") == ["cp-1-node-metadata"], preview.operations
    w1_sessions, calls = len(hosts["w-1"].sessions()), len(hosts["cp-1"].calls("kubectl"))
    run = fleet_engine.up(values, secret)
    run.raise_error()
    assert [s.resource for s in run.steps] == ["cp-1-node-metadata"]
    assert len(hosts["w-1"].sessions()) == w1_sessions, "the joined node was dialled"
    said = run.step("cp-1-node-metadata").stdout or ""
    assert said.splitlines() == [
        "ok: cp-1: labels and taints as declared",
        "changed: w-1: label team=nlp (was vision)",
        "changed: w-1: label zone=b added",
        "changed: w-1: label tier=a removed (no longer declared)",
        "changed: w-1: taint dedicated=nlp:NoSchedule (was dedicated=vision:NoSchedule)",
        "ok: w-2: labels and taints as declared",
    ], said
    node = hosts.clusters()[0]["nodes"]["w-1"]
    assert {k: v for k, v in node["labels"].items() if k in ("team", "zone", "tier", "ops/owner")} == {
        "team": "nlp",
        "zone": "b",
        "ops/owner": "alice",
    }
    assert {(t["key"], t.get("value")) for t in node["taints"]} == {("dedicated", "nlp"), ("ops/maintenance", None)}
    # The call log: one read of every node, then one label, one taint and one annotate call, all for w-1.
    writes = [c["argv"] for c in hosts["cp-1"].calls("kubectl")[calls:] if c["argv"][2] != "get"]
    assert [argv[2:5] for argv in writes] == [
        ["label", "node", "w-1"],
        ["taint", "node", "w-1"],
        ["annotate", "node", "w-1"],
    ]
    MEASUREMENTS["node-metadata: kubectl calls for one changed node of 3"] = len(hosts["cp-1"].calls("kubectl")) - calls

    # Every declared label and taint gone from the stack: removed from the Node, the others' stay.
    bare = {k: v for k, v in changed_worker.items() if k not in ("labels", "taints")}
    values, secret = hosts.stack_values([cp, bare, other])
    fleet_engine.up(values, secret).raise_error()
    node = hosts.clusters()[0]["nodes"]["w-1"]
    assert "team" not in node["labels"] and "zone" not in node["labels"] and node["labels"]["ops/owner"] == "alice"
    assert [t["key"] for t in node["taints"]] == ["ops/maintenance"]
    assert node["annotations"]["mlcluster.io/managed-labels"] == ""


def test_after_an_etcd_restore_every_kubelet_restarts_batch_by_batch_then_the_controllers_roll(
    fleet, fleet_engine
) -> None:
    """etcdSnapshots.restored: the restore call log. Each node's kubelet restarts in its batch (control plane, then
    one worker at a time), then cp-1 rolls the controllers namespace by namespace; once per name."""
    from components.render.etcd_snapshots import restore_rollout_namespaces

    from ..conftest import load_spec

    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"), HostSpec("w-2"))
    nodes = [hosts["cp-1"].node("control-plane"), hosts["w-1"].node(), hosts["w-2"].node()]
    values, secret = hosts.stack_values(nodes)
    fleet_engine.up(values, secret).raise_error()
    namespaces = restore_rollout_namespaces(load_spec(values, secret))
    # Controllers in the second namespace besides kubeadm's CoreDNS and kube-proxy in kube-system.
    with hosts.cluster_lock() as cluster:
        cluster["controllers"] = {namespaces[1]: ["deployment.apps/operator", "daemonset.apps/agent"]}
    marks = {name: len(hosts[name].calls()) for name in ("cp-1", "w-1", "w-2")}

    restored, secret = hosts.stack_values(nodes, etcdSnapshots={"restored": "etcd-scheduled-20261201T030000Z"})
    preview = fleet_engine.preview(restored, secret)
    preview.raise_error()
    assert preview.with_operation("update") == ["cp-1-kubelet", "w-1-kubelet", "w-2-kubelet"], preview.operations
    assert preview.with_operation("create") == ["cp-1-restore-rollout"]
    run = fleet_engine.up(restored, secret)
    run.raise_error()

    def restarts(name: str) -> list[float]:
        calls = hosts[name].calls()[marks[name] :]
        return [c["t0"] for c in calls if c["tool"] == "systemctl" and c["argv"][:2] == ["restart", "kubelet"]]

    kubelet = {name: restarts(name) for name in ("cp-1", "w-1", "w-2")}
    assert all(len(times) == 1 for times in kubelet.values()), kubelet
    assert kubelet["cp-1"][0] < kubelet["w-1"][0] < kubelet["w-2"][0], "not batch by batch"
    rolled = [
        (c["t0"], c["argv"][3], c["argv"][6:])
        for c in hosts["cp-1"].calls()[marks["cp-1"] :]
        if c["tool"] == "kubectl" and c["argv"][4:6] == ["rollout", "restart"]
    ]
    assert [(namespace, names) for _, namespace, names in rolled] == [
        ("kube-system", ["deployment.apps/coredns", "daemonset.apps/kube-proxy"]),
        (namespaces[1], ["deployment.apps/operator", "daemonset.apps/agent"]),
    ]
    assert min(t for t, _, _ in rolled) > kubelet["w-2"][0], "controllers rolled before the last kubelet restarted"
    # Deployments are waited for; a DaemonSet rolls node by node on its own (hours on a large fleet).
    waited = [
        c["argv"][6]
        for c in hosts["cp-1"].calls()[marks["cp-1"] :]
        if c["tool"] == "kubectl" and c["argv"][4:6] == ["rollout", "status"]
    ]
    assert waited == ["deployment.apps/coredns", "deployment.apps/operator"], waited
    said = run.step("cp-1-restore-rollout").stdout or ""
    assert f"ok: {namespaces[-1]}: no controller to roll" in said or len(namespaces) == 2
    assert "changed: controllers rolled after the etcd restore etcd-scheduled-20261201T030000Z" in said
    MEASUREMENTS["restore call log (s after the first kubelet restart)"] = ", ".join(
        [f"{n} kubelet {kubelet[n][0] - kubelet['cp-1'][0]:.1f}" for n in kubelet]
        + [f"{ns} rolled {t - kubelet['cp-1'][0]:.1f}" for t, ns, _ in rolled]
    )

    # Once per name: the same name runs nothing; a new one runs it all again.
    assert fleet_engine.up(restored, secret).steps == []
    again, secret = hosts.stack_values(nodes, etcdSnapshots={"restored": "second"})
    second = fleet_engine.up(again, secret)
    second.raise_error()
    assert sorted(s.resource for s in second.steps) == [
        "cp-1-kubelet",
        "cp-1-restore-rollout",
        "w-1-kubelet",
        "w-2-kubelet",
    ]


def test_a_saved_plan_applies_until_its_mint_window_ends_and_up_plan_refuses_it_after(fleet, fleet_engine) -> None:
    """`pulumi preview --save-plan` at 23:50 UTC with a worker to join, `pulumi up --plan` at 00:10: the join
    credentials' mint window (the UTC day) moved, so the engine refuses the plan at that step, before it runs
    (the program said at preview: the plan applies until 00:00). Previewed again after midnight, it applies."""
    from .engine import PlanViolationError

    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"))
    fleet_engine.clock = hosts.now
    at_utc_hour(hosts, 23)
    cp = hosts["cp-1"].node("control-plane")
    values, secret = hosts.stack_values([cp])
    fleet_engine.up(values, secret).raise_error()
    hosts.advance_clock(50 * 60)  # 23:50
    values, secret = hosts.stack_values([cp, hosts["w-1"].node()])
    plan = fleet_engine.preview(values, secret, save_plan=True).saved_plan
    assert plan is not None and any(urn.endswith("::cp-1-join-credentials") for urn in plan)
    hosts.advance_clock(20 * 60)  # 00:10, the next UTC day
    late = fleet_engine.up(values, secret, plan=plan)
    assert isinstance(late.error, PlanViolationError), late.error
    assert "cp-1-join-credentials violates plan: properties changed: ~~create" in str(late.error)
    assert not [s for s in late.steps if s.resource in ("cp-1-join-credentials", "w-1-kubeadm-join")]

    plan = fleet_engine.preview(values, secret, save_plan=True).saved_plan
    hosts.advance_clock(5 * 60)
    applied = fleet_engine.up(values, secret, plan=plan)
    applied.raise_error()
    assert applied.step("w-1-kubeadm-join").rc == 0
