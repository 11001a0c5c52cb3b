"""Kubelet and containerd tuning for ML images: cluster values, per-node overrides, restart batching, image disk.

The cluster section (`mlcluster:kubelet`) holds every tunable; a node's `kubelet` section may override any of
them. `effective_kubelet` is the one merge: what a node runs is the cluster section with the node's set fields
on top (maps merge key by key). Rules that involve two fields are checked on every node after the merge.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from . import checks, formats
from .schema import Problems, join_path, setting

EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
)
RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid")
_CONTAINERD_VERSION = re.compile(r"v?(\d+)\.(\d+)(\.\d+)?", re.ASCII)
# Mount points that hold the OS: an image disk mounted there would hide it.
_SYSTEM_DIRS = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/proc", "/root", "/run", "/sbin", "/sys", "/usr", "/var")


def _eviction(value: Mapping[str, str]) -> str | None:
    for signal, threshold in value.items():
        if signal not in EVICTION_SIGNALS:
            return f"has unknown eviction signal {signal!r} (known: {', '.join(EVICTION_SIGNALS)})"
        if checks.quantity_or_percentage(threshold):
            return f"has {signal}: {threshold!r}, not a quantity or percentage such as 10% or 5Gi"
        if threshold.endswith("%") and float(threshold[:-1]) > 100:
            # The kubelet refuses it at start (pkg/kubelet/eviction/helpers.go, parseThresholdStatement:
            # "eviction percentage threshold ... must be <= 100%").
            return f"has {signal}: {threshold!r}: a percentage of the node's capacity is at most 100%"
    return None


def _reserved(value: Mapping[str, str]) -> str | None:
    for resource, amount in value.items():
        if resource not in RESERVABLE:
            return f"reserves unknown resource {resource!r} (known: {', '.join(RESERVABLE)})"
        if checks.quantity(amount) or amount.endswith("%"):
            return f"has {resource}: {amount!r}, not a quantity such as 500m or 1Gi"
    return None


def containerd_version(value: str) -> str | None:
    if value == "auto" or _CONTAINERD_VERSION.fullmatch(value):
        return None
    return "is not `auto` or a containerd version such as 1.7 or 2.1"


def containerd_series(value: str) -> Literal["auto", "1.6", "1.7", "2"]:
    """The line whose config format and keys apply: 1.6 (no pull progress timeout), 1.7 (config v2), 2 (v3)."""
    match = _CONTAINERD_VERSION.fullmatch(value)
    if value == "auto" or match is None:
        return "auto"
    major, minor = int(match.group(1)), int(match.group(2))
    if major >= 2:
        return "2"
    return "1.7" if minor >= 7 else "1.6"


def _mount_point(value: str) -> str | None:
    # Written into /etc/fstab and containerd's unit drop-in (image-disk.sh), and containerd's TOML root.
    problem = formats.mount_path(value)
    if problem:
        return problem
    if value.rstrip("/") in _SYSTEM_DIRS or value == "/":
        return "is a system directory: mounting the image disk there would hide the OS"
    return None


@dataclass(frozen=True)
class RestartSpec:
    max_unavailable_control_planes: int = setting(
        1,
        doc="Control-plane nodes whose kubelet/containerd restart at the same time when tuning changes (and, in a"
        " Kubernetes upgrade, whose kubelets are drained and upgraded at the same time, after every control plane's"
        " static pods).",
        check=checks.between(1, 100),
    )
    max_unavailable_workers: str = setting(
        "25%",
        doc="Workers restarted (and, in a Kubernetes upgrade, drained and upgraded) at the same time: a count or a"
        " percentage of the workers (rounded down, at least 1).",
        check=checks.max_unavailable,
    )

    def worker_batch_size(self, workers: int) -> int:
        """Workers in one restart (and upgrade) batch out of `workers`."""
        if self.max_unavailable_workers.endswith("%"):
            return max(1, math.floor(workers * int(self.max_unavailable_workers[:-1]) / 100))
        return max(1, int(self.max_unavailable_workers))


@dataclass(frozen=True)
class KubeletSpec:
    image_gc_high_threshold_percent: int = setting(
        80,
        key="imageGCHighThresholdPercent",
        doc="Disk usage at which image GC always runs (upstream 85).",
        check=checks.between(0, 100),
    )
    image_gc_low_threshold_percent: int = setting(
        70,
        key="imageGCLowThresholdPercent",
        doc="Disk usage image GC frees down to (upstream 80).",
        check=checks.between(0, 100),
    )
    image_pull_progress_deadline: str = setting(
        "30m",
        doc="How long a pull may show no progress before it is cancelled (containerd >= 1.7"
        " image_pull_progress_timeout; containerd 1.6 cannot honour it).",
        check=checks.duration,
    )
    image_maximum_gc_age: str | None = setting(
        None,
        key="imageMaximumGCAge",
        doc="Unused images older than this are collected (Kubernetes >= 1.30).",
        check=checks.duration,
    )
    image_minimum_gc_age: str | None = setting(
        None, key="imageMinimumGCAge", doc="Images younger than this are never collected.", check=checks.duration
    )
    eviction_hard: Mapping[str, str] = setting(
        default_factory=dict, doc="Hard eviction thresholds, e.g. imagefs.available: 10%.", check=_eviction
    )
    max_parallel_image_pulls: int | None = setting(
        None,
        doc="Parallel pulls (sets serializeImagePulls false; Kubernetes >= 1.27).",
        check=checks.between(1, 64),
    )
    system_reserved: Mapping[str, str] = setting(
        default_factory=dict, doc="Resources reserved for the OS, e.g. cpu: 500m.", check=_reserved
    )
    kube_reserved: Mapping[str, str] = setting(
        default_factory=dict, doc="Resources reserved for Kubernetes daemons.", check=_reserved
    )
    cpu_manager_policy: Literal["none", "static"] = setting(
        "none", doc="`static` pins CPUs for Guaranteed pods (needs a cpu reservation)."
    )
    topology_manager_policy: Literal["none", "best-effort", "restricted", "single-numa-node"] = setting(
        "none", doc="NUMA alignment of CPUs and GPUs."
    )
    containerd_version: str = setting(
        "auto",
        doc="containerd release the nodes run (e.g. 1.7, 2.1), so preview can tell where the pull deadline"
        " lands and warn when it cannot be honoured; `auto`: decided on the node from `containerd --version`.",
        check=containerd_version,
    )
    restart: RestartSpec = setting(
        default_factory=RestartSpec, doc="How many nodes restart kubelet/containerd at once when tuning changes."
    )
    apply_as: Literal["drop-in", "flags"] = setting(
        "drop-in",
        doc="How tuning reaches a joined node's kubelet: `drop-in`, a KubeletConfiguration file in"
        " /etc/kubernetes/kubelet.conf.d (the modern way); `flags`, KUBELET_EXTRA_ARGS in /etc/default/kubelet (DEB)"
        " or /etc/sysconfig/kubelet (RPM) (the classic way; a setting without a kubelet flag then lands only in"
        " kubeadm's KubeletConfiguration at init, warned). Either way: daemon-reload and a batched restart.",
        modes=("kubeadm",),
    )

    def validate(self, path: str, problems: Problems) -> None:
        for key, message, _ in tuning_problems(self):
            problems.error(join_path(path, key), message)


@dataclass(frozen=True)
class KubeletOverrideSpec:
    """A node's own values; unset fields take the cluster's (`mlcluster:kubelet`)."""

    image_gc_high_threshold_percent: int | None = setting(
        None,
        key="imageGCHighThresholdPercent",
        doc="This node's imageGCHighThresholdPercent.",
        check=checks.between(0, 100),
    )
    image_gc_low_threshold_percent: int | None = setting(
        None,
        key="imageGCLowThresholdPercent",
        doc="This node's imageGCLowThresholdPercent.",
        check=checks.between(0, 100),
    )
    image_pull_progress_deadline: str | None = setting(
        None, doc="This node's imagePullProgressDeadline.", check=checks.duration
    )
    image_maximum_gc_age: str | None = setting(
        None, key="imageMaximumGCAge", doc="This node's imageMaximumGCAge.", check=checks.duration
    )
    image_minimum_gc_age: str | None = setting(
        None, key="imageMinimumGCAge", doc="This node's imageMinimumGCAge.", check=checks.duration
    )
    eviction_hard: Mapping[str, str] | None = setting(
        None, doc="Eviction thresholds merged over the cluster's, key by key.", check=_eviction
    )
    max_parallel_image_pulls: int | None = setting(
        None, doc="This node's maxParallelImagePulls.", check=checks.between(1, 64)
    )
    system_reserved: Mapping[str, str] | None = setting(
        None, doc="OS reservations merged over the cluster's, key by key.", check=_reserved
    )
    kube_reserved: Mapping[str, str] | None = setting(
        None, doc="Kubernetes daemon reservations merged over the cluster's, key by key.", check=_reserved
    )
    cpu_manager_policy: Literal["none", "static"] | None = setting(None, doc="This node's cpuManagerPolicy.")
    topology_manager_policy: Literal["none", "best-effort", "restricted", "single-numa-node"] | None = setting(
        None, doc="This node's topologyManagerPolicy."
    )
    containerd_version: str | None = setting(
        None, doc="containerd release on this node (nodes of another OS may run another).", check=containerd_version
    )


def overridden_keys(override: KubeletOverrideSpec | None) -> set[str]:
    """Config keys (camelCase) a node sets itself."""
    if override is None:
        return set()
    from .schema import config_key

    return {config_key(f) for f in dataclasses.fields(override) if getattr(override, f.name) is not None}


def effective_kubelet(cluster: KubeletSpec, override: KubeletOverrideSpec | None) -> KubeletSpec:
    """The tuning a node runs: the cluster's values with the node's set fields on top (maps merge key by key)."""
    if override is None:
        return cluster
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(override):
        value = getattr(override, f.name)
        if value is None:
            continue
        base = getattr(cluster, f.name)
        changes[f.name] = {**base, **value} if isinstance(base, Mapping) else value
    return dataclasses.replace(cluster, **changes)


def tuning_problems(tuning: KubeletSpec) -> list[tuple[str, str, frozenset[str]]]:
    """Cross-field rules of one (possibly merged) tuning: (key to blame, message, keys the rule reads)."""
    found: list[tuple[str, str, frozenset[str]]] = []
    low, high = tuning.image_gc_low_threshold_percent, tuning.image_gc_high_threshold_percent
    if low >= high:
        found.append(
            (
                "imageGCLowThresholdPercent",
                f"({low}) must be lower than imageGCHighThresholdPercent ({high})",
                frozenset({"imageGCLowThresholdPercent", "imageGCHighThresholdPercent"}),
            )
        )
    minimum, maximum = tuning.image_minimum_gc_age, tuning.image_maximum_gc_age
    if minimum and maximum and checks.duration_seconds(maximum) <= checks.duration_seconds(minimum):
        found.append(
            (
                "imageMaximumGCAge",
                f'("{maximum}") must be longer than imageMinimumGCAge ("{minimum}")',
                frozenset({"imageMinimumGCAge", "imageMaximumGCAge"}),
            )
        )
    if tuning.cpu_manager_policy == "static":
        reserved_cpu = tuning.system_reserved.get("cpu") or tuning.kube_reserved.get("cpu")
        if not reserved_cpu or checks.quantity(reserved_cpu) or _cpu_is_zero(reserved_cpu):
            found.append(
                (
                    "cpuManagerPolicy",
                    '"static" needs a cpu reservation (systemReserved.cpu or kubeReserved.cpu): the kubelet'
                    " refuses to start without one",
                    frozenset({"cpuManagerPolicy", "systemReserved", "kubeReserved"}),
                )
            )
    return found


def _cpu_is_zero(value: str) -> bool:
    return float(re.sub(r"[^0-9.]", "", value) or 0) == 0


@dataclass(frozen=True)
class ImageDiskSpec:
    device: str | None = setting(
        None,
        doc="Block device for images, e.g. /dev/nvme1n1: formatted only if blkid finds nothing on it, mounted by UUID.",
        check=lambda v: (
            None
            if re.fullmatch(r"/dev/[A-Za-z0-9][A-Za-z0-9/_.:-]*", v) and ".." not in v
            else "is not a block device path (/dev/...)"
        ),
    )
    path: str | None = setting(
        None, doc="Existing directory for images (when the disk is already mounted).", check=_mount_point
    )
    filesystem: Literal["xfs", "ext4"] = setting("xfs", doc="Filesystem made on a blank device.")
    mount_point: str = setting(
        "/var/lib/containerd", doc="Where the device is mounted; becomes containerd's root.", check=_mount_point
    )

    def validate(self, path: str, problems: Problems) -> None:
        if (self.device is None) == (self.path is None):
            problems.error(path, "needs exactly one of device or path")
