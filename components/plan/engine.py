"""Run `__main__.py` on Pulumi's mock engine and record every RegisterResource request.

The recording keeps what the engine would receive: inputs on the wire (secrets and unknowns marked),
dependencies and resource options, so tests and reviewers see protect, additionalSecretOutputs,
deleteBeforeReplace and friends, not only inputs.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import runpy
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.config import set_all_config
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.settings import SETTINGS, get_root_resource
from pulumi.runtime.stack import run_pulumi_func

from .. import warnings as given_warnings
from ..config.stack_cli import PROJECT_ROOT

PROGRAM = PROJECT_ROOT / "__main__.py"
SECRET = "[secret]"
STACK_TYPE = "pulumi:pulumi:Stack"
COMPUTED = "[computed]"


def wire_to_plain(value: Any) -> Any:
    """Engine wire values to reviewable JSON: secrets hidden, unknowns named, assets as text or path."""
    if isinstance(value, str):
        return COMPUTED if value == rpc.UNKNOWN else value
    if isinstance(value, float) and value.is_integer():
        # The wire has only doubles; Kubernetes integers (a priority value, a timeout) read back as integers.
        return int(value)
    if isinstance(value, list):
        return [wire_to_plain(v) for v in value]
    if isinstance(value, dict):
        sig = value.get(rpc._special_sig_key)
        if sig == rpc._special_secret_sig:
            return SECRET
        if sig == rpc._special_asset_sig:
            return {"asset": value.get("text") or value.get("path") or value.get("uri")}
        if sig == rpc._special_archive_sig:
            return {"archive": value.get("path") or value.get("uri") or "[assets]"}
        if sig == rpc._special_resource_sig:
            return {"resource": value.get("urn")}
        # Struct maps carry no order; sorted keys keep plans diffable run to run.
        return {k: wire_to_plain(value[k]) for k in sorted(value)}
    return value


def reveal(value: Any) -> Any:
    """Deserialized properties with secret wrappers removed (for tests and grouping, never for plans)."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return reveal(value.get("value"))
        return {k: reveal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal(v) for v in value]
    return value


@dataclass
class RecordedResource:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    depends_on: list[str]
    inputs: dict[str, Any]
    options: dict[str, Any]
    raw_inputs: dict[str, Any] = field(repr=False, default_factory=dict)
    """Inputs as the program's mocks saw them (secrets revealed): for tests, never for plans."""

    @property
    def short(self) -> str:
        return f"{self.type}::{self.name}"


def _options(request: Any) -> dict[str, Any]:
    timeouts = request.customTimeouts
    return {
        "protect": bool(request.protect),
        "additionalSecretOutputs": list(request.additionalSecretOutputs),
        "deleteBeforeReplace": bool(request.deleteBeforeReplace),
        "ignoreChanges": list(request.ignoreChanges),
        "replaceOnChanges": list(request.replaceOnChanges),
        "customTimeouts": {
            k: v
            for k, v in (("create", timeouts.create), ("update", timeouts.update), ("delete", timeouts.delete))
            if v
        },
        "retainOnDelete": bool(request.retainOnDelete),
        "provider": request.provider or None,
        # Earlier URNs of the resource, as the engine receives them (whole URNs, or specs it resolves).
        "aliases": [alias.urn or json_format.MessageToDict(alias.spec) for alias in request.aliases],
    }


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """A MockMonitor that also keeps each RegisterResource request, in registration order."""

    def __init__(self, mocks: pulumi_mocks.Mocks) -> None:
        super().__init__(_AnsweringStackReferences(mocks))
        self.recorded: list[RecordedResource] = []
        self.stack_outputs: dict[str, OutputValue] | None = None
        """The stack's exports as the program registered them when it ended; None: it could not (one failed)."""
        self._lock = threading.Lock()
        # PreviewMocks answer every registered resource with its inputs (a stack reference is read, not
        # registered): the request's own wire struct is that answer. The SDK's mock would deserialize it and
        # serialize it back on an event loop of its own (a third of a large plan's registration time).
        self._echo = type(mocks).new_resource is PreviewMocks.new_resource

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """URNs as the engine makes them: the parent's whole type chain, without the stack's own type.

        (The SDK's mock keeps only the parent's last type, so an alias computed with `create_urn`, which
        follows the engine's rule, would never match a recorded URN.)"""
        if parent:
            qualified = parent.split("::")[2]
            if qualified != STACK_TYPE:
                type_ = f"{qualified}${type_}"
        return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{type_}::{name}"

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        if request.type == STACK_TYPE:
            return super().RegisterResource(request)  # type: ignore[no-untyped-call]
        urn = self.make_urn(request.parent, request.type, request.name)
        # Resource references deserialize into resources, which need this thread's event loop.
        pulumi_mocks._ensure_event_loop()  # type: ignore[attr-defined,no-untyped-call]
        inputs = rpc.deserialize_properties(request.object)
        record = RecordedResource(
            urn=urn,
            type=request.type,
            name=request.name,
            parent=request.parent,
            custom=bool(request.custom),
            depends_on=sorted(set(request.dependencies)),
            inputs=wire_to_plain(json_format.MessageToDict(request.object)),
            options=_options(request),
            raw_inputs=reveal(inputs),
        )
        with self._lock:
            self.recorded.append(record)
        if not self._echo:
            return super().RegisterResource(request)  # type: ignore[no-untyped-call]
        resource_id = f"{request.name}-id"
        self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, resource_id, inputs)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=resource_id, object=request.object)

    def by_type(self, type_: str) -> list[RecordedResource]:
        return [r for r in self.recorded if r.type == type_]


STACK_REFERENCE = "pulumi:pulumi:StackReference"


def stack_reference(args: pulumi_mocks.MockResourceArgs, outputs: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A read of `pulumi:pulumi:StackReference` as the engine's builtin provider answers it: the referenced stack's
    outputs as of its last deployment (this stack's own included); a stack never deployed has none, `{}`."""
    name = str(args.inputs.get("name") or args.resource_id or args.name)
    secret = sorted(
        key
        for key, value in outputs.items()
        if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig
    )
    return name, {"name": name, "outputs": dict(outputs), "secretOutputNames": secret}


class _AnsweringStackReferences(pulumi_mocks.Mocks):
    """Any mocks, with the engine's answer to a stack reference they leave unanswered: a stack never deployed
    (no outputs). The program reads its own stack's last outputs; mocks written for other purposes need not know."""

    def __init__(self, mocks: pulumi_mocks.Mocks) -> None:
        self.mocks = mocks

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        found = self.mocks.new_resource(args)
        if args.typ == STACK_REFERENCE and "outputs" not in found[1]:
            return stack_reference(args, {})
        return found

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return self.mocks.call(args)


class PreviewMocks(pulumi_mocks.Mocks):
    """Preview: every resource echoes its inputs; outputs not known until apply stay unknown. A reference to the
    program's own stack (it reads its last outputs) answers `stack_outputs`: by default none, as for a stack never
    deployed. A reference to another stack (`cluster.kubeconfigFrom`) answers unknown outputs: a real preview reads
    that stack's last deployment, which an offline plan cannot reach, so what comes from it is `[computed]`."""

    def __init__(self, stack_outputs: Mapping[str, Any] | None = None) -> None:
        self.stack_outputs = dict(stack_outputs or {})
        self.other_stacks: list[str] = []

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == STACK_REFERENCE:
            name, answer = stack_reference(args, self.stack_outputs)
            if name != f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}":
                self.other_stacks.append(name)
                answer = {"name": name, "outputs": rpc.UNKNOWN, "secretOutputNames": rpc.UNKNOWN}
            return name, answer
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


@dataclass
class OutputValue:
    value: Any
    secret: bool
    known: bool

    def for_plan(self) -> Any:
        if self.secret:
            return SECRET
        if not self.known:
            return COMPUTED
        return self.value


@dataclass
class ProgramRun:
    resources: list[RecordedResource]
    outputs: dict[str, OutputValue]
    monitor: RecordingMonitor
    error: BaseException | None = None
    warnings: list[str] = field(default_factory=list)
    """Every warning the program gave (components/warnings.py), once each, in order."""


async def _resolve(value: Any) -> OutputValue:
    output = pulumi.Output.from_input(value)
    known = await output.is_known()
    secret = await output.is_secret()
    resolved = await output.future(with_unknowns=True) if known else None
    return OutputValue(resolved, secret, known)


async def _exports(root: Any) -> dict[str, OutputValue]:
    return {key: await _resolve(value) for key, value in dict(getattr(root, "outputs", {}) or {}).items()}


async def _registered_outputs(root: Any) -> dict[str, OutputValue] | None:
    """The stack's exports as the SDK registers them at the end of a program that failed: all of them, or (when one
    of them fails: it comes from a resource that failed) none."""
    try:
        return await _exports(root)
    except Exception:  # the SDK's registration fails on any error of an export
        return None


def _no_source_positions() -> Any:
    """Stand-in for the SDK's per-resource stack capture (source positions for the engine's diagnostics).

    A plan never shows them, and walking every frame of every registration is about a fifth of a large
    plan's time. Only the offline plan swaps it out; `pulumi up` keeps the SDK's own.
    """
    from pulumi.runtime.proto import source_pb2

    return source_pb2.StackTrace()


class OrderedCycleCheck:
    """The SDK's dependency-cycle check, with the same answers and almost no walking.

    Before recording `a depends on b`, the SDK (pulumi/runtime/resource_cycle_breaker.py) walks everything `b`
    depends on, transitively, looking for `a`: the whole history for each resource that waits on a long
    chain (the upgrade and kubelet batches), for every such dependency. This keeps the resources in an
    order where every dependency comes before its dependents (Pearce and Kelly's dynamic topological order):
    a new dependency that already agrees with the order cannot close a cycle and needs no walk; one that does
    not is checked by walking only the resources between the two positions, which are then reordered. Same
    answers (tests/test_lean_nodes.py compares them edge by edge on random graphs), the same
    `_direct_computed_dependencies` kept for the SDK; only the offline plan swaps it in.
    """

    def __init__(self) -> None:
        self._position: dict[int, int] = {}
        self._dependents: dict[int, list[Any]] = {}
        # Ids stay unique only while their objects live: hold every resource seen.
        self._seen: dict[int, Any] = {}

    def declare_dependency(self, from_resource: Any, to_resource: Any) -> bool:
        from pulumi.runtime import resource_cycle_breaker

        if from_resource is to_resource:
            return False
        # The dependency first: a resource met for the first time goes after everything known.
        low, high = self._place(to_resource), self._place(from_resource)
        if low > high and not self._reorder(from_resource, to_resource, high, low, resource_cycle_breaker._deps):
            return False
        dependencies = resource_cycle_breaker._deps(from_resource)
        setattr(from_resource, resource_cycle_breaker._DEPENDENCIES_PROPERTY, dependencies | {to_resource})
        self._dependents.setdefault(id(to_resource), []).append(from_resource)
        return True

    def _place(self, resource: Any) -> int:
        position = self._position.get(id(resource))
        if position is None:
            position = self._position[id(resource)] = len(self._seen)
            self._seen[id(resource)] = resource
        return position

    def _reorder(
        self, dependent: Any, dependency: Any, low: int, high: int, dependencies: Callable[[Any], Any]
    ) -> bool:
        """`dependent` (at `low`) is to depend on `dependency` (at `high`): False when `dependency` already
        reaches `dependent` (a cycle); else move what `dependency` reaches in between before what reaches
        `dependent` in between."""
        ahead = self._walk(dependency, dependencies, lambda p: p > low, dependent)
        if ahead is None:
            return False
        behind = self._walk(dependent, lambda r: self._dependents.get(id(r), ()), lambda p: p < high, None)
        assert behind is not None
        moved = [*sorted(ahead, key=self._position.__getitem__), *sorted(behind, key=self._position.__getitem__)]
        positions = sorted(self._position[key] for key in moved)
        self._position.update(zip(moved, positions, strict=True))
        return True

    def _walk(
        self, start: Any, step: Callable[[Any], Any], inside: Callable[[int], bool], goal: Any
    ) -> list[int] | None:
        """Ids of what `start` reaches through `step` while positions stay `inside`; None on reaching `goal`."""
        found = [id(start)]
        seen = {id(start)}
        pending = [start]
        while pending:
            for current in step(pending.pop()):
                if current is goal:
                    return None
                key = id(current)
                if key not in seen and inside(self._place(current)):
                    seen.add(key)
                    found.append(key)
                    pending.append(current)
        return found


def run_program(
    config: Mapping[str, str],
    secret_keys: list[str],
    *,
    stack: str,
    project: str = "mlcluster",
    preview: bool = True,
    mocks: pulumi_mocks.Mocks | None = None,
    max_workers: int = 6,
    program: Path = PROGRAM,
    on_start: Callable[[RecordingMonitor], None] | None = None,
) -> ProgramRun:
    """Run the program once in a fresh context and event loop; exceptions propagate after cleanup.

    max_workers sizes the thread pool that the mock engine runs registrations in, which bounds how
    many resources are created at once (an executing engine measures concurrency through it).
    """

    def run() -> ProgramRun:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        # Each worker thread gets its own event loop (the mock monitor needs one) that we close ourselves;
        # left to the garbage collector, they fail noisily at interpreter exit.
        thread_loops: list[asyncio.AbstractEventLoop] = []

        def give_thread_a_loop() -> None:
            thread_loop = asyncio.new_event_loop()
            asyncio.set_event_loop(thread_loop)
            thread_loops.append(thread_loop)

        loop.set_default_executor(ThreadPoolExecutor(max_workers=max_workers, initializer=give_thread_a_loop))
        set_all_config(dict(config), list(secret_keys))
        given_warnings.take()  # what an earlier run in this process gave is not this run's
        monitor = RecordingMonitor(mocks or PreviewMocks())
        if on_start is not None:
            on_start(monitor)
        # Pulumi keeps pending Output tasks in a process-wide set; a run that failed leaves its tasks there,
        # bound to a loop that is closed now, and the next run would wait on them.
        with SETTINGS.lock:
            SETTINGS.outputs.clear()
        pulumi_mocks.set_mocks(monitor.mocks, project=project, stack=stack, preview=preview, monitor=monitor)
        from pulumi.runtime import resource as runtime_resource

        # A plan keeps every registration alive until the end: the cyclic GC would only re-walk that growing
        # heap (with CPython's default thresholds plan time grew quadratically; with raised ones it was still a
        # fifth of a 1,000-node plan, for ~10 % less memory). Off for the run; what it leaves is collected after.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        capture_stack = getattr(runtime_resource, "_get_stack_trace", None)
        if capture_stack is not None:
            runtime_resource._get_stack_trace = _no_source_positions
        sdk_cycle_check = rpc.declare_dependency  # type: ignore[attr-defined]
        rpc.declare_dependency = OrderedCycleCheck().declare_dependency  # type: ignore[attr-defined]
        try:

            def program_main() -> None:
                runpy.run_path(str(program), run_name="__main__")

            try:
                loop.run_until_complete(run_pulumi_func(program_main))
            except BaseException:
                # Also when a resource failed: the SDK registers the stack's outputs whenever they all resolve.
                monitor.stack_outputs = loop.run_until_complete(_registered_outputs(get_root_resource()))
                raise
            # An export that fails in a run that did not is a program error: raised, not left out.
            monitor.stack_outputs = loop.run_until_complete(_exports(get_root_resource()))
            return ProgramRun(list(monitor.recorded), monitor.stack_outputs, monitor, warnings=given_warnings.take())
        finally:
            loop.run_until_complete(loop.shutdown_default_executor())
            for thread_loop in thread_loops:
                thread_loop.close()
            loop.close()
            if capture_stack is not None:
                runtime_resource._get_stack_trace = capture_stack
            rpc.declare_dependency = sdk_cycle_check  # type: ignore[attr-defined]
            if gc_was_enabled:
                gc.enable()
            asyncio.set_event_loop(None)

    try:
        return contextvars.Context().run(run)
    finally:
        # Worker threads do not inherit the run's context, so outputs they create land in the SDK's
        # process-wide default set; a failed run leaves them there, bound to its closed loop, and the next
        # run in this process would await them ("Event loop is closed").
        pulumi_settings.SETTINGS.outputs.clear()
