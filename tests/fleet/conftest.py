"""Fleet fixtures: `fleet` starts test hosts for one test, `fleet_engine` runs the program against them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .airgap_upstream import Internet
from .engine import FleetEngine
from .hosts import Fleet, HostSpec


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


@pytest.fixture
def internet(tmp_path: Path) -> Iterator[Internet]:
    """The upstream servers an air-gap bundle is fetched from (airgap_upstream.py), stopped when the test ends."""
    servers = Internet(tmp_path / "internet")
    servers.start()
    try:
        yield servers
    finally:
        servers.stop()
