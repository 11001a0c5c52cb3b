"""Cluster care: how Kubernetes minor upgrades drain nodes, and how etcd is snapshotted.

The upgrade itself has no switch: changing `kubernetesVersion` is the upgrade. What is configured here is how
careful it is with running work (drain bound, Kueue-admitted GPU jobs) and the scheduled etcd snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import checks
from .schema import Problems, join_path, setting

_ON_CALENDAR_WORDS = ("minutely", "hourly", "daily", "weekly", "monthly", "yearly", "quarterly", "semiannually")


def on_calendar(value: str) -> str | None:
    """A systemd OnCalendar expression; the shapes used in practice (a word, or `DOW? DATE TIME`)."""
    if value in _ON_CALENDAR_WORDS:
        return None
    parts = value.split()
    if 1 <= len(parts) <= 3 and all(all(c.isalnum() or c in "*-:,./~" for c in p) for p in parts) and ":" in parts[-1]:
        return None
    return (
        f"is not a systemd OnCalendar expression: one of {', '.join(_ON_CALENDAR_WORDS)}, or such as '*-*-* 03:00:00'"
    )


def positive_duration(value: str) -> str | None:
    """A duration longer than zero: a zero bound would fail every drain, or every wait, at once."""
    problem = checks.duration(value)
    if problem is None and checks.duration_seconds(value) <= 0:
        return "must be longer than 0s"
    return problem


@dataclass(frozen=True)
class UpgradeSpec:
    drain_timeout: str = setting(
        "10m",
        doc="How long `kubectl drain` may wait for evictions (PodDisruptionBudgets are respected) before the"
        " upgrade stops with the node cordoned.",
        check=positive_duration,
    )
    gpu_jobs: Literal["wait", "evict"] = setting(
        "wait",
        doc="Running Kueue-admitted jobs on a node about to be drained: `wait` for them to finish (up to"
        " `gpuJobsTimeout`, then stop with a message naming them), `evict` them like any other pod.",
    )
    gpu_jobs_timeout: str = setting(
        "2h",
        doc="With `gpuJobs: wait`: how long one node waits for its Kueue-admitted jobs to finish.",
        check=positive_duration,
    )


@dataclass(frozen=True)
class EtcdSnapshotSpec:
    enabled: bool = setting(
        True,
        doc="A systemd timer on every control plane saves an etcd snapshot on `schedule` (and one before upgrades).",
    )
    schedule: str = setting("daily", doc="systemd OnCalendar expression of the scheduled snapshot.", check=on_calendar)
    retain: int = setting(
        7, doc="Scheduled snapshots kept on each control plane (older ones are removed).", check=checks.between(1, 1000)
    )
    directory: str = setting(
        "/var/lib/mlcluster/etcd-snapshots",
        doc="Where snapshots are written on the control planes.",
        check=checks.node_directory,
    )
    copy_to: str | None = setting(
        None,
        doc="Optional second place every snapshot is copied to (an absolute path, e.g. an NFS mount on the"
        " control planes), with the same retention.",
        check=checks.node_directory,
    )

    def validate(self, path: str, problems: Problems) -> None:
        if self.copy_to is None or checks.node_directory(self.copy_to) or checks.node_directory(self.directory):
            return  # refused on its own key already
        copy_to, directory = checks.directory_key(self.copy_to), checks.directory_key(self.directory)
        if copy_to == directory:
            problems.error(join_path(path, "copyTo"), f'"{self.copy_to}" is the snapshot directory itself')
        elif checks.is_within(copy_to, directory) or checks.is_within(directory, copy_to):
            # Each side prunes its own files by age: one inside the other would prune the other's copies.
            problems.error(
                join_path(path, "copyTo"),
                f'"{self.copy_to}" and directory "{self.directory}" are inside one another: give two separate'
                " directories",
            )


@dataclass(frozen=True)
class CertificatesSpec:
    renew: bool = setting(
        True,
        doc="Renew kubeadm's certificates (`kubeadm certs renew all` on each control plane, one at a time, then"
        " its control-plane pods restart) on the `up` that finds the earliest of them under `renewBeforeDays`;"
        " the provider's admin kubeconfig is read again afterwards. Off: `up` only reports the days left.",
    )
    renew_before_days: int = setting(
        30,
        doc="Days left (counted from the dates the last `up` read on the control planes) under which `up`"
        " renews. kubeadm's certificates last 365 days, so 365 or more would renew on every `up`.",
        check=checks.between(1, 364),
    )
