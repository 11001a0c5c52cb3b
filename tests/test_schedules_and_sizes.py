"""Schedules, durations and sizes, each checked by the grammar of what reads it.

`etcdSnapshots.schedule`: every expression the check accepts is one `systemd-analyze calendar` accepts (the real
parser, from Debian's systemd package; .ci/os-packages installs it), so the unit file never gets a schedule systemd
refuses or reads differently. Durations as Go's time.ParseDuration reads them, within the bounds a wait needs;
quantities without a percentage where an amount is meant, sizes above zero; the basic-auth user as RFC 7617 has it."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.config.care import on_calendar

from .test_config_validation import base
from .test_hostile_input import errors


def systemd_accepts(expression: str) -> bool:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd (bash .ci/os-packages systemd does it as root)"
    return subprocess.run([analyze, "calendar", expression], capture_output=True, check=False).returncode == 0


@pytest.mark.parametrize(
    "schedule",
    [
        "*-*-* 25:61:00",
        "*-*-* 03:00:60",
        "*-13-01 00:00",
        "*-*-*\n03:00:00",
        "*-*-* 03:00:00\nExecStartPre=/bin/true",
        "*-*-* ０３:00:00",
        "*-*-*\t03:00",
        "*-*-*  03:00",
        "*-*-* */6:00",
        "*-*-* 1..5/0:00",
        "Caturday *-*-* 03:00",
        "daily; reboot",
        "",
    ],
)
def test_what_systemd_would_refuse_or_misread_is_refused_by_key(schedule: str) -> None:
    values = base()
    values["etcdSnapshots"] = {"schedule": schedule}
    assert any(line.startswith("mlcluster:etcdSnapshots.schedule:") for line in errors(values)), schedule


@pytest.mark.parametrize(
    "schedule",
    ["daily", "weekly", "*-*-* 03:00:00", "Mon..Fri *-*-* 02:30", "Sat,Sun 2026-*-1,15 00:00", "03:00", "*-*-* 0/6:00"],
)
def test_the_usual_schedules_pass_and_systemd_reads_them(schedule: str) -> None:
    assert on_calendar(schedule) is None
    assert systemd_accepts(schedule)


_NUMBER = st.integers(0, 70).map(str)
_ITEM = st.one_of(
    _NUMBER,
    st.tuples(_NUMBER, _NUMBER).map("..".join),
    st.tuples(_NUMBER, st.integers(0, 9)).map(lambda t: f"{t[0]}/{t[1]}"),
)
_FIELD = st.one_of(st.just("*"), st.lists(_ITEM, min_size=1, max_size=3).map(",".join))
_WEEKDAYS = st.lists(st.sampled_from(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "Mon..Fri"]), max_size=2)
_EXPRESSION = st.builds(
    lambda days, date, time, noise: " ".join(p for p in (",".join(days), date, time) if p) + noise,
    _WEEKDAYS,
    st.one_of(st.none(), st.lists(_FIELD, min_size=3, max_size=3).map("-".join)),
    st.one_of(st.none(), st.lists(_FIELD, min_size=2, max_size=3).map(":".join)),
    st.sampled_from(["", "", "", " ", "\n", "x", ":00", "-1"]),
)


@settings(max_examples=250, deadline=None)
@given(_EXPRESSION)
def test_every_schedule_the_check_accepts_systemd_accepts(expression: str) -> None:
    if on_calendar(expression) is None:
        assert systemd_accepts(expression), expression


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("gpuJobsTimeout", "0.5s", "at least 1s"),
        ("gpuJobsTimeout", "0s", "at least 1s"),
        ("gpuJobsTimeout", "169h", "at most 168h"),
        ("gpuJobsTimeout", "9" * 400 + "h", "longer than a Go duration"),
        ("gpuJobsTimeout", "9223372037s", "longer than a Go duration"),
        ("drainTimeout", "2562048h", "longer than a Go duration"),
        ("drainTimeout", "200h", "at most 168h"),
        ("drainTimeout", "10 m", "not a duration"),
        ("drainTimeout", "１０m", "not a duration"),
    ],
)
def test_wait_bounds_are_durations_kubectl_and_the_scripts_read_as_written(key: str, value: str, message: str) -> None:
    values = base()
    values["upgrade"] = {key: value}
    found = [line for line in errors(values) if line.startswith(f"mlcluster:upgrade.{key}:")]
    assert found and message in found[0], found


def test_a_fractional_wait_is_rounded_up_never_down_to_no_wait() -> None:
    from components.config.load import spec_from_values
    from components.render.upgrade import _drain_settings

    values = base()
    values["upgrade"] = {"gpuJobsTimeout": "1.5s"}
    spec = spec_from_values(values, lambda key: key == "ssh")
    assert _drain_settings(spec)["GPU_JOBS_TIMEOUT_SECONDS"] == "2"


@pytest.mark.parametrize(
    ("parts", "value", "message"),
    [
        (("workloads", "training", "checkpointSize"), "10%", "not a Kubernetes quantity"),
        (("workloads", "training", "checkpointSize"), "0", "larger than 0"),
        (("workloads", "training", "checkpointSize"), "0Gi", "larger than 0"),
        (("workloads", "training", "shmSize"), "0.0Mi", "larger than 0"),
        (("monitoring", "storageSize"), "50%", "not a Kubernetes quantity"),
        (("kueue", "teams", 0, "fairSharingWeight"), "10%", "not a Kubernetes quantity"),
        (("monitoring", "remoteWrite", "username"), "ops:team", "no colon"),
        (("monitoring", "remoteWrite", "username"), "ops\nteam", "printable"),
        (("monitoring", "remoteWrite", "username"), "u" * (1 << 20), "1 to 256"),
    ],
)
def test_sizes_and_names_are_what_their_reader_takes(parts: tuple[Any, ...], value: str, message: str) -> None:
    values = base()
    values["monitoring"] = {"remoteWrite": {"url": "https://mimir.lab.example/api/v1/push"}}
    values["kueue"] = {"enabled": True, "fairSharing": True, "teams": [{"name": "vision", "quotas": []}]}
    target: Any = values
    for part in parts[:-1]:
        target = target[part] if isinstance(part, int) else target.setdefault(part, {})
    target[parts[-1]] = value
    key = "mlcluster:" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".") + ":"
    found = [line for line in errors(values) if line.startswith(key)]
    assert found and message in found[0], (key, found)


def test_an_eviction_threshold_still_takes_a_percentage() -> None:
    from components.config import checks

    assert checks.quantity_or_percentage("10%") is None and checks.quantity_or_percentage("5Gi") is None
    assert checks.quantity("10%") is not None and checks.size("1Gi") is None
