"""Reading what nccl-tests' `all_reduce_perf` prints: its results table, the `#wrong` counts and the average line.

The layout is the one nccl-tests prints (`# nThread …` header, a commented column header with `out-of-place` and
`in-place`, one row per message size, then `# Out of bounds values` and `# Avg bus bandwidth`). Lines that are not
part of it (NCCL's own INFO logs, mpirun chatter) are skipped, because a real log interleaves them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


class NcclOutputError(ValueError):
    """The text is not a whole `all_reduce_perf` run; the message says what is missing or damaged."""


@dataclass(frozen=True)
class Measurement:
    """One half (out-of-place or in-place) of a results row."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None
    """Elements that came back wrong; None where the run did not check (`-c 0` prints `N/A`)."""


@dataclass(frozen=True)
class AllReduceRow:
    size_bytes: int
    count: int
    data_type: str
    redop: str
    root: int
    out_of_place: Measurement
    in_place: Measurement


@dataclass(frozen=True)
class AllReduceResult:
    rows: tuple[AllReduceRow, ...]
    avg_busbw_gbps: float
    """The `# Avg bus bandwidth` line: the mean over every size, small latency-bound ones included."""
    out_of_bounds: int | None
    """The `# Out of bounds values` count, None where this nccl-tests version does not print it."""

    @property
    def largest_size_busbw_gbps(self) -> float:
        """Bus bandwidth at the largest message size, the lower of out-of-place and in-place.

        This, not the average line, is what a floor is compared with: the average mixes in 8-byte messages that
        measure latency, so a healthy 8-GPU node's average sits far below its large-message bandwidth (the
        sample in tests/fixtures/acceptance averages 70.7 GB/s and reaches 337 GB/s at 8 GiB). NVSentinel's
        preflight compares at 4 GiB messages for the same reason. The lower half is taken so one good pass
        cannot hide a bad one.
        """
        largest = max(self.rows, key=lambda row: row.size_bytes)
        return min(largest.out_of_place.busbw_gbps, largest.in_place.busbw_gbps)

    @property
    def largest_size_bytes(self) -> int:
        return max(row.size_bytes for row in self.rows)

    def failures(self) -> list[str]:
        """Why this run does not prove the interconnect: wrong results, unchecked results, out-of-bounds values."""
        found = []
        for row in self.rows:
            for half, measured in (("out-of-place", row.out_of_place), ("in-place", row.in_place)):
                if measured.wrong is None:
                    found.append(
                        f"all_reduce_perf did not check its results at {row.size_bytes} B {half} (#wrong is N/A:"
                        " the run had -c 0); acceptance needs checked results"
                    )
                elif measured.wrong:
                    found.append(
                        f"all_reduce_perf got {measured.wrong} wrong element(s) at {row.size_bytes} B {half}"
                        " (#wrong must be 0: data was corrupted on the way)"
                    )
        if self.out_of_bounds:
            found.append(f"all_reduce_perf reported {self.out_of_bounds} out-of-bounds value(s)")
        return found


_HEADER = re.compile(r"^#.*\bout-of-place\b.*\bin-place\b")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
# size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
_ROW_FIELDS = 13


def _number(text: str, what: str, line_no: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise NcclOutputError(f"line {line_no}: {what} is {text!r}, not a number") from None
    if not math.isfinite(value):
        raise NcclOutputError(f"line {line_no}: {what} is {text!r}, not a finite number")
    return value


def _integer(text: str, what: str, line_no: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise NcclOutputError(f"line {line_no}: {what} is {text!r}, not a whole number") from None


def _measurement(fields: list[str], line_no: int) -> Measurement:
    time_us, algbw, busbw, wrong = fields
    return Measurement(
        time_us=_number(time_us, "the time", line_no),
        algbw_gbps=_number(algbw, "algbw", line_no),
        busbw_gbps=_number(busbw, "busbw", line_no),
        wrong=None if wrong == "N/A" else _integer(wrong, "#wrong", line_no),
    )


def _looks_like_row(fields: list[str]) -> bool:
    """A results row starts with two whole numbers (size, count); NCCL log lines do not."""
    return len(fields) >= 2 and fields[0].isdigit() and fields[1].isdigit()


def parse_all_reduce(text: str) -> AllReduceResult:
    """The results of one `all_reduce_perf` run, or NcclOutputError naming what is missing or damaged."""
    lines = text.splitlines()
    header_at = next((i for i, line in enumerate(lines) if _HEADER.match(line.strip())), None)
    if header_at is None:
        raise NcclOutputError(
            "no all_reduce_perf results table: the column header with `out-of-place` and `in-place` is missing"
            " (the run failed before measuring, or this is not all_reduce_perf output)"
        )
    rows: list[AllReduceRow] = []
    avg: float | None = None
    out_of_bounds: int | None = None
    for index in range(header_at + 1, len(lines)):
        line_no = index + 1
        stripped = lines[index].strip()
        if match := _AVG.match(stripped):
            avg = _number(match[1], "the average bus bandwidth", line_no)
            break
        if match := _OUT_OF_BOUNDS.match(stripped):
            out_of_bounds = int(match[1])
            continue
        fields = stripped.split()
        if stripped.startswith("#") or not _looks_like_row(fields):
            continue
        if len(fields) != _ROW_FIELDS:
            raise NcclOutputError(
                f"line {line_no}: a results row has {len(fields)} columns, not {_ROW_FIELDS} (size, count, type,"
                f" redop, root, then time, algbw, busbw, #wrong out-of-place and in-place): {stripped!r}"
            )
        rows.append(
            AllReduceRow(
                size_bytes=_integer(fields[0], "the size", line_no),
                count=_integer(fields[1], "the count", line_no),
                data_type=fields[2],
                redop=fields[3],
                root=_integer(fields[4], "the root", line_no),
                out_of_place=_measurement(fields[5:9], line_no),
                in_place=_measurement(fields[9:13], line_no),
            )
        )
    if not rows:
        raise NcclOutputError("the all_reduce_perf results table has no rows: the run stopped before any size")
    if avg is None:
        raise NcclOutputError(
            f"all_reduce_perf output is truncated: no `# Avg bus bandwidth` line after {len(rows)} row(s), the last"
            f" at {rows[-1].size_bytes} B (the run was killed, timed out or crashed before it finished)"
        )
    return AllReduceResult(rows=tuple(rows), avg_busbw_gbps=avg, out_of_bounds=out_of_bounds)
