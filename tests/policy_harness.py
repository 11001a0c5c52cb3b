"""Run the policy pack without the CLI: build the arguments the Pulumi engine would pass each policy.

The program runs on the mock engine (components/plan/engine.py); each RegisterResource request's wire
properties are kept and turned into props exactly as pulumi_policy's analyzer does (deserialize_properties,
then unknown_checking_proxy: secrets revealed, preview unknowns raise UnknownValueError). Options and the
provider come from the recorded request.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from inspect import isawaitable
from typing import Any

from google.protobuf import json_format
from pulumi_policy import (
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

from components.plan.engine import RecordedResource, RecordingMonitor

from .conftest import PROJECT

sys.path.insert(0, str(PROJECT / "policy"))
import mlcluster_policies

POLICIES = {p.name: p for p in mlcluster_policies.POLICIES}


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
    by_urn: dict[str, Resource] = {}
    for r in recorded:
        by_urn[r.urn] = Resource(
            r.type, r.name, r.urn, wires[r.urn], r.options["protect"], r.parent or None, None, r.options
        )
    for resource in by_urn.values():
        reference = resource.options.get("provider") or ""
        resource.provider = by_urn.get(reference.rsplit("::", 1)[0])
    return list(by_urn.values())


def synthetic(type_: str, name: str, props: dict[str, Any], *, protect: bool = False) -> Resource:
    return Resource(type_, name, f"urn:pulumi:test::mlcluster::{type_}::{name}", props, protect)


def _seconds(duration: str | None) -> float:
    if not duration:
        return 0.0
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([hms])", duration))


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
    """Resources the policy could not check during preview (the CLI reports these as advisory)."""


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


def evaluate(name: str, resources: list[Resource], config: Mapping[str, Any] | None = None) -> Outcome:
    """Run one policy of the pack over a stack's resources, as `pulumi preview --policy-pack` would."""
    policy = POLICIES[name]
    outcome = Outcome()
    if isinstance(policy, ResourceValidationPolicy):
        for resource in resources:
            _call(policy.validate, resource_args(resource, config), outcome, resource.name)
    else:
        assert isinstance(policy, StackValidationPolicy)
        _call(policy.validate, stack_args(resources, config), outcome, "stack")
    return outcome
