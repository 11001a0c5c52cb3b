"""Certificate expiry as data: kubeadm's dates, the days left, when `up` renews, and how the program wires it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pulumi.runtime import mocks as pulumi_mocks

from components.config.care import CertificatesSpec
from components.config.schema import ConfigError
from components.plan.engine import PreviewMocks
from components.render.certificates import (
    Record,
    certificates_step,
    decide,
    earliest,
    parse_expiration,
    parse_step_output,
    record_from_output,
    record_output,
)
from components.render.node_steps import admin_kubeconfig_step
from components.render.shell import script_source

from .conftest import Run
from .test_config_validation import HOST_KEY
from .test_upgrade import cluster

NOW = datetime(2027, 6, 1, 12, 0, tzinfo=UTC)
SPEC = CertificatesSpec()  # renew, 30 days


def kubeadm_json(dates: dict[str, str], ca: str = "2036-01-01T00:00:00Z") -> str:
    """`kubeadm certs check-expiration -o json` as kubeadm prints it (output.kubeadm.k8s.io/v1alpha3)."""
    certificates: list[dict[str, Any]] = [
        {
            "name": name,
            "expirationDate": date,
            "residualTime": 0,
            "externallyManaged": False,
            "caName": "etcd-ca" if name.startswith("etcd") else "ca",
            "missing": False,
        }
        for name, date in dates.items()
    ]
    certificates.append({"name": "front-proxy-client", "expirationDate": None, "residualTime": 0, "missing": True})
    return json.dumps(
        {
            "kind": "CertificateExpirationInfo",
            "apiVersion": "output.kubeadm.k8s.io/v1alpha3",
            "certificates": certificates,
            "certificateAuthorities": [
                {"name": "ca", "expirationDate": ca, "residualTime": 0, "externallyManaged": False, "missing": False}
            ],
        },
        indent=4,
    )


def record(**nodes: dict[str, str]) -> Record:
    return Record("", nodes)


def expiring_in(days: float, name: str = "admin.conf") -> dict[str, str]:
    return {name: (NOW + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ"), "apiserver": "2028-01-01T00:00:00Z"}


def test_kubeadm_output_gives_the_certificates_not_the_authorities_or_the_missing() -> None:
    dates = parse_expiration(
        kubeadm_json({"admin.conf": "2027-07-01T10:00:00Z", "etcd-server": "2027-07-02T10:00:00Z"})
    )
    assert dates == {"admin.conf": "2027-07-01T10:00:00Z", "etcd-server": "2027-07-02T10:00:00Z"}
    with pytest.raises(ValueError, match="not kubeadm's CertificateExpirationInfo"):
        parse_expiration(json.dumps({"kind": "UpgradePlan"}))


def test_the_steps_last_line_is_what_the_record_keeps() -> None:
    out = "ok: cp-1: earliest certificate expires 2027-07-01T10:00:00Z\nok: certificates: " + kubeadm_json(
        {"admin.conf": "2027-07-01T10:00:00Z"}
    ).replace("\n", "")
    assert parse_step_output(out) == {"admin.conf": "2027-07-01T10:00:00Z"}
    with pytest.raises(ValueError, match="printed no 'ok: certificates: ' line"):
        parse_step_output("ok: nothing\n")
    written = record_output("2027-05-02T00:00:00Z", {"cp-1": out, "cp-2": "ok: printed by an older step\n"})
    assert record_from_output(written) == Record(
        "2027-05-02T00:00:00Z", {"cp-1": {"admin.conf": "2027-07-01T10:00:00Z"}}
    )


@pytest.mark.parametrize("value", [None, {}, "text", {"renewBefore": "", "notAfter": {}}, {"notAfter": {"cp-1": {}}}])
def test_no_usable_record_is_a_first_up(value: Any) -> None:
    assert record_from_output(value) is None
    decision = decide(record_from_output(value), NOW, SPEC)
    assert (decision.renew_before, decision.due, decision.earliest) == ("", False, None)
    assert "no record yet" in decision.message


def test_exactly_at_the_threshold_is_not_due_a_second_under_is() -> None:
    at = decide(record(**{"cp-1": expiring_in(30)}), NOW, SPEC)
    assert (at.due, at.renew_before, at.earliest and at.earliest.days_left) == (False, "", 30)
    under = decide(record(**{"cp-1": expiring_in(30 - 1 / 86400)}), NOW, SPEC)
    assert under.due and under.warn
    # The next UTC midnight after now + 30 days: one renewal date per day, so a preview and its `up` agree.
    assert under.renew_before == "2027-07-02T00:00:00Z"
    assert "30 days left: admin.conf on cp-1" in under.message


def test_a_renewal_date_lies_after_the_certificate_it_renews() -> None:
    # Whatever the hour, the steps renew what expires before the date: the earliest one must be before it.
    for hours in range(0, 24 * 30, 7):
        now = NOW + timedelta(hours=hours)
        first = earliest(record(**{"cp-1": expiring_in(29.9)}), now)
        decision = decide(record(**{"cp-1": expiring_in(29.9)}), now, SPEC)
        if decision.due:
            assert first.not_after.strftime("%Y-%m-%dT%H:%M:%SZ") < decision.renew_before


def test_expired_certificates_are_due_and_said_so() -> None:
    decision = decide(record(**{"cp-1": expiring_in(-3)}), NOW, SPEC)
    assert decision.due and decision.warn
    assert "expired 3 days ago" in decision.message


def test_the_earliest_of_several_control_planes_decides() -> None:
    several = record(**{"cp-1": expiring_in(200), "cp-2": expiring_in(12, "etcd-peer"), "cp-3": expiring_in(100)})
    decision = decide(several, NOW, SPEC)
    assert decision.due and decision.earliest is not None
    assert (decision.earliest.node, decision.earliest.certificate, decision.earliest.days_left) == (
        "cp-2",
        "etcd-peer",
        12,
    )


def test_not_due_keeps_the_renewal_date_the_last_up_used() -> None:
    # After a renewal the record carries its date: later runs keep it, so their steps do not change.
    renewed = Record("2027-07-02T00:00:00Z", {"cp-1": expiring_in(364)})
    assert decide(renewed, NOW, SPEC).renew_before == "2027-07-02T00:00:00Z"
    assert not decide(renewed, NOW, SPEC).due


def test_renewal_off_reports_but_changes_nothing() -> None:
    off = CertificatesSpec(renew=False)
    decision = decide(Record("2026-07-01T00:00:00Z", {"cp-1": expiring_in(20)}), NOW, off)
    assert (decision.due, decision.renew_before, decision.warn) == (False, "2026-07-01T00:00:00Z", True)
    assert "20 days left" in decision.message and "certificates.renew is off" in decision.message


def test_the_program_clock_decides_whatever_its_timezone() -> None:
    # Clock skew: the same instant in another zone gives the same answer; a program clock behind the nodes' sees
    # more days left (the renewal then comes later: the steps compare dates, not clocks).
    local = NOW.astimezone(timezone(timedelta(hours=-7)))
    state = record(**{"cp-1": expiring_in(29)})
    assert decide(state, local, SPEC) == decide(state, NOW, SPEC)
    behind = decide(state, NOW - timedelta(days=2), SPEC)
    assert not behind.due and behind.earliest is not None and behind.earliest.days_left == 31
    with pytest.raises(ValueError, match="timezone"):
        decide(state, NOW.replace(tzinfo=None), SPEC)


def test_steps_name_their_renewal_date_and_the_kubeconfig_step_changes_only_for_a_renewal() -> None:
    spec = cluster(1, 0)
    node = spec.control_planes[0]
    read = certificates_step(node, "")
    assert read.settings["RENEW_BEFORE"] == "" and read.title == "Read kubeadm's certificate expiry dates"
    renew = certificates_step(node, "2027-07-02T00:00:00Z")
    assert "RENEW_BEFORE=2027-07-02T00:00:00Z" in (renew.script or "")
    assert renew.script != read.script and "renew" in renew.title.lower()
    # No renewal: the admin kubeconfig step is the file as before (an existing stack's step does not change).
    assert admin_kubeconfig_step("").script == script_source("admin-kubeconfig.sh")
    renewed = admin_kubeconfig_step("2027-07-02T00:00:00Z").script or ""
    assert renewed != script_source("admin-kubeconfig.sh") and "2027-07-02T00:00:00Z" in renewed
    assert renewed.startswith("#!/usr/bin/env bash\n") and "cat /etc/kubernetes/admin.conf" in renewed


def test_certificate_settings_are_validated_with_their_key_paths() -> None:
    with pytest.raises(ConfigError) as raised:
        cluster(1, 0, certificates={"renew": "yes", "renewBeforeDays": 365})
    report = str(raised.value)
    assert "mlcluster:certificates.renew" in report and "mlcluster:certificates.renewBeforeDays" in report
    with pytest.raises(ConfigError, match=r"certificates\.renewBeforeDays: .*between 1 and 364"):
        cluster(1, 0, certificates={"renewBeforeDays": 0})
    assert cluster(1, 0, certificates={"renewBeforeDays": 60}).certificates.renew_before_days == 60


def _values(control_planes: int) -> dict[str, Any]:
    spec_values: dict[str, Any] = {
        "kubernetesVersion": "1.35.0",
        "cluster": {"name": "lab", **({"controlPlaneEndpoint": "api.lab:6443"} if control_planes > 1 else {})},
        "ssh": {"privateKey": "KEY"},
        "nodes": [
            {"name": f"cp-{i + 1}", "host": f"198.18.0.{10 + i}", "roles": ["control-plane"], "hostKey": HOST_KEY}
            for i in range(control_planes)
        ]
        + [{"name": "w-1", "host": "198.18.0.50", "roles": ["worker"], "hostKey": HOST_KEY}],
        **{layer: {"enabled": False} for layer in ("gpuOperator", "kueue", "kserve", "kubeflow", "storage")},
        "monitoring": {"enabled": False},
    }
    return spec_values


def test_program_first_up_reads_and_a_due_record_renews_one_control_plane_after_another(run_stack: Any) -> None:
    first: Run = run_stack("lab", values=_values(3), secret=["ssh"])
    steps = {r.name: r for r in first.resources if r.name.endswith("-certificates")}
    assert sorted(steps) == ["cp-1-certificates", "cp-2-certificates", "cp-3-certificates"]
    assert all("RENEW_BEFORE=''" in (s.raw_inputs.get("create") or "") for s in steps.values())
    # One at a time, the first first; the admin kubeconfig after the first one's (no join waits on it).
    assert first.urn_of("cp-1-certificates") in steps["cp-2-certificates"].depends_on
    assert first.urn_of("cp-2-certificates") in steps["cp-3-certificates"].depends_on
    assert first.urn_of("cp-3-kubeadm-join") in steps["cp-3-certificates"].depends_on
    kubeconfig = first.named("cp-1-admin-kubeconfig")
    assert first.urn_of("cp-1-certificates") in kubeconfig.depends_on
    assert first.urn_of("cp-1-admin-kubeconfig") not in first.named("w-1-kubeadm-join").depends_on

    previous = {"certificates": {"renewBefore": "", "notAfter": {"cp-1": expiring_in(-400), "cp-2": expiring_in(300)}}}
    due: Run = run_stack("lab", values=_values(3), secret=["ssh"], mocks=PreviewMocks(previous))
    creates = {n: due.named(n).raw_inputs["create"] for n in steps}
    # The record is a year old by any clock: every control plane's step names the same renewal date.
    dates = {c.split("RENEW_BEFORE=", 1)[1].split("\n", 1)[0] for c in creates.values()}
    assert len(dates) == 1 and dates != {"''"}
    assert dates.pop() in due.named("cp-1-admin-kubeconfig").raw_inputs["create"]
    assert kubeconfig.raw_inputs["create"] != due.named("cp-1-admin-kubeconfig").raw_inputs["create"]


class EchoMocks(pulumi_mocks.Mocks):
    """Mocks written for something else: every resource echoes its inputs, a stack reference too."""

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


def test_mocks_that_do_not_know_stack_references_read_a_stack_never_deployed(run_stack: Any) -> None:
    run: Run = run_stack("lab", values=_values(1), secret=["ssh"], mocks=EchoMocks())
    assert "RENEW_BEFORE=''" in run.named("cp-1-certificates").raw_inputs["create"]
