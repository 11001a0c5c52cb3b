"""Numbers the fleet tests measure (wall times, SSH sessions per step, peak concurrency), printed at the end
of the pytest run and written to build/fleet-measurements.json."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from .hosts import FleetHost

MEASUREMENTS: dict[str, Any] = {}


def sessions_per_step(host: FleetHost) -> Counter[str]:
    """SSH sessions the host served, by the mlcluster step each ran (from the ForceCommand recorder)."""
    return Counter(s["step"] for s in host.sessions() if s["event"] == "start")


def peak_overlap(intervals: Iterable[tuple[float, float]]) -> int:
    """The most (start, end) intervals open at one moment."""
    events = sorted(event for start, end in intervals for event in ((start, 1), (end, -1)))
    peak = current = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak


def peak_concurrent_sessions(host: FleetHost) -> int:
    starts = {s["pid"]: s["t"] for s in host.sessions() if s["event"] == "start"}
    return peak_overlap((starts[s["pid"]], s["t"]) for s in host.sessions() if s["event"] == "end")
