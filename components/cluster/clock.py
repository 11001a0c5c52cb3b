"""The program's clock: what the certificates' days left and the join credentials' mint window are counted against.

One place, so that the SSH fleet's tests move it together with their stubs' clock, and so that an offline plan can
be made for a given moment (`python -m components.plan --at`): two plans compared then differ only by their stacks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

_fixed: list[datetime] = []
"""The moments `fixed_at` holds, innermost last."""


def utc_now() -> datetime:
    return _fixed[-1] if _fixed else datetime.now(UTC)


@contextmanager
def fixed_at(moment: datetime) -> Iterator[None]:
    """Every reading of the clock inside gives `moment` (an aware datetime)."""
    if moment.tzinfo is None:
        raise ValueError("the program's clock needs an aware moment (a UTC offset)")
    _fixed.append(moment.astimezone(UTC))
    try:
        yield
    finally:
        _fixed.pop()
