"""`acceptance`: the GPU burn-in and NCCL bandwidth run after the platform is installed (docs/acceptance.md).

The settings become a `components.acceptance.spec.AcceptanceSpec` (levels, floors, outlier rule, wave bounds);
the rest says where and with what the tests run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..acceptance.spec import (
    ANY,
    DEFAULT_MAX_FLEET_FRACTION,
    DEFAULT_MAX_WAVE_NODES,
    DEFAULT_OUTLIER_FRACTION,
    AcceptanceSpec,
    BandwidthFloor,
)
from . import checks
from .formats import image_reference
from .schema import Problems, join_path, setting

DEFAULT_DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
"""The DCGM the pinned GPU Operator chart runs (its values' dcgm.version; tests/test_acceptance_render.py keeps the
two together): `dcgmi` and `nv-hostengine` of the same release as the exporter the dashboards read."""
DEFAULT_NCCL_TESTS_IMAGE = "nvcr.io/nvidia/pytorch:26.01-py3"
"""NVIDIA's PyTorch container, the one NVIDIA's own Kubernetes NCCL test uses (Cluster Readiness Engine,
nccl-all-reduce): nccl-tests built with MPI under /usr/local/bin (Run:ai's nccl-tests tutorial: 26.01-py3 "ships with
the NCCL test binaries pre-built under /usr/local/bin/") and Open MPI under /usr/local/mpi. It ships no sshd
(NVIDIA/cloudai#720): the node pods install openssh-server when they start (render/acceptance.py)."""

NVLINK_MODELS = ("A100", "H100", "H200", "H800", "B100", "B200", "B300", "GB200", "GB300", "V100")
"""GPU model names (as `nodes[].gpu.model` starts) that come as SXM boards on an NVLink/NVSwitch baseboard; a name
that also says PCIe or NVL (an H100 NVL pair) is PCIe for the loopback floor."""


def _source(value: str) -> str | None:
    if not value.strip():
        return "must say where the number comes from (a vendor page, a run of your own)"
    return checks.free_text(value)


def _floor_model(value: str) -> str | None:
    return None if value == ANY else checks.gpu_model(value)


@dataclass(frozen=True)
class FloorSettings:
    test: Literal["loopback", "all-reduce"] = setting(
        doc="`loopback`: all_reduce_perf across one node's GPUs; `all-reduce`: across nodes."
    )
    gbps: float = setting(
        doc="Least bus bandwidth in GB/s at the largest message size.", check=checks.between(0.1, 100_000)
    )
    source: str = setting(doc="Where the number comes from (shown with every verdict that uses it).", check=_source)
    gpu_model: str = setting(
        ANY,
        doc="GPU model it applies to: `*`, or a `nodes[].gpu.model` or its prefix (`H100` covers H100-SXM-80GB).",
        check=_floor_model,
    )
    fabric: str = setting(
        ANY,
        doc="`*`, or for loopback `nvlink`/`pcie`, for all-reduce `acceptance.fabric`'s value.",
        check=lambda v: None if v == ANY or not checks.k8s_name(v) else "is not `*` or a fabric name such as nvlink",
    )

    def floor(self) -> BandwidthFloor:
        return BandwidthFloor(self.test, self.gbps, self.source, self.gpu_model, self.fabric)


@dataclass(frozen=True)
class AcceptanceSettings:
    enabled: bool | None = setting(
        None,
        doc="Run acceptance after the platform is installed (default: on for kubeadm stacks with GPU nodes and the"
        " GPU Operator on).",
    )
    level: Literal["quick", "standard", "burn-in"] = setting(
        "standard",
        doc="How hard: `quick` (dcgmi diag -r 1), `standard` (-r 2, ~2 min), `burn-in` (-r 3, ~15 min).",
    )
    floors: tuple[FloorSettings, ...] = setting(
        (), doc="Bandwidth floors of this stack; each wins over a default floor of the same specificity."
    )
    outlier_fraction: float = setting(
        DEFAULT_OUTLIER_FRACTION,
        doc="A node this far below the median of its peers (same GPU model) fails even above its floor.",
        check=checks.between(0.01, 0.99),
    )
    max_wave_nodes: int = setting(
        DEFAULT_MAX_WAVE_NODES, doc="At most this many nodes are tested at once.", check=checks.between(1, 10_000)
    )
    max_fleet_fraction: float = setting(
        DEFAULT_MAX_FLEET_FRACTION,
        doc="And at most this share of the GPU nodes at once (never fewer than one node).",
        check=checks.between(0.01, 1),
    )
    multi_node: bool = setting(
        True,
        doc="Also run an NCCL all-reduce across the GPU nodes (per topology group when nodes declare one) as a"
        " Kubeflow Trainer TrainJob with an MPI runtime; needs kubeflow.enabled and two or more GPU nodes.",
    )
    fabric: str | None = setting(
        None,
        doc="Name of the multi-node fabric the all-reduce floors are chosen by (default: `rdma` with"
        " network.rdma.enabled, else `tcp`).",
        check=checks.k8s_name,
    )
    nodes: tuple[str, ...] = setting(
        (),
        doc="The GPU nodes to test (default: every GPU node): a subset, e.g. the nodes of a repaired rack; the others"
        " keep their last result and are not tested while left out.",
    )
    retest: str = setting(
        "",
        doc="Change it (e.g. to today's date) to test the nodes that failed again after a repair; nodes that"
        " passed keep their result.",
        check=lambda v: None if len(v) <= 63 and checks.labels({"k": v}) is None else "is not a short word",
    )
    wave_timeout_minutes: int | None = setting(
        None,
        doc="How long a wave's tests may take before the nodes still running are reported stuck (default: twice the"
        " level's expected time with a cold image pull: 18, 20 or 46 min). Raise it for a slow image mirror.",
        check=checks.between(1, 24 * 60),
    )
    namespace: str = setting("mlcluster-acceptance", doc="Namespace of the test Jobs.", check=checks.k8s_name)
    dcgm_image: str = setting(DEFAULT_DCGM_IMAGE, doc="Image with dcgmi and nv-hostengine.", check=image_reference)
    nccl_tests_image: str = setting(
        DEFAULT_NCCL_TESTS_IMAGE,
        doc="Image with nccl-tests under /usr/local/bin (all_reduce_perf; all_reduce_perf_mpi and Open MPI under"
        " /usr/local/mpi for multi-node), as NVIDIA's PyTorch container has them. Its node pods install"
        " openssh-server when the image has no sshd (the pod then needs a package mirror).",
        check=image_reference,
    )

    def acceptance_spec(self) -> AcceptanceSpec:
        return AcceptanceSpec(
            level=self.level,
            floors=tuple(f.floor() for f in self.floors),
            outlier_fraction=self.outlier_fraction,
            max_wave_nodes=self.max_wave_nodes,
            max_fleet_fraction=self.max_fleet_fraction,
        )

    def validate(self, path: str, problems: Problems) -> None:
        for index, floor in enumerate(self.floors):
            if floor.test == "loopback" and floor.fabric not in (ANY, "nvlink", "pcie"):
                problems.error(
                    join_path(path, f"floors[{index}].fabric"),
                    f'"{floor.fabric}" is no loopback fabric: a node\'s GPUs talk over nvlink or pcie (or `*`)',
                )
        for image_key in ("dcgmImage", "ncclTestsImage"):
            image = self.dcgm_image if image_key == "dcgmImage" else self.nccl_tests_image
            if (":" not in image.rsplit("/", 1)[-1] and "@" not in image) or image.endswith(":latest"):
                problems.error(
                    join_path(path, image_key),
                    f'"{image}" is not pinned: give a tag other than latest or a digest (the verdicts name the'
                    " image, and a moving tag makes two runs incomparable)",
                )


def loopback_fabric(model: str) -> str:
    """`nvlink` for SXM-board models, `pcie` for the rest (and for names that say PCIe or NVL)."""
    upper = model.upper()
    if "PCIE" in upper or upper.endswith("NVL") or "-NVL" in upper:
        return "pcie"
    return "nvlink" if upper.startswith(NVLINK_MODELS) else "pcie"


ACCEPTANCE_IMAGE_SET = "acceptance"
"""The pre-pulled image set acceptance adds for its two images (derived.prepull_sets): no stack's set may take it."""
