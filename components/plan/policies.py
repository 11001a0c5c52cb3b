"""Run the policy pack (policy/) without the Pulumi CLI, on the offline plan's mock engine.

    python -m components.plan.policies --stack onprem [--config policy-config.json]

Each RegisterResource request's wire properties become the props pulumi_policy's analyzer would build
(`deserialize_properties`, then `unknown_checking_proxy`: secrets revealed, preview unknowns raise
UnknownValueError); options and the provider come from the recorded request; each policy's own `validate`
is called. Exit 0 when no policy is violated, 1 otherwise, 2 for an invalid config. The same functions serve
the unit tests of every policy.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from inspect import isawaitable
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from pulumi_policy import (
    Policy,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.policy import _NotApplicableError
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from ..config.stack_cli import PROJECT_ROOT
from .engine import RecordedResource, RecordingMonitor, run_program

POLICY_PACK = PROJECT_ROOT / "policy"


def pack_policies() -> dict[str, Policy]:
    """The pack's policies by name, imported as the CLI does: from the pack's own folder."""
    if str(POLICY_PACK) not in sys.path:
        sys.path.insert(0, str(POLICY_PACK))
    module = importlib.import_module("mlcluster_policies")
    return {policy.name: policy for policy in module.POLICIES}


@dataclass
class Resource:
    """One resource as the analyzer receives it: type, name, urn, wire properties and options."""

    type: str
    name: str
    urn: str
    wire: dict[str, Any]
    protect: bool = False
    parent: str | None = None
    provider: Resource | None = None
    options: dict[str, Any] = field(default_factory=dict)


def wire_recorder(wires: dict[str, dict[str, Any]]) -> Callable[[RecordingMonitor], None]:
    """An on_start hook for run_program that keeps each request's wire properties by URN."""

    def hook(monitor: RecordingMonitor) -> None:
        register = monitor.RegisterResource

        def recording(request: Any) -> Any:
            urn = monitor.make_urn(request.parent, request.type, request.name)
            wires[urn] = json_format.MessageToDict(request.object)
            return register(request)

        monitor.RegisterResource = recording  # type: ignore[method-assign]

    return hook


def from_run(recorded: list[RecordedResource], wires: Mapping[str, dict[str, Any]]) -> list[Resource]:
    by_urn = {
        r.urn: Resource(r.type, r.name, r.urn, wires[r.urn], r.options["protect"], r.parent or None, None, r.options)
        for r in recorded
    }
    for resource in by_urn.values():
        reference = str(resource.options.get("provider") or "")
        resource.provider = by_urn.get(reference.rsplit("::", 1)[0])
    return list(by_urn.values())


def program_resources(config: Mapping[str, str], secret_keys: list[str], *, stack: str) -> list[Resource]:
    """The stack's resources as the analyzer would see them in a preview."""
    wires: dict[str, dict[str, Any]] = {}
    run = run_program(config, secret_keys, stack=stack, on_start=wire_recorder(wires))
    return from_run(run.resources, wires)


def synthetic(type_: str, name: str, props: dict[str, Any], *, protect: bool = False) -> Resource:
    """A resource another program (or a future layer) could register, for policy cases config cannot produce."""
    return Resource(type_, name, f"urn:pulumi:test::mlcluster::{type_}::{name}", props, protect)


def _seconds(duration: str | None) -> float:
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([hms])", duration or ""))


def _props(resource: Resource) -> Any:
    return unknown_checking_proxy(deserialize_properties(resource.wire))


def _options(resource: Resource) -> PolicyResourceOptions:
    timeouts = resource.options.get("customTimeouts") or {}
    return PolicyResourceOptions(
        resource.protect,
        list(resource.options.get("ignoreChanges") or []),
        resource.options.get("deleteBeforeReplace") or None,
        [],
        PolicyCustomTimeouts(*(_seconds(timeouts.get(k)) for k in ("create", "update", "delete"))),
        list(resource.options.get("additionalSecretOutputs") or []),
        resource.parent,
    )


def _provider(resource: Resource) -> PolicyProviderResource | None:
    p = resource.provider
    return None if p is None else PolicyProviderResource(p.type, _props(p), p.urn, p.name)


def resource_args(resource: Resource, config: Mapping[str, Any] | None = None) -> ResourceValidationArgs:
    return ResourceValidationArgs(
        resource.type, _props(resource), resource.urn, resource.name, _options(resource), _provider(resource), config
    )


def stack_args(resources: list[Resource], config: Mapping[str, Any] | None = None) -> StackValidationArgs:
    policy_resources = {
        r.urn: PolicyResource(r.type, _props(r), r.urn, r.name, _options(r), _provider(r), None, [], {})
        for r in resources
    }
    for r in resources:
        if r.parent in policy_resources:
            policy_resources[r.urn].parent = policy_resources[r.parent]
    return StackValidationArgs(list(policy_resources.values()), config)


@dataclass
class Outcome:
    violations: list[str] = field(default_factory=list)
    not_applicable: str | None = None
    unknown: list[str] = field(default_factory=list)
    """What the policy could not check during preview (the CLI reports these as advisory)."""


def _call(validate: Callable[[Any, Any], Any], args: Any, outcome: Outcome, label: str) -> None:
    def report(message: str, urn: str | None = None) -> None:
        outcome.violations.append(f"{label}: {message}")

    try:
        result = validate(args, report)
        if isawaitable(result):
            asyncio.run(result)  # type: ignore[arg-type]
    except UnknownValueError as error:
        outcome.unknown.append(f"{label}: {error.message}")
    except _NotApplicableError as error:
        outcome.not_applicable = error.reason or "not applicable"


def evaluate(policy: Policy, resources: list[Resource], config: Mapping[str, Any] | None = None) -> Outcome:
    """One policy over a stack's resources, as `pulumi preview --policy-pack` would run it."""
    outcome = Outcome()
    if isinstance(policy, ResourceValidationPolicy):
        for resource in resources:
            _call(policy.validate, resource_args(resource, config), outcome, resource.name)
    elif isinstance(policy, StackValidationPolicy):
        _call(policy.validate, stack_args(resources, config), outcome, "stack")
    return outcome


def report(outcomes: Mapping[str, Outcome]) -> str:
    lines = []
    for name, outcome in outcomes.items():
        if outcome.violations:
            lines.append(f"FAIL {name}: {len(outcome.violations)} violation(s)")
            lines += [f"       {v}" for v in outcome.violations]
        elif outcome.not_applicable:
            lines.append(f"n/a  {name}: {outcome.not_applicable}")
        else:
            lines.append(f"ok   {name}")
        lines += [f"       (not checked during preview) {u}" for u in outcome.unknown]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from ..config.stack_cli import add_stack_arguments, spec_or_report, stack_path_and_name

    parser = argparse.ArgumentParser(prog="python -m components.plan.policies", description=__doc__.split("\n\n")[0])
    add_stack_arguments(parser)
    parser.add_argument("--config", type=Path, help="policy pack config (JSON), as --policy-pack-config takes it")
    args = parser.parse_args(argv)
    path, stack = stack_path_and_name(args)
    read = spec_or_report(path)
    if read is None:
        return 2
    config, secret_keys = read[0].config, read[0].secret_keys
    pack_config = json.loads(args.config.read_text()) if args.config else {}
    resources = program_resources(config, secret_keys, stack=stack)
    outcomes: dict[str, Outcome] = {}
    blocking = False
    for name, policy in pack_policies().items():
        # As --policy-pack-config reads it: "name": "advisory" or {"enforcementLevel": ..., properties...}.
        entry = pack_config.get(name, pack_config.get("all"))
        properties = {k: v for k, v in entry.items() if k != "enforcementLevel"} if isinstance(entry, dict) else None
        level = entry.get("enforcementLevel") if isinstance(entry, dict) else entry
        if level == "disabled":
            continue
        outcomes[name] = evaluate(policy, resources, properties)
        blocking = blocking or (level != "advisory" and bool(outcomes[name].violations))
    print(f"policy pack {POLICY_PACK.name}/ on stack {stack} ({len(resources)} resources):")
    print(report(outcomes))
    return 1 if blocking else 0


if __name__ == "__main__":
    sys.exit(main())
