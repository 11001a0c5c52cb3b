"""Which nodes are tested together, how long a wave may take, and how long the whole fleet takes at each level.

A wave is at most `max_wave_nodes` nodes and at most `max_fleet_fraction` of the GPU nodes (at least one node).
Its expected time is the start of the test pods (a cold pull of the test image included), the DCGM diagnostic of
the level and the NCCL test; the timeout is twice that, so a node that hangs fails its wave instead of holding the
rollout, and a slow image mirror is not mistaken for a broken node.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .spec import DCGM_LEVEL_SECONDS, DCGM_RUN_LEVEL, AcceptanceLevel, AcceptanceSpec

POD_START_SECONDS = 300
"""Scheduling and a cold pull of the test image (several GB) on every node of the wave at once; with the image
already on the nodes this is seconds, so the estimate is the first run's."""
NCCL_TEST_SECONDS = 180
"""all_reduce_perf from 8 B to 8 GiB: the sample in tests/fixtures/acceptance spends about 2 s at 8 GiB over 25
iterations and well under a minute in all; three minutes leaves room for NCCL's start on a large wave."""
TIMEOUT_FACTOR = 2


@dataclass(frozen=True)
class Wave:
    index: int
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class WavePlan:
    level: AcceptanceLevel
    dcgm_run_level: int
    wave_size: int
    waves: tuple[Wave, ...]
    wave_expected_seconds: int
    wave_timeout_seconds: int

    @property
    def total_expected_seconds(self) -> int:
        return self.wave_expected_seconds * len(self.waves)

    @property
    def total_timeout_seconds(self) -> int:
        return self.wave_timeout_seconds * len(self.waves)

    def summary(self) -> str:
        nodes = sum(len(wave.nodes) for wave in self.waves)
        return (
            f"{nodes} nodes at {self.level} (dcgmi diag -r {self.dcgm_run_level}): {len(self.waves)} waves of at"
            f" most {self.wave_size}, {self.wave_expected_seconds // 60} min each (timeout"
            f" {self.wave_timeout_seconds // 60} min), about {_hours(self.total_expected_seconds)} in all"
        )


def _hours(seconds: int) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds // 60} min"


def wave_size(node_count: int, spec: AcceptanceSpec) -> int:
    """The most nodes one wave takes: the smaller of the node bound and the fleet share, never under one."""
    return max(1, min(spec.max_wave_nodes, math.floor(node_count * spec.max_fleet_fraction)))


def wave_seconds(level: AcceptanceLevel) -> int:
    return POD_START_SECONDS + DCGM_LEVEL_SECONDS[DCGM_RUN_LEVEL[level]] + NCCL_TEST_SECONDS


def plan_waves(nodes: Sequence[str], spec: AcceptanceSpec, level: AcceptanceLevel | None = None) -> WavePlan:
    """The waves for these nodes in the order given (the caller sorts, e.g. by rack, to spread a wave out)."""
    if len(set(nodes)) != len(nodes):
        raise ValueError("the wave plan was given a node more than once")
    chosen = level or spec.level
    size = wave_size(len(nodes), spec)
    waves = tuple(Wave(index=i // size, nodes=tuple(nodes[i : i + size])) for i in range(0, len(nodes), size))
    expected = wave_seconds(chosen)
    return WavePlan(
        level=chosen,
        dcgm_run_level=DCGM_RUN_LEVEL[chosen],
        wave_size=size,
        waves=waves,
        wave_expected_seconds=expected,
        wave_timeout_seconds=expected * TIMEOUT_FACTOR,
    )
