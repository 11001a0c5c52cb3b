"""When a saved plan stops applying: the program's inputs that follow the clock (the join credentials' mint window, a
due certificate renewal's date) move at known moments, and the preview says when (docs/review.md, "Apply exactly
what was reviewed"). The fleet shows `pulumi up --plan` refusing a plan across that moment
(tests/fleet/test_day2.py) under the engine's update-plan rule (tests/fleet/test_engine.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from components.config.care import CertificatesSpec
from components.render.certificates import PLAN_APPLIES_UNTIL, Record, decide
from components.render.join_credentials import window_end

from .test_plan_cli import plan


@pytest.mark.parametrize(
    ("window", "end"),
    [("2026-12-03", "2026-12-04T00:00:00+00:00"), ("2026-12-03T23", "2026-12-04T00:00:00+00:00"),
     ("2026-12-31T09", "2026-12-31T10:00:00+00:00"), ("2026-12-31", "2027-01-01T00:00:00+00:00")],
)  # fmt: skip
def test_a_mint_window_ends_with_its_utc_day_or_hour(window: str, end: str) -> None:
    assert window_end(window).isoformat() == end


def test_the_offline_plan_says_until_when_a_plan_saved_now_applies(tmp_path) -> None:
    result = plan("--stack", "onprem", "--out", str(tmp_path / "p"), "--at", "2026-12-03T23:50:00Z")
    assert result.returncode == 0, result.stderr
    said = result.stdout + result.stderr
    # Control planes still to join: the window is the hour.
    assert "mint window 2026-12-03T23 (UTC)" in said
    assert f"{PLAN_APPLIES_UNTIL} 2026-12-04T00:00:00Z (the window moves then)" in said


def record(not_after: str) -> Record:
    return Record("2026-01-01T00:00:00Z", {"cp-1": {"apiserver": not_after}})


NOW = datetime(2026, 12, 3, 16, 0, tzinfo=UTC)


def test_a_due_renewal_says_its_plan_applies_until_midnight() -> None:
    decision = decide(record("2026-12-20T10:00:00Z"), NOW, CertificatesSpec())
    assert decision.due and f"{PLAN_APPLIES_UNTIL} 2026-12-04T00:00:00Z" in decision.message


def test_a_renewal_falling_due_within_a_day_says_when_and_one_far_off_says_nothing() -> None:
    # 30 days before 2027-01-03T08:00 is 2026-12-04T08:00: 16 h after NOW, the steps' renewal date moves then.
    due = decide(record("2027-01-03T08:00:00Z"), NOW, CertificatesSpec())
    assert not due.due and f"renewal falls due at 2026-12-04T08:00:00Z: {PLAN_APPLIES_UNTIL}" in due.message
    later = decide(record("2027-06-01T00:00:00Z"), NOW, CertificatesSpec())
    assert not later.due and PLAN_APPLIES_UNTIL not in later.message
    # With renewals off nothing moves: the record's date stays.
    off = decide(record("2027-01-03T08:00:00Z"), NOW, CertificatesSpec(renew=False))
    assert PLAN_APPLIES_UNTIL not in off.message
