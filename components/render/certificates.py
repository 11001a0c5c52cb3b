"""kubeadm certificate expiry: the days left the plan reports, and when `up` renews.

A preview runs no command, and a no-change `up` opens no SSH session, so the dates cannot be read when the
program runs: the `certificates` step on each control plane prints kubeadm's dates (`kubeadm certs
check-expiration -o json`), the program exports them as the `certificates` stack output, and the next run reads
that output of the previous deployment (a StackReference to its own stack; empty before the first deployment)
and counts the days left against the program's clock.

The renewal is an input change: `renew_before` names a UTC date, and the steps renew the certificates that expire
before it. It changes only when the earliest recorded date is under `certificates.renewBeforeDays`; otherwise
it stays what the last `up` used (it is part of the record), so an unchanged stack runs nothing. The steps compare
that date with the certificates themselves, not with the node's clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..config.care import CertificatesSpec
from ..config.nodes import NodeSpec
from .kubeadm import API_SERVER_PORT
from .shell import NodeStep, rendered_step
from .upgrade import POLL_SECONDS, UPGRADE_LOG_DIR

OUTPUT = "certificates"
"""The stack output the dates are recorded in (and read back from by the next run)."""
RECORD_PREFIX = "ok: certificates: "
"""The step's last line: this prefix, then kubeadm's JSON on one line."""
MANIFESTS = "/etc/kubernetes/manifests"
PARKED = "/etc/kubernetes/mlcluster-restart"
"""Where the static-pod manifests wait while the kubelet stops the control-plane pods."""
RESTART_TIMEOUT_SECONDS = 300
"""The kubelet looks at its manifest directory every 20 s; an API server starts in well under a minute."""
_RFC3339 = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Record:
    """What the last `up` read: each control plane's certificates' expiration dates, and the renewal date it used."""

    renew_before: str
    not_after: Mapping[str, Mapping[str, str]]
    """node -> certificate name (as kubeadm names it: admin.conf, apiserver, ...) -> RFC 3339 date."""


@dataclass(frozen=True)
class Expiry:
    node: str
    certificate: str
    not_after: datetime
    left: timedelta

    @property
    def days_left(self) -> int:
        """Whole days, to the nearest (a certificate issued 345 days ago a few seconds before now has 20 left)."""
        return round(self.left / timedelta(days=1))


@dataclass(frozen=True)
class Decision:
    renew_before: str
    """The renewal date for this run's steps: unchanged from the record unless a renewal is due."""
    due: bool
    earliest: Expiry | None
    message: str
    warn: bool = False
    """Worth a warning: a renewal is due, or would be with `certificates.renew` on."""


def parse_expiration(text: str) -> dict[str, str]:
    """kubeadm's `certs check-expiration -o json` (output.kubeadm.k8s.io/v1alpha3 CertificateExpirationInfo):
    the certificates' names and dates. Certificate authorities (10 years; not renewed by `renew all`), missing
    and externally managed certificates are left out."""
    info = json.loads(text)
    if info.get("kind") != "CertificateExpirationInfo":
        raise ValueError(f"not kubeadm's CertificateExpirationInfo: kind {info.get('kind')!r}")
    return {
        str(cert["name"]): str(cert["expirationDate"])
        for cert in info.get("certificates") or []
        if not cert.get("missing") and not cert.get("externallyManaged") and cert.get("expirationDate")
    }


def parse_step_output(stdout: str) -> dict[str, str]:
    """The dates in a `certificates` step's output (its last `ok: certificates: ` line)."""
    lines = [line for line in stdout.splitlines() if line.startswith(RECORD_PREFIX)]
    if not lines:
        raise ValueError(f"the certificates step printed no '{RECORD_PREFIX}' line")
    return parse_expiration(lines[-1].removeprefix(RECORD_PREFIX))


def record_output(renew_before: str, stdouts: Mapping[str, str]) -> dict[str, Any]:
    """The stack output of this run: the renewal date its steps used and the dates they printed, by node. A step
    whose output has no dates (recorded by an older program) is left out: with none left, the next run has no
    record, and its steps read the dates again."""
    dates: dict[str, dict[str, str]] = {}
    for node, out in stdouts.items():
        try:
            dates[node] = parse_step_output(out)
        except ValueError:
            continue
    return {"renewBefore": renew_before, "notAfter": dates}


def record_from_output(value: Any) -> Record | None:
    """The previous deployment's stack output as a Record; None when there is none (a first `up`) or it is not
    one this program wrote (then the steps read the dates again, and renew nothing)."""
    if not isinstance(value, Mapping):
        return None
    renew_before, not_after = value.get("renewBefore"), value.get("notAfter")
    if not isinstance(renew_before, str) or not isinstance(not_after, Mapping) or not not_after:
        return None
    if not all(isinstance(dates, Mapping) and dates for dates in not_after.values()):
        return None
    return Record(renew_before, {str(n): {str(c): str(d) for c, d in dates.items()} for n, dates in not_after.items()})


def _date(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def earliest(record: Record, now: datetime) -> Expiry:
    """The certificate that expires first, over every control plane the record has."""
    found = min(
        (_date(date), node, cert) for node, dates in sorted(record.not_after.items()) for cert, date in dates.items()
    )
    return Expiry(found[1], found[2], found[0], found[0] - now)


PLAN_APPLIES_UNTIL = "a plan saved now (pulumi preview --save-plan) applies until"
"""How a clock-dependent decision says when `pulumi up --plan` starts refusing the plan its preview saved: the
program's inputs move at that moment (docs/review.md, "Apply exactly what was reviewed")."""


def _next_midnight(moment: datetime) -> str:
    """The UTC midnight at or after `moment`: one date per day, so a preview and the `up` after it agree."""
    day = moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if day < moment:
        day += timedelta(days=1)
    return day.strftime(_RFC3339)


def decide(record: Record | None, now: datetime, spec: CertificatesSpec) -> Decision:
    """Whether this run renews, and the renewal date its steps carry. `now` is the program's clock."""
    if now.tzinfo is None:
        raise ValueError("now must carry a timezone")
    if record is None:
        return Decision("", False, None, "certificates: no record yet: this up reads them on the control planes")
    first = earliest(record, now)
    left = f"{first.days_left} days left" if first.left >= timedelta(0) else f"expired {-first.days_left} days ago"
    where = f"{first.certificate} on {first.node} ({first.not_after.strftime(_RFC3339)})"
    threshold = timedelta(days=spec.renew_before_days)
    if first.left >= threshold:
        due = first.not_after - threshold
        # The renewal falling due changes the steps' inputs: a plan saved before that moment no longer applies after.
        soon = f"; renewal falls due at {due.strftime(_RFC3339)}: {PLAN_APPLIES_UNTIL} {due.strftime(_RFC3339)}"
        moves = spec.renew and due - now < timedelta(days=1)
        return Decision(record.renew_before, False, first, f"certificates: {left}: {where}" + (soon if moves else ""))
    if not spec.renew:
        return Decision(
            record.renew_before,
            False,
            first,
            f"certificates: {left}: {where}; under {spec.renew_before_days} days, and certificates.renew is off",
            warn=True,
        )
    renew_before = _next_midnight(now + threshold)
    return Decision(
        renew_before,
        True,
        first,
        f"certificates: {left}: {where}; under {spec.renew_before_days} days: this up renews every control"
        f" plane's certificates expiring before {renew_before} and reads the admin kubeconfig again;"
        f" {PLAN_APPLIES_UNTIL} {_next_midnight(now)} (the renewal date moves with the UTC day)",
        warn=True,
    )


def certificates_step(node: NodeSpec, renew_before: str) -> NodeStep:
    settings = {
        "NODE_NAME": node.name,
        "RENEW_BEFORE": renew_before,
        "MANIFESTS": MANIFESTS,
        "PARKED": PARKED,
        "RESTART_TIMEOUT_SECONDS": str(RESTART_TIMEOUT_SECONDS),
        "POLL_SECONDS": str(POLL_SECONDS),
        "CERTS_LOG": f"{UPGRADE_LOG_DIR}/kubeadm-certs-renew.log",
        "API_PORT": str(API_SERVER_PORT),
    }
    title = (
        f"Renew kubeadm's certificates expiring before {renew_before}, restart the control-plane pods"
        if renew_before
        else "Read kubeadm's certificate expiry dates"
    )
    return rendered_step("certificates", title, settings)
