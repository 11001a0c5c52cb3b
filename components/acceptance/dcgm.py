"""Reading `dcgmi diag -r N -j`: per test and per GPU, pass, fail, warn or skip.

The shape is the one DCGM's own JSON writer builds (NVIDIA/DCGM `dcgmi/Diag.cpp`, `HelperJsonBuildOutput`, key
names from `nvvs/include/NvvsJsonStrings.h`):

    {"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "memory",
         "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 3, "status": "Fail",
                      "warnings": [{"warning": "…", "error_id": …}], "info": ["…"]}],
         "test_summary": {"status": "Fail"}}]}]},
     "entity_groups": […], "metadata": {"version": "4.x", "Driver Version Detected": "…"}}

Older DCGM (before per-entity results) wrote `"gpu_ids": "0,1,2,3"` (or `gpu_id`) in each result instead of an
entity; both are read. A result whose status is empty (DCGM's `NOT_RUN`) is not written by DCGM; where one appears
it is read as not run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

DiagStatus = Literal["pass", "fail", "warn", "skip", "not run"]
_STATUSES: dict[str, DiagStatus] = {
    "pass": "pass",
    "fail": "fail",
    "warn": "warn",
    "skip": "skip",
    "not run": "not run",
    "": "not run",
}
ROOT_KEY = "DCGM Diagnostic"


class DcgmOutputError(ValueError):
    """The text is not `dcgmi diag -j` output DCGM could have written; the message says where it differs."""


@dataclass(frozen=True)
class DiagResult:
    category: str
    test: str
    entity: str
    """`GPU 3`, `CPU 0`, … or `all` for a test-wide summary (no per-entity result)."""
    gpu_id: int | None
    status: DiagStatus
    messages: tuple[str, ...]


@dataclass(frozen=True)
class DiagReport:
    results: tuple[DiagResult, ...]
    dcgm_version: str | None
    driver_version: str | None

    def failures(self) -> list[str]:
        """One line per failed test and entity, with DCGM's own warning text: what the node fails for."""
        found = []
        for result in self.results:
            if result.status == "fail":
                why = f": {'; '.join(result.messages)}" if result.messages else ""
                found.append(f"dcgmi diag test {result.test!r} ({result.category}) failed on {result.entity}{why}")
        if not any(result.status == "pass" for result in self.results):
            found.append("dcgmi diag passed no test at all (every test was skipped or not run): nothing was proven")
        return found

    def warnings(self) -> list[str]:
        return [
            f"dcgmi diag test {r.test!r} warned on {r.entity}: {'; '.join(r.messages) or 'no message'}"
            for r in self.results
            if r.status == "warn"
        ]


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DcgmOutputError(f"{where} is {type(value).__name__}, not a JSON object")
    return value


def _sequence(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise DcgmOutputError(f"{where} is {type(value).__name__}, not a JSON array")
    return value


def _status(raw: Any, where: str) -> DiagStatus:
    if not isinstance(raw, str) or raw.strip().lower() not in _STATUSES:
        raise DcgmOutputError(f"{where}: status {raw!r} is none of Pass, Fail, Warn, Skip")
    return _STATUSES[raw.strip().lower()]


def _messages(entry: dict[str, Any]) -> tuple[str, ...]:
    found: list[str] = []
    for warning in entry.get("warnings") or []:
        text = warning.get("warning") if isinstance(warning, dict) else warning
        if isinstance(text, str) and text.strip():
            found.append(text.strip())
    return tuple(found)


def _entities(entry: dict[str, Any], where: str) -> list[tuple[str, int | None]]:
    """Which entities one result speaks for: DCGM 4's entity fields, or the older gpu_ids / gpu_id."""
    if "entity_id" in entry:
        group = entry.get("entity_group", "GPU")
        entity_id = entry["entity_id"]
        if not isinstance(entity_id, int) or isinstance(entity_id, bool):
            raise DcgmOutputError(f"{where}: entity_id {entity_id!r} is not a whole number")
        return [(f"{group} {entity_id}", entity_id if group == "GPU" else None)]
    if "gpu_ids" in entry or "gpu_id" in entry:
        raw = entry.get("gpu_ids", entry.get("gpu_id"))
        parts = [p.strip() for p in str(raw).split(",") if p.strip()]
        if not parts or not all(p.isdigit() for p in parts):
            raise DcgmOutputError(f"{where}: gpu_ids {raw!r} is not a comma-separated list of GPU ids")
        return [(f"GPU {p}", int(p)) for p in parts]
    return [("all", None)]


def parse_dcgm_diag(text: str) -> DiagReport:
    """Every test result of one `dcgmi diag -j` run, or DcgmOutputError saying where the text is damaged."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        snippet = text.strip()[:80]
        raise DcgmOutputError(
            f"dcgmi diag output is not JSON ({error.msg} at line {error.lineno} column {error.colno});"
            f" it starts {snippet!r} (was -j left off, or did dcgmi print an error instead?)"
        ) from None
    root = _mapping(document, "the dcgmi diag output")
    if "runtime_error" in root:
        raise DcgmOutputError(f"dcgmi diag could not run: {root['runtime_error']}")
    if ROOT_KEY not in root:
        raise DcgmOutputError(f"dcgmi diag output has no {ROOT_KEY!r} object (keys: {', '.join(sorted(root))})")
    diagnostic = _mapping(root[ROOT_KEY], ROOT_KEY)
    if "runtime_error" in diagnostic:
        raise DcgmOutputError(f"dcgmi diag could not run: {diagnostic['runtime_error']}")
    categories = _sequence(diagnostic.get("test_categories"), f"{ROOT_KEY}.test_categories")
    results: list[DiagResult] = []
    for c_index, raw_category in enumerate(categories):
        category = _mapping(raw_category, f"test_categories[{c_index}]")
        category_name = str(category.get("category", f"category {c_index}"))
        for t_index, raw_test in enumerate(_sequence(category.get("tests", []), f"{category_name}.tests")):
            where = f"{category_name}.tests[{t_index}]"
            test = _mapping(raw_test, where)
            name = test.get("name")
            if not isinstance(name, str) or not name:
                raise DcgmOutputError(f"{where} has no test name")
            entries = _sequence(test.get("results", []), f"{where} ({name}).results")
            if not entries and isinstance(test.get("test_summary"), dict):
                # A test DCGM ran without per-entity results still says how it went in its summary.
                entries = [test["test_summary"]]
            for r_index, raw_entry in enumerate(entries):
                entry_where = f"{where} ({name}).results[{r_index}]"
                entry = _mapping(raw_entry, entry_where)
                status = _status(entry.get("status"), entry_where)
                for entity, gpu_id in _entities(entry, entry_where):
                    results.append(DiagResult(category_name, name, entity, gpu_id, status, _messages(entry)))
    if not results:
        raise DcgmOutputError("dcgmi diag output lists no test results: the diagnostic did not run any test")
    raw_metadata = root.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    version = metadata.get("version")
    driver = metadata.get("Driver Version Detected")
    return DiagReport(
        results=tuple(results),
        dcgm_version=version if isinstance(version, str) else None,
        driver_version=driver if isinstance(driver, str) else None,
    )
