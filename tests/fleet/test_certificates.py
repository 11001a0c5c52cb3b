"""kubeadm certificate expiry through `pulumi up`, on the SSH fleet and its engine with Pulumi's rules.

The kubeadm stub issues certificates a year ahead of the fleet clock (init, a control plane's join, `certs renew
all`, an upgrade) and prints `certs check-expiration -o json` as kubeadm does; the fleet "API" (kubectl stub)
refuses an admin client certificate past its notAfter. The program reads the previous deployment's `certificates`
output through a StackReference to its own stack, which the engine answers as the real one does, and counts days
on the fleet clock (`FleetEngine.clock`).
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from .engine import KUBERNETES_PROVIDER, FleetEngine, FleetRun
from .hosts import Fleet, FleetHost, HostSpec
from .measure import MEASUREMENTS

pytestmark = pytest.mark.fleet

DAY = 86400.0
CERT_TOOLS = ("kubeadm", "crictl", "kubectl")


def provider_kubeconfig(run: FleetRun) -> str:
    assert run.program is not None
    (provider,) = [r for r in run.program.resources if r.type == KUBERNETES_PROVIDER]
    return str(provider.raw_inputs["kubeconfig"])


def client_certificate_not_after(hosts: Fleet, kubeconfig: str) -> float:
    """The notAfter the fleet "API" holds for the kubeconfig's client certificate."""
    certificate = yaml.safe_load(kubeconfig)["users"][0]["user"]["client-certificate-data"]
    (cluster,) = hosts.clusters()
    return float(cluster["clientCertificates"][certificate])


def api_answers(host: FleetHost, kubeconfig: str) -> tuple[int, str]:
    """`kubectl get nodes` with this kubeconfig on the control plane: what the API does with it."""
    result = host.run(
        f"cat >/root/provider.kubeconfig <<'KUBECONFIG'\n{kubeconfig}\nKUBECONFIG\n"
        "kubectl --kubeconfig /root/provider.kubeconfig get nodes",
        check=False,
    )
    return result.returncode, (result.stdout + result.stderr).strip()


def earliest_days_left(engine: FleetEngine, now: float) -> float:
    record = engine.stack_outputs["fleet"]["certificates"]
    dates = [d for node in record["notAfter"].values() for d in node.values()]
    first = min(datetime.fromisoformat(d.replace("Z", "+00:00")) for d in dates)
    return (first - datetime.fromtimestamp(now, UTC)).total_seconds() / DAY


def certificate_calls(hosts: Fleet, since: float) -> list[str]:
    rows = []
    for name, host in hosts.hosts.items():
        for call in host.calls():
            if call["t0"] >= since and call["tool"] in CERT_TOOLS:
                line = " ".join([call["tool"], *call["argv"]]).replace("--kubeconfig /etc/kubernetes/admin.conf ", "")
                line = re.sub(r" --(cacert|cert|key)=\S+", "", line)  # etcdctl's client TLS files
                rows.append((call["t0"], f"{name}: {line[:100]} (rc {call['rc']})"))
    return [row for _, row in sorted(rows)]


WARNED = "mlcluster:certificates.renewBeforeDays: "
"""How the certificates' warnings start (components/warnings.py): the key they are about."""


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the certificates reported, warnings and notes alike, as `certificates: …`."""
    said = [r.getMessage() for r in caplog.records]
    return [m.replace(WARNED, "certificates: ", 1) for m in said if m.startswith(("certificates:", WARNED))]


def test_twenty_days_left_renews_and_the_provider_gets_the_renewed_kubeconfig(fleet, fleet_engine, caplog) -> None:
    caplog.set_level(logging.INFO)
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"))
    fleet_engine.clock = hosts.now
    values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane"), hosts["w-1"].node()])
    first = fleet_engine.up(values, secret)
    first.raise_error()
    assert "certificates: no record yet" in " ".join(messages(caplog))
    assert round(earliest_days_left(fleet_engine, hosts.now())) == 365
    assert fleet_engine.up(values, secret).steps == [], "an unchanged stack ran steps"
    old_kubeconfig = provider_kubeconfig(first)

    hosts.advance_clock(345 * DAY)
    caplog.clear()
    preview = fleet_engine.preview(values, secret)
    preview.raise_error()
    (reported,) = messages(caplog)
    assert reported.startswith("certificates: 20 days left: "), reported
    assert "this up renews" in reported
    assert preview.steps == []
    assert preview.operations["cp-1-certificates"] == "update"
    assert preview.operations["cp-1-admin-kubeconfig"] == "update"
    # The provider takes the new kubeconfig in place (clusterIdentifier): nothing is replaced, nothing else
    # changes (the worker's join ignores its renewed credentials).
    assert preview.with_operation("replace") == []
    assert set(preview.with_operation("update")) == {"cp-1-certificates", "cp-1-admin-kubeconfig", "kubernetes"}

    since = time.time() - 1
    before_days = earliest_days_left(fleet_engine, hosts.now())
    renewed = fleet_engine.up(values, secret)
    renewed.raise_error()
    calls = certificate_calls(hosts, since)
    renew = [i for i, c in enumerate(calls) if "kubeadm certs renew all" in c]
    assert len(renew) == 1 and calls[renew[0]].startswith("cp-1: ")
    # Read, renew, the static pods stopped and started again, the API ready, read again.
    assert "kubeadm certs check-expiration" in calls[renew[0] - 1]
    assert any(
        "crictl ps --name ^kube-apiserver$ --label io.kubernetes.pod.namespace=kube-system" in c
        for c in calls[renew[0] :]
    )
    # Ready means this node's own: its etcd member, then its API server at 127.0.0.1 (not the endpoint's).
    assert any("endpoint health" in c for c in calls[renew[0] :]), calls
    assert any(
        "kubectl --server https://127.0.0.1:6443 --tls-server-name kubernetes get --raw /readyz" in c
        for c in calls[renew[0] :]
    ), calls
    assert "kubeadm certs check-expiration" in calls[-1]
    assert renewed.step("cp-1-admin-kubeconfig").started >= renewed.step("cp-1-certificates").ended
    assert [s.resource for s in renewed.steps] == ["cp-1-certificates", "cp-1-admin-kubeconfig"]
    # The renewal's output (logged, kept in the state) carries dates, never key material.
    (cluster,) = hosts.clusters()
    printed = (renewed.step("cp-1-certificates").stdout or "") + renewed.step("cp-1-certificates").stderr
    assert "changed: cp-1: kubeadm certs renew all" in printed
    assert cluster["adminKey"] not in printed and not any(c in printed for c in cluster["clientCertificates"])
    after_days = earliest_days_left(fleet_engine, hosts.now())
    assert round(before_days) == 20 and round(after_days) == 365

    new_kubeconfig = provider_kubeconfig(renewed)
    assert new_kubeconfig != old_kubeconfig
    moved = (
        client_certificate_not_after(hosts, new_kubeconfig) - client_certificate_not_after(hosts, old_kubeconfig)
    ) / DAY
    assert round(moved) == 345
    assert new_kubeconfig.strip() == hosts["cp-1"].read("/etc/kubernetes/admin.conf").strip()
    assert fleet_engine.up(values, secret).steps == [], "a second up after the renewal ran steps"

    # A year after init the old kubeconfig is refused; the one the provider has now is not.
    hosts.advance_clock(30 * DAY)
    assert api_answers(hosts["cp-1"], old_kubeconfig) == (
        1,
        "error: You must be logged in to the server (Unauthorized)",
    )
    assert api_answers(hosts["cp-1"], new_kubeconfig)[0] == 0
    MEASUREMENTS["certificates: renewal up, 1+1 (s)"] = round(renewed.wall_seconds, 2)
    MEASUREMENTS["certificates: call log"] = calls
    MEASUREMENTS["certificates: days left before/after"] = [round(before_days, 2), round(after_days, 2)]
    MEASUREMENTS["certificates: provider kubeconfig's client certificate notAfter before/after"] = [
        datetime.fromtimestamp(client_certificate_not_after(hosts, k), UTC).isoformat(timespec="seconds")
        for k in (old_kubeconfig, new_kubeconfig)
    ]


def test_without_renewal_the_year_old_kubeconfig_is_refused(fleet, fleet_engine, caplog) -> None:
    caplog.set_level(logging.INFO)
    hosts = fleet(HostSpec("cp-1"))
    fleet_engine.clock = hosts.now
    values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane", "worker")])
    values["certificates"] = {"renew": False}
    first = fleet_engine.up(values, secret)
    first.raise_error()
    hosts.advance_clock(345 * DAY)
    caplog.clear()
    reported = fleet_engine.up(values, secret)
    reported.raise_error()
    assert reported.steps == [], "renewal is off: nothing may run"
    (message,) = messages(caplog)
    assert "20 days left" in message and "certificates.renew is off" in message
    hosts.advance_clock(21 * DAY)
    code, text = api_answers(hosts["cp-1"], provider_kubeconfig(reported))
    assert (code, text) == (1, "error: You must be logged in to the server (Unauthorized)")
    # The same stack with renewal on renews even after the expiry (kubeadm renews from the CA, offline).
    values["certificates"] = {"renew": True}
    late = fleet_engine.up(values, secret)
    late.raise_error()
    assert [s.resource for s in late.steps] == ["cp-1-certificates", "cp-1-admin-kubeconfig"]
    assert api_answers(hosts["cp-1"], provider_kubeconfig(late))[0] == 0


def test_three_control_planes_renew_one_at_a_time(fleet, fleet_engine) -> None:
    hosts = fleet(HostSpec("cp-1"), HostSpec("cp-2"), HostSpec("cp-3"))
    fleet_engine.clock = hosts.now
    nodes = [hosts[n].node("control-plane", "worker") for n in ("cp-1", "cp-2", "cp-3")]
    values, secret = hosts.stack_values(nodes, cluster={"controlPlaneEndpoint": "k8s-api.fleet.test:6443"})
    fleet_engine.up(values, secret).raise_error()
    hosts.advance_clock(340 * DAY)
    for name in ("cp-1", "cp-2", "cp-3"):
        hosts[name].set(latencies={"kubeadm certs": 0.3})
    renewed = fleet_engine.up(values, secret)
    renewed.raise_error()
    steps = [renewed.step(f"{n}-certificates") for n in ("cp-1", "cp-2", "cp-3")]
    for earlier, later in itertools.pairwise(steps):
        assert later.started >= earlier.ended, f"{later.resource} started before {earlier.resource} ended"
    for step in steps:
        assert "kubeadm certs renew all" in (step.stdout or "")
    record: dict[str, Any] = fleet_engine.stack_outputs["fleet"]["certificates"]
    assert sorted(record["notAfter"]) == ["cp-1", "cp-2", "cp-3"]
    MEASUREMENTS["certificates: 3 control planes, one at a time (start, end s)"] = [
        [s.resource, round(s.started - steps[0].started, 2), round(s.ended - steps[0].started, 2)] for s in steps
    ]


def test_a_rotated_ssh_key_reaches_every_later_step_and_the_renewal(fleet, fleet_engine) -> None:
    """Month 0 up; month 3 the SSH key is rotated (the old one removed from every host) and `up` runs with the new
    one; month 11 the renewal `up`. Every step that runs, the admin kubeconfig's re-read included, uses the stack's
    current key: none keeps the recorded connection (ignoreChanges would send the old key, refused)."""
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-1"))
    fleet_engine.clock = hosts.now
    nodes = [hosts["cp-1"].node("control-plane"), hosts["w-1"].node()]
    values, secret = hosts.stack_values(nodes)
    fleet_engine.up(values, secret).raise_error()
    first_kubeconfig = provider_kubeconfig(fleet_engine.up(values, secret))

    hosts.advance_clock(90 * DAY)
    hosts.rotate_client_key()
    rotated, secret = hosts.stack_values(nodes)
    assert rotated["ssh"]["privateKey"] != values["ssh"]["privateKey"]
    preview = fleet_engine.preview(rotated, secret)
    preview.raise_error()
    # A new key re-runs every node step (each checks before it acts) and copies the scripts again (the copy is
    # replaced on any connection change, as for a new address); the provider takes the re-read kubeconfig in place.
    assert preview.with_operation("replace") == ["cp-1-scripts", "w-1-scripts"]
    assert "cp-1-admin-kubeconfig" in preview.with_operation("update")
    after_rotation = fleet_engine.up(rotated, secret)
    after_rotation.raise_error()
    assert "cp-1-admin-kubeconfig" in [s.resource for s in after_rotation.steps]
    for step in after_rotation.steps:
        assert "changed:" not in (step.stdout or ""), f"{step.resource} changed a node on a key rotation"
    assert provider_kubeconfig(after_rotation) == first_kubeconfig, "the same admin.conf, read with the new key"
    assert fleet_engine.up(rotated, secret).steps == [], "an unchanged stack ran steps after the rotation"

    hosts.advance_clock(250 * DAY)
    renewed = fleet_engine.up(rotated, secret)
    renewed.raise_error()
    assert [s.resource for s in renewed.steps] == ["cp-1-certificates", "cp-1-admin-kubeconfig"]
    assert provider_kubeconfig(renewed) != first_kubeconfig
    assert round(earliest_days_left(fleet_engine, hosts.now())) == 365


def test_the_next_control_plane_waits_for_this_ones_own_etcd_member(fleet, fleet_engine) -> None:
    """3 control planes renew; cp-1's etcd member takes 4 s to be healthy after its pod is back (loading its data),
    while the control-plane endpoint keeps answering through cp-2 and cp-3. cp-2 must not park its pods before
    cp-1's member is healthy, or two of three members are down. Every node also runs a user's container named etcd
    (in namespace default): no step may pick it."""
    hosts = fleet(HostSpec("cp-1"), HostSpec("cp-2"), HostSpec("cp-3"))
    fleet_engine.clock = hosts.now
    names = ("cp-1", "cp-2", "cp-3")
    nodes = [hosts[n].node("control-plane", "worker") for n in names]
    values, secret = hosts.stack_values(nodes, cluster={"controlPlaneEndpoint": "k8s-api.fleet.test:6443"})
    fleet_engine.up(values, secret).raise_error()
    hosts.advance_clock(340 * DAY)
    for name in names:
        hosts[name].set(userContainers=["etcd"], staticPodReadySeconds={"etcd": 4.0} if name == "cp-1" else {})
    since = time.time() - 1
    renewed = fleet_engine.up(values, secret)
    renewed.raise_error()

    def member_back(name: str) -> float:
        """When the node's etcd member was healthy again: its manifest's return (ctime) plus its load time."""
        returned = float(hosts[name].run("stat -c %Z /etc/kubernetes/manifests/etcd.yaml").stdout)
        return returned + (4.0 if name == "cp-1" else 0.0)

    renewals = {
        name: min(
            c["t0"] for c in hosts[name].calls("kubeadm") if c["t0"] >= since and c["argv"][:2] == ["certs", "renew"]
        )
        for name in names
    }
    for earlier, later in itertools.pairwise(names):
        assert renewals[later] >= member_back(earlier), (
            f"{later} renewed {member_back(earlier) - renewals[later]:.1f} s before {earlier}'s etcd member was back"
        )
    # The wait said what it waited for: cp-1's member unhealthy at first, then healthy.
    health = [c["rc"] for c in hosts["cp-1"].calls("crictl") if c["t0"] >= since and "health" in c["argv"]]
    assert health[0] != 0 and health[-1] == 0, health
    # The user's etcd container was never exec'd into by a step.
    for name in names:
        assert not [c for c in hosts[name].calls("crictl") if c["argv"][:2] == ["exec", "9a7e5c3b1d0f"]]
    # The snapshot the timer takes finds the kube-system etcd too.
    out = hosts["cp-1"].run("bash /var/lib/mlcluster/etcd-snapshot.sh").stdout
    assert "changed: etcd snapshot /var/lib/mlcluster/etcd-snapshots/etcd-scheduled-" in out
    MEASUREMENTS["certificates: 3 CPs, cp-1's etcd 4 s to load: renewal start after the previous member back (s)"] = [
        round(renewals[later] - member_back(earlier), 2) for earlier, later in itertools.pairwise(names)
    ]
    MEASUREMENTS["certificates: 3 CPs, cp-1's etcd slow: call log"] = certificate_calls(hosts, since)
