"""What an acceptance run checks and how hard: the level, the bandwidth floors (each with its source), the outlier
rule and the wave bounds. A stack overrides any of it through `AcceptanceSpec`; the defaults are cited below."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

AcceptanceLevel = Literal["quick", "standard", "burn-in"]
NcclTest = Literal["loopback", "all-reduce"]
"""`loopback`: all_reduce_perf across the GPUs of one node (NVLink or PCIe); `all-reduce`: across the nodes."""

DCGM_RUN_LEVEL: dict[AcceptanceLevel, int] = {"quick": 1, "standard": 2, "burn-in": 3}
"""The `dcgmi diag -r N` each level runs (DCGM's levels 1-3; level 4 is left to a person, it runs for hours)."""

DCGM_LEVEL_SECONDS: dict[int, int] = {1: 60, 2: 120, 3: 900}
"""How long `dcgmi diag -r N` takes, from DCGM's `dcgmi diag` reference: level 1 "normally lasting seconds"
(budgeted as a minute), level 2 "approximately two minutes", level 3 "approximately 15 minutes"."""

LEVEL_ORDER: dict[AcceptanceLevel, int] = {"quick": 0, "standard": 1, "burn-in": 2}

ANY = "*"
"""A floor for every GPU model, or every fabric, unless a more specific floor names it."""


@dataclass(frozen=True)
class BandwidthFloor:
    """The least bus bandwidth (GB/s, at the largest message size) a node must reach in one NCCL test."""

    test: NcclTest
    gbps: float
    source: str
    gpu_model: str = ANY
    fabric: str = ANY
    """`nvlink` or `pcie` for loopback; the multi-node fabric (`eks`, `gke`, `infiniband`, …) for all-reduce."""

    def __post_init__(self) -> None:
        if not self.gbps > 0:
            raise ValueError(f"bandwidth floor for {self.describe()}: {self.gbps} GB/s must be more than 0")
        if not self.source.strip():
            raise ValueError(
                f"bandwidth floor for {self.describe()} needs a source: where does {self.gbps} GB/s come from?"
            )

    def matches(self, test: NcclTest, gpu_model: str, fabric: str) -> bool:
        """A floor for `H100` covers the nodes whose model is H100 or starts with `H100-` (H100-SXM-80GB)."""
        model = self.gpu_model in (ANY, gpu_model) or gpu_model.startswith(self.gpu_model + "-")
        return self.test == test and model and self.fabric in (ANY, fabric)

    def specificity(self) -> int:
        return (self.gpu_model != ANY) * 2 + (self.fabric != ANY)

    def describe(self) -> str:
        return f"{self.test} on {self.gpu_model} over {self.fabric}"


NVSENTINEL_PREFLIGHT = (
    "NVIDIA NVSentinel preflight checks (repository NVIDIA/NVSentinel, docs/configuration/preflight.md): "
)
ISSUE_36_AI_CLUSTER_RUNTIME = (
    "issue 36, quoting NVIDIA AI Cluster Runtime's multi-node all-reduce floors for H100 (not re-checked against an"
    " upstream page yet: confirm before relying on it)"
)

RDMA_FABRICS = ("rdma", "infiniband", "roce")
"""Fabric names of an RDMA all-reduce: `rdma` is the default with network.rdma on; a stack may name the kind."""

DEFAULT_FLOORS: tuple[BandwidthFloor, ...] = (
    BandwidthFloor(
        "loopback",
        150.0,
        NVSENTINEL_PREFLIGHT + "preflight-nccl-loopback, BW_THRESHOLD_GBPS default 150 (NVLink sustains 150+ GB/s)",
        fabric="nvlink",
    ),
    BandwidthFloor(
        "loopback",
        15.0,
        NVSENTINEL_PREFLIGHT + "preflight-nccl-loopback, 'set to approx 15 GB/s for PCIe interconnect'",
        fabric="pcie",
    ),
    # An RDMA fabric only: NVSentinel's multi-node preflight runs over InfiniBand/RoCE. Over TCP (no RDMA) no
    # upstream figure exists; the outlier rule still fails the slow group, and a stack can set its own floor.
    *(
        BandwidthFloor(
            "all-reduce",
            100.0,
            NVSENTINEL_PREFLIGHT + "preflight-nccl-allreduce, BW_THRESHOLD_GBPS default 100 (at 4G messages)",
            fabric=fabric,
        )
        for fabric in RDMA_FABRICS
    ),
    BandwidthFloor("all-reduce", 300.0, ISSUE_36_AI_CLUSTER_RUNTIME + ": H100 on EKS ≥ 300 GB/s", "H100", "eks"),
    BandwidthFloor("all-reduce", 250.0, ISSUE_36_AI_CLUSTER_RUNTIME + ": H100 on GKE ≥ 250 GB/s", "H100", "gke"),
)

DEFAULT_OUTLIER_FRACTION = 0.40
"""A node this far (or farther) below the median of its peers fails even above its floor: issue 36's default. A
floor catches a broken fabric; the outlier rule catches one slow node in a fleet that clears the floor easily."""

DEFAULT_MAX_WAVE_NODES = 64
"""At most this many nodes are tested at once. Each node of a wave pulls the test image (several GB) at the same
time, and every GPU of a node is busy for the whole diagnostic; 64 keeps the pull burst on the image mirror and the
lost capacity bounded while a 1,000-node fleet still finishes a standard run in an afternoon (see waves.py)."""

DEFAULT_MAX_FLEET_FRACTION = 0.10
"""And never more than this share of the GPU nodes at once, so a small fleet keeps 90 % of its GPUs for work."""


@dataclass(frozen=True)
class AcceptanceSpec:
    level: AcceptanceLevel = "standard"
    floors: tuple[BandwidthFloor, ...] = ()
    """This stack's floors; each wins over a default floor of the same specificity (and needs its own source)."""
    outlier_fraction: float = DEFAULT_OUTLIER_FRACTION
    max_wave_nodes: int = DEFAULT_MAX_WAVE_NODES
    max_fleet_fraction: float = DEFAULT_MAX_FLEET_FRACTION
    default_floors: tuple[BandwidthFloor, ...] = field(default=DEFAULT_FLOORS, repr=False)

    def __post_init__(self) -> None:
        if self.level not in DCGM_RUN_LEVEL:
            raise ValueError(f"acceptance level {self.level!r} is none of {', '.join(DCGM_RUN_LEVEL)}")
        if not 0 < self.outlier_fraction < 1:
            raise ValueError(
                f"acceptance outlier fraction {self.outlier_fraction} must lie between 0 and 1 (0.40: a node 40 %"
                " below the median of its peers fails)"
            )
        if self.max_wave_nodes < 1:
            raise ValueError(f"acceptance max wave nodes {self.max_wave_nodes} must be 1 or more")
        if not 0 < self.max_fleet_fraction <= 1:
            raise ValueError(f"acceptance max fleet fraction {self.max_fleet_fraction} must lie in (0, 1]")

    @property
    def dcgm_run_level(self) -> int:
        return DCGM_RUN_LEVEL[self.level]

    def floor_for(self, test: NcclTest, gpu_model: str, fabric: str) -> BandwidthFloor | None:
        """The most specific floor for this test, GPU model and fabric; the stack's own first on a tie."""
        candidates = [
            (floor.specificity(), rank, floor)
            for rank, floors in ((1, self.floors), (0, self.default_floors))
            for floor in floors
            if floor.matches(test, gpu_model, fabric)
        ]
        if not candidates:
            return None
        return max(candidates, key=lambda item: (item[0], item[1]))[2]
