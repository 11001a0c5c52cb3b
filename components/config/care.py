"""Cluster care: how Kubernetes minor upgrades drain nodes, and how etcd is snapshotted.

The upgrade itself has no switch: changing `kubernetesVersion` is the upgrade. What is configured here is how
careful it is with running work (drain bound, Kueue-admitted GPU jobs) and the scheduled etcd snapshots.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from . import checks
from .schema import Problems, join_path, setting

# systemd.time(7): the shorthands, and the normalised form `[WEEKDAYS ]YEAR-MONTH-DAY HOUR:MINUTE[:SECOND]` (or one
# of date and time alone) written with ASCII digits and single spaces, each field `*`, a value, a range `a..b` or a
# list of them, with an optional `/repetition`. A subset of what systemd reads, checked field by field for its
# range: a value outside it (25:61:00), full-width digits or a line break would otherwise reach `OnCalendar=` raw.
_ON_CALENDAR_WORDS = (
    "minutely", "hourly", "daily", "weekly", "monthly", "yearly", "annually", "quarterly", "semiannually",
)  # fmt: skip
_WEEKDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_WEEKDAYS = re.compile(rf"{_WEEKDAY}(?:\.\.{_WEEKDAY})?(?:,{_WEEKDAY}(?:\.\.{_WEEKDAY})?)*")
_FIELD_ITEM = re.compile(r"(?P<first>[0-9]{1,4})(?:\.\.(?P<last>[0-9]{1,4}))?(?:/(?P<step>[0-9]{1,4}))?")
# What each field may hold: (name, lowest, highest).
_DATE_FIELDS = (("year", 1970, 2199), ("month", 1, 12), ("day", 1, 31))
_TIME_FIELDS = (("hour", 0, 23), ("minute", 0, 59), ("second", 0, 59))


def _field_problem(text: str, name: str, low: int, high: int) -> str | None:
    if text == "*":
        return None
    for item in text.split(","):
        match = _FIELD_ITEM.fullmatch(item)
        if match is None:
            return f"has {name} {item!r}, not a number, a range a..b or a list of them"
        first, last = int(match["first"]), int(match["last"] or match["first"])
        if not (low <= first <= high and low <= last <= high):
            return f"has {name} {item!r} outside {low}..{high}"
        if match["last"] is not None and first >= last:
            return f"has {name} range {item!r} that does not go up (systemd refuses it)"
        step = int(match["step"]) if match["step"] is not None else None
        if step == 0 or (step is not None and match["last"] is None and first + step > high):
            # systemd refuses a repetition that never repeats inside the field's range (23/5 as an hour).
            return f"has {name} {item!r} whose repetition never repeats within {low}..{high}"
    return None


def on_calendar(value: str) -> str | None:
    """A systemd OnCalendar expression (systemd.time(7)): a shorthand, or `[WEEKDAYS ]DATE TIME` in its fields."""
    if value in _ON_CALENDAR_WORDS:
        return None
    hint = f"one of {', '.join(_ON_CALENDAR_WORDS)}, or such as '*-*-* 03:00:00' or 'Mon..Fri *-*-* 02:30'"
    if not value.isascii() or not value.isprintable() or "  " in value or value != value.strip():
        return f"is not a systemd OnCalendar expression (ASCII, single spaces): {hint}"
    parts = value.split(" ")
    if parts and _WEEKDAYS.fullmatch(parts[0]):
        parts = parts[1:]
    date = parts.pop(0) if parts and "-" in parts[0] else None
    time = parts.pop(0) if parts and ":" in parts[0] else None
    if parts or (date is None and time is None):
        return f"is not a systemd OnCalendar expression: {hint}"
    for text, fields, separator in ((date, _DATE_FIELDS, "-"), (time, _TIME_FIELDS, ":")):
        if text is None:
            continue
        values = text.split(separator)
        if not (len(fields) - (separator == ":") <= len(values) <= len(fields)):
            return f"is not a systemd OnCalendar expression ({text!r}): {hint}"
        for field_text, (name, low, high) in zip(values, fields, strict=False):
            if problem := _field_problem(field_text, name, low, high):
                return f"is not a systemd OnCalendar expression: {problem}"
    return None


WAIT_AT_MOST_SECONDS = 7 * 24 * 3600
"""The longest a drain or a GPU-job wait may take on one node: an upgrade held longer is better stopped and resumed
(and the bound keeps the number far inside what kubectl's Go parser and the script's bash arithmetic hold)."""


def positive_duration(value: str) -> str | None:
    """A wait bound from 1s to a week: zero (or a fraction of a second, which whole seconds make 0) would end every
    drain or wait at once; kubectl reads it with Go's parser, the scripts in whole seconds."""
    if problem := checks.duration(value):
        return problem
    seconds = checks.duration_seconds(value)
    if seconds < 1:
        return "must be at least 1s (a shorter bound ends the wait at once)"
    if seconds > WAIT_AT_MOST_SECONDS:
        return "must be at most 168h (a week)"
    return None


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


_RESTORE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", re.ASCII)


def _restore_name(value: str) -> str | None:
    if not _RESTORE_NAME.fullmatch(value):
        return "is not a restore name (letters, digits, '.', '_' and '-', at most 128, starting alphanumeric)"
    return None


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

    restored: str | None = setting(
        None,
        doc="After restoring a snapshot by hand (docs/cluster-care.md): a name for that restore, e.g. the snapshot"
        " file's name. A new name makes the next `up` restart every kubelet, batch by batch, then roll the"
        " platform's controllers namespace by namespace (once per name); watchers then read the restored store.",
        check=_restore_name,
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
