"""Fleet fixtures: `fleet` starts test hosts for one test, `fleet_engine` runs the program against them."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .engine import FleetEngine
from .hosts import Fleet, HostSpec
from .measure import MEASUREMENTS

BUILD = Path(__file__).resolve().parents[2] / "build"


@pytest.fixture
def fleet() -> Iterator[Callable[..., Fleet]]:
    """`fleet(HostSpec(...), ...)` starts hosts that live until the test ends (a failure, never a skip, when
    the machine cannot run them)."""
    with contextlib.ExitStack() as stack:

        def start(*specs: HostSpec) -> Fleet:
            return stack.enter_context(Fleet.running(specs))

        yield start


@pytest.fixture
def fleet_engine() -> Iterator[FleetEngine]:
    engine = FleetEngine()
    yield engine
    engine.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not MEASUREMENTS:
        return
    BUILD.mkdir(exist_ok=True)
    (BUILD / "fleet-measurements.json").write_text(json.dumps(MEASUREMENTS, indent=1) + "\n")
    terminalreporter.section("fleet measurements")
    for key, value in MEASUREMENTS.items():
        terminalreporter.write_line(f"{key}: {json.dumps(value)}")
