"""Shared fixtures: stack configs and the whole program on Pulumi's mock engine with a recording monitor."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from components.cluster import clock
from components.config.load import read_stack_file, spec_from_values
from components.config.spec import Spec
from components.plan.engine import COMPUTED, SECRET, ProgramRun, RecordedResource, run_program
from components.render.shell import expand_stored, script_of_command, store_catalog

PROJECT = Path(__file__).resolve().parents[1]
STACKS = PROJECT / "stacks"
BUILD = PROJECT / "build"


TEST_CA_PEM = "\n".join(
    [
        "-----BEGIN CERTIFICATE-----",
        "MIIBmjCCAUGgAwIBAgIUIzsxwRL3njBvK2EVSYRYJXX/4zswCgYIKoZIzj0EAwIw",
        "IzEhMB8GA1UEAwwYbWxjbHVzdGVyIHRlc3QgbWlycm9yIENBMB4XDTI2MTIwNTE5",
        "MTE1NloXDTM2MTIwMjE5MTE1NlowIzEhMB8GA1UEAwwYbWxjbHVzdGVyIHRlc3Qg",
        "bWlycm9yIENBMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE3T7OVvGs5TTv42+I",
        "oele4aH69xwiLhf4lQQ46lWkD3EpkTq44DgoGptdkB4MUMVZAFbpij3TUR9ENgga",
        "+mcNHKNTMFEwHQYDVR0OBBYEFDyvlWsKTqZVK3/Hl4zaTIwhw3HjMB8GA1UdIwQY",
        "MBaAFDyvlWsKTqZVK3/Hl4zaTIwhw3HjMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZI",
        "zj0EAwIDRwAwRAIgF2mYleMJlkrT7oebInwYzZmyw6TKYlFz6sERMdaJxtkCIFLG",
        "2OzLBDjomXaCQ0v6uWgQIiJ+l7741nfoOtTBVHax",
        "-----END CERTIFICATE-----",
    ]
)
"""A real self-signed CA certificate (EC P-256, made with openssl for the tests; its key was thrown away)."""


def stack_values(stack: str) -> tuple[dict[str, Any], list[str]]:
    """Top-level values (without namespace) of an example stack, and which of them are secret."""
    config, secret_keys = read_stack_file(STACKS / f"Pulumi.{stack}.yaml")
    values = {}
    for full_key, raw in config.items():
        key = full_key.split(":", 1)[1]
        values[key] = raw if key == "kubernetesVersion" else json.loads(raw)
    return values, [k.split(":", 1)[1] for k in secret_keys]


def as_config(values: Mapping[str, Any]) -> dict[str, str]:
    return {f"mlcluster:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}


def load_spec(values: Mapping[str, Any], secret: list[str]) -> Spec:
    return spec_from_values(values, lambda key: key in secret)


def known(value: Any) -> Any:
    """Guard against vacuous checks: a preview unknown or a hidden secret is a failure, not a pass."""
    assert value not in (COMPUTED, SECRET, None), f"value is {value!r}: the assertion would check nothing"
    return value


def runs(command: Any) -> str:
    """What a recorded command runs: its script with the files it sources from the node's copy written out."""
    script = known(script_of_command(known(command)))
    return expand_stored(script, store_catalog())


class Run:
    """A finished mock run with lookups that fail loudly when nothing matches."""

    def __init__(self, run: ProgramRun) -> None:
        self.run = run
        self.resources = run.resources

    def of_type(self, type_: str) -> list[RecordedResource]:
        found = [r for r in self.resources if r.type == type_]
        assert found, f"no {type_} resources were registered"
        return found

    def named(self, name: str) -> RecordedResource:
        found = [r for r in self.resources if r.name == name]
        assert len(found) == 1, f"expected one resource named {name}, found {len(found)}"
        return found[0]

    def urn_of(self, name: str) -> str:
        return self.named(name).urn


@pytest.fixture
def run_stack() -> Callable[..., Run]:
    """Run `__main__.py` under mocks for an example stack (or given values); preview by default. Every run of one
    test reads the program's clock at one moment (the test's start): two runs compared differ by their values only,
    even across the hour that moves the join credentials' mint window."""
    moment = datetime.now(UTC)

    def run(
        stack: str = "onprem",
        *,
        values: Mapping[str, Any] | None = None,
        secret: list[str] | None = None,
        preview: bool = True,
        **kwargs: Any,
    ) -> Run:
        if values is None:
            values, secret = stack_values(stack)
        config = as_config(values)
        with clock.fixed_at(moment):
            return Run(
                run_program(config, [f"mlcluster:{k}" for k in (secret or [])], stack=stack, preview=preview, **kwargs)
            )

    return run


# The fleet's measurements, across pytest-xdist workers: each worker hands its own to the controller, which prints
# them once and writes build/fleet-measurements.json (run without workers, the one process does both).
WORKER_MEASUREMENTS = "fleet_measurements"


def pytest_sessionfinish(session: pytest.Session) -> None:
    from .fleet.measure import MEASUREMENTS  # here: the fleet package imports this module

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[WORKER_MEASUREMENTS] = json.dumps(MEASUREMENTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    from .fleet.measure import MEASUREMENTS

    for key, value in json.loads(node.workeroutput.get(WORKER_MEASUREMENTS, "{}")).items():
        # A list is appended to by every test that measures it (on whichever worker ran it).
        if isinstance(value, list) and isinstance(MEASUREMENTS.get(key), list):
            MEASUREMENTS[key] += value
        else:
            MEASUREMENTS[key] = value


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    from .fleet.measure import MEASUREMENTS

    if not MEASUREMENTS or hasattr(config, "workeroutput"):
        return
    BUILD.mkdir(exist_ok=True)
    (BUILD / "fleet-measurements.json").write_text(json.dumps(dict(sorted(MEASUREMENTS.items())), indent=1) + "\n")
    terminalreporter.section("fleet measurements")
    for key, value in sorted(MEASUREMENTS.items()):
        terminalreporter.write_line(f"{key}: {json.dumps(value)}")
