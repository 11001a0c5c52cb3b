"""The source-reading tests stay correct in a process where failed Pulumi programs left futures behind."""

from __future__ import annotations

import ast
import asyncio
import gc
import logging
import sys
from collections.abc import Iterator

import pytest

from .conftest import PROJECT
from .python_source import parse_python

SOURCE = PROJECT / "components" / "cluster" / "connection.py"


def _leave_failed_futures(count: int) -> None:
    """What a failed program run leaves: futures holding an exception nobody retrieved, freed only by a collection."""
    loop = asyncio.new_event_loop()
    try:
        for _ in range(count):
            future = loop.create_future()
            try:
                raise ValueError("a step failed")
            except ValueError as raised:  # raised, so the logged traceback has lines whose carets need ast.parse
                future.set_exception(raised)
            cycle: list[object] = [future]
            cycle.append(cycle)
    finally:
        loop.close()


@pytest.fixture
def eager_collector() -> Iterator[None]:
    """Collections often, and asyncio's logger on: the program silences it (__main__.py: a refusal's futures), and a
    program run earlier in this process would leave it so; the control needs the tracebacks formatted."""
    thresholds = gc.get_threshold()
    asyncio_logger = logging.getLogger("asyncio")
    level = asyncio_logger.level
    gc.set_threshold(50, 1, 1)
    asyncio_logger.setLevel(logging.NOTSET)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.collect()
        asyncio_logger.setLevel(level)


def _parse_with(parse, rounds: int, *, until_first_failure: bool = False) -> int:  # type: ignore[no-untyped-def]
    """Failures of `parse` over `rounds` rounds, each after 200 failed futures; each round logs 200 tracebacks,
    which is where the test's time goes, so the control stops at its first failure."""
    failures = 0
    for _ in range(rounds):
        _leave_failed_futures(200)
        try:
            parse()
        except SystemError:
            failures += 1
            if until_first_failure:
                break
    return failures


@pytest.mark.usefixtures("eager_collector")
def test_parse_python_survives_finalizers_that_format_tracebacks(capsys: pytest.CaptureFixture[str]) -> None:
    """The plain `ast.parse` is the control: on Python 3.11 it fails here, which is what failed a CI run."""
    if sys.version_info[:2] == (3, 11):
        assert _parse_with(lambda: ast.parse(SOURCE.read_text()), 40, until_first_failure=True) > 0
    assert _parse_with(lambda: parse_python(SOURCE), 15) == 0
    assert isinstance(parse_python(SOURCE), ast.Module)
    capsys.readouterr()
