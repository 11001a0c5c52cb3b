"""The program's clock: what the certificates' days left and the join credentials' mint window are counted against.

One place, so that the SSH fleet's tests move it together with their stubs' clock."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)
