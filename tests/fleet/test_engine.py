"""The fleet engine itself follows Pulumi's rules (../shared/docs/REAL-ENGINE.md): one toy program, one rule a test.

The toy program is a few `remote.Command`s (and optionally a Kubernetes provider with one object) described
by the `mlcluster:toy` config value; the engine's SSH runner is replaced by a recorder, so these tests need
no fleet and show exactly which command ran with which stdin.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from .engine import (
    COMMAND,
    DEFAULT_PARALLELISM,
    EngineStoppedError,
    FleetEngine,
    PlanViolationError,
    RemoteCommandError,
    SshRunner,
)

TOY = """
import json
import pulumi
import pulumi_kubernetes as k8s
from pulumi.resource import create_urn
from pulumi_command import remote

toy = json.loads(pulumi.Config("mlcluster").require("toy"))
made = {}
groups = {}
for c in toy["commands"]:
    parent = None
    if "group" in c:
        parent = groups.setdefault(c["group"], pulumi.ComponentResource("toy:index:Group", c["group"]))
    aliases = None
    if "wasInGroup" in c:
        was = create_urn(c["wasInGroup"], "toy:index:Group")
        aliases = [create_urn(c["name"], "command:remote:Command", parent=was)]
    stdin = made[c["stdinFrom"]].stdout if "stdinFrom" in c else c.get("stdin")
    made[c["name"]] = remote.Command(
        c["name"],
        connection=remote.ConnectionArgs(host=c.get("host", "h"), user="root"),
        create=c.get("create"),
        update=c.get("update"),
        delete=c.get("delete"),
        stdin=stdin,
        triggers=c.get("triggers"),
        opts=pulumi.ResourceOptions(
            depends_on=[made[d] for d in c.get("after", [])],
            ignore_changes=c.get("ignore", []),
            replace_on_changes=c.get("replaceOn", []),
            delete_before_replace=c.get("deleteBeforeReplace", False),
            retain_on_delete=c.get("retainOnDelete", False),
            protect=c.get("protect", False),
            parent=parent,
            aliases=aliases,
        ),
    )
if "provider" in toy:
    p = toy["provider"]
    provider = k8s.Provider(
        "k8s",
        kubeconfig=made[p["from"]].stdout if "from" in p else p["kubeconfig"],
        cluster_identifier=p.get("clusterIdentifier"),
    )
    k8s.core.v1.ConfigMap("cm", data={"a": "b"}, opts=pulumi.ResourceOptions(provider=provider))
if "reference" in toy:
    own = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    ref = pulumi.StackReference(own if toy["reference"] == "self" else toy["reference"])
    pulumi.export("seen", ref.get_output("stamp"))
if "stamp" in toy:
    pulumi.export("stamp", made[toy["stamp"]].stdout if toy["stamp"] in made else toy["stamp"])
"""
KUBECONFIG = """apiVersion: v1
kind: Config
current-context: admin@c
clusters: [{name: c, cluster: {server: "https://%s:6443"}}]
contexts: [{name: admin@c, context: {cluster: c, user: admin}}]
users: [{name: admin, user: {}}]
"""


class Recorder:
    """Stands in for SSH: records (command, stdin, start, end); `fail <text>` exits 1 (after 0.2 s when
    the text says `slowly`), `sleep <s>` sleeps."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, float, float]] = []
        self._lock = threading.Lock()

    def __call__(self, connection: Mapping[str, Any], command: str, stdin: str | None) -> Any:
        start = time.monotonic()
        rc, stdout = 0, f"out of {command}\n"
        if command.startswith("sleep "):
            time.sleep(float(command.split()[1]))
        if command.startswith("kubeconfig "):
            stdout = KUBECONFIG % command.split()[1]
        if command.startswith("fail"):
            time.sleep(0.2 if "slowly" in command else 0)
            rc, stdout = 1, f"printed before failing: {stdin}\n"
        with self._lock:
            self.calls.append((command, stdin, start, time.monotonic()))
        return subprocess.CompletedProcess([], rc, stdout, "boom\n" if rc else "")

    def commands(self) -> list[str]:
        return [c[0] for c in self.calls]

    def peak(self) -> int:
        events = sorted(e for _, _, s, t in self.calls for e in ((s, 1), (t, -1)))
        peak = current = 0
        for _, delta in events:
            current += delta
            peak = max(peak, current)
        return peak


@pytest.fixture
def toy(tmp_path: Path):
    program = tmp_path / "__main__.py"
    program.write_text(TOY)
    engines: list[FleetEngine] = []

    def make(**kwargs: Any) -> tuple[FleetEngine, Recorder, Any]:
        recorder = Recorder()
        engine = FleetEngine(runner=recorder, **kwargs)
        engines.append(engine)

        def up(commands: list[dict[str, Any]], preview: bool = False, plan: Any = None, **extra: Any) -> Any:
            if preview:
                return engine.preview({"toy": {"commands": commands, **extra}}, [], program=program, save_plan=True)
            return engine.up({"toy": {"commands": commands, **extra}}, [], program=program, plan=plan)

        return engine, recorder, up

    yield make
    for engine in engines:
        engine.close()


def test_a_second_run_without_change_runs_nothing(toy) -> None:
    _, recorder, up = toy()
    program = [{"name": "a", "create": "make a"}, {"name": "b", "create": "make b", "stdinFrom": "a"}]
    up(program).raise_error()
    assert recorder.commands() == ["make a", "make b"]
    second = up(program)
    second.raise_error()
    assert recorder.commands() == ["make a", "make b"], "an unchanged resource ran again"
    assert second.with_operation("same") == ["a", "b"]
    # Outputs of unchanged resources come from the state: b still got a's stdout on its first run.
    assert recorder.calls[1][1] == "out of make a"


def test_a_changed_input_runs_create_again_in_place_or_update_when_set(toy) -> None:
    _, recorder, up = toy()
    up([{"name": "a", "create": "make a", "delete": "remove a"}]).raise_error()
    run = up([{"name": "a", "create": "make a v2", "delete": "remove a"}])
    run.raise_error()
    assert run.operations["a"] == "update" and recorder.commands() == ["make a", "make a v2"]
    run = up([{"name": "a", "create": "make a v3", "update": "change a", "delete": "remove a"}])
    assert recorder.commands()[-1] == "change a" and "remove a" not in recorder.commands()


def test_ignore_changes_keeps_the_recorded_value(toy) -> None:
    _, recorder, up = toy()
    up([{"name": "a", "create": "make a", "stdin": "one", "ignore": ["stdin"]}]).raise_error()
    run = up([{"name": "a", "create": "make a", "stdin": "two", "ignore": ["stdin"]}])
    assert run.operations["a"] == "same" and len(recorder.calls) == 1
    # Without ignoreChanges the same change runs the step again.
    run = up([{"name": "a", "create": "make a", "stdin": "two"}])
    assert run.operations["a"] == "update" and recorder.calls[-1][:2] == ("make a", "two")


@pytest.mark.parametrize(
    ("change", "order"),
    [
        ({"triggers": ["2"]}, ["make a", "remove a"]),
        ({"create": "make a v2", "replaceOn": ["create"]}, ["make a v2", "remove a"]),
        ({"triggers": ["2"], "deleteBeforeReplace": True}, ["remove a", "make a"]),
    ],
    ids=["triggers: create before delete", "replaceOnChanges", "deleteBeforeReplace"],
)
def test_replacement_order_and_the_old_delete_gets_the_recorded_stdin(toy, change, order) -> None:
    _, recorder, up = toy()
    base = {"name": "a", "create": "make a", "delete": "remove a", "stdin": "old secret", "triggers": ["1"]}
    up([base]).raise_error()
    run = up([{**base, **change, "stdin": "new secret", "replaceOn": change.get("replaceOn", [])}])
    run.raise_error()
    assert run.operations["a"] == "replace"
    assert recorder.commands()[1:] == order
    (delete,) = [c for c in recorder.calls if c[0] == "remove a"]
    assert delete[1] == "old secret"


def test_removed_resources_are_deleted_dependents_first_with_their_recorded_stdin(toy) -> None:
    _, recorder, up = toy()
    program = [
        {"name": "base", "create": "make base", "delete": "remove base", "stdin": "base stdin"},
        {"name": "top", "create": "make top", "delete": "remove top", "after": ["base"], "stdin": "top stdin"},
    ]
    up(program).raise_error()
    run = up([])
    run.raise_error()
    assert run.deleted == ["top", "base"]
    assert [(c[0], c[1]) for c in recorder.calls[2:]] == [("remove top", "top stdin"), ("remove base", "base stdin")]


def test_an_alias_moves_the_recorded_resource_and_nothing_runs_or_is_deleted(toy) -> None:
    _, recorder, up = toy()
    grouped = {"name": "a", "create": "make a", "delete": "remove a", "group": "node"}
    up([grouped]).raise_error()
    moved = {"name": "a", "create": "make a", "delete": "remove a", "wasInGroup": "node"}
    preview = up([moved], preview=True)
    # Only the emptied component goes; the command it held stays what it was.
    assert preview.operations == {"node": "delete", "a": "same"}
    run = up([moved])
    run.raise_error()
    assert run.operations["a"] == "same" and run.deleted == ["node"] and recorder.commands() == ["make a"]
    # The move is recorded: the next run finds it under its new URN.
    assert up([moved]).operations["a"] == "same"
    # Without the alias the moved resource is a new one, and the old one's delete runs.
    _, recorder, up = toy()
    up([grouped]).raise_error()
    run = up([{k: v for k, v in moved.items() if k != "wasInGroup"}])
    run.raise_error()
    assert run.operations["a"] == "create" and recorder.commands() == ["make a", "make a", "remove a"]


def test_retain_on_delete_set_on_an_unchanged_resource_is_recorded_and_skips_its_delete(toy) -> None:
    _, recorder, up = toy()
    step = {"name": "a", "create": "make a", "delete": "remove a"}
    up([step]).raise_error()
    marked = up([{**step, "retainOnDelete": True}])
    assert marked.operations["a"] == "same" and len(recorder.calls) == 1
    removed = up([])
    removed.raise_error()
    assert removed.deleted == ["a"] and "remove a" not in recorder.commands()
    # Without the option the delete runs.
    up([step]).raise_error()
    up([]).raise_error()
    assert recorder.commands()[-1] == "remove a"


def test_a_protected_resource_stops_the_run_at_its_delete_after_its_dependents_were_deleted(toy) -> None:
    _, recorder, up = toy()
    program = [
        {"name": "base", "create": "make base", "delete": "remove base", "protect": True},
        {"name": "top", "create": "make top", "delete": "remove top", "after": ["base"]},
    ]
    up(program).raise_error()
    run = up([])
    # As the real engine: the dependent's delete ran, then the protected one refused.
    assert recorder.commands()[2:] == ["remove top"]
    assert run.error is not None and "cannot be deleted\nbecause it is protected" in str(run.error)
    assert "pulumi state unprotect" in str(run.error)


def test_a_failed_create_is_not_recorded_and_the_first_failure_stops_new_steps(toy) -> None:
    _, recorder, up = toy()
    program = [
        {"name": "bad", "create": "fail slowly"},
        {"name": "slow", "create": "sleep 0.6"},
        {"name": "after-slow", "create": "make after", "after": ["slow"]},
    ]
    run = up(program)
    assert isinstance(run.error, RemoteCommandError)
    # The running step finished (and is recorded); the one that would have started after the failure did not.
    assert "sleep 0.6" in recorder.commands() and "make after" not in recorder.commands()
    assert run.operations["after-slow"] == "create"
    fixed = [{**program[0], "create": "make bad"}, *program[1:]]
    again = up(fixed)
    again.raise_error()
    assert recorder.commands()[-2:] == ["make bad", "make after"], "the failed create was recorded"
    assert again.operations["slow"] == "same"


def test_continue_on_error_runs_everything_that_does_not_depend_on_the_failure(toy) -> None:
    _, recorder, up = toy(continue_on_error=True)
    run = up(
        [
            {"name": "bad", "create": "fail now"},
            {"name": "child", "create": "make child", "after": ["bad"]},
            {"name": "slow", "create": "sleep 0.5"},
            {"name": "after-slow", "create": "make after", "after": ["slow"]},
        ]
    )
    assert isinstance(run.error, RemoteCommandError) and not isinstance(run.error, EngineStoppedError)
    assert "make after" in recorder.commands() and "make child" not in recorder.commands()


def test_parallelism_defaults_to_the_clis_and_bounds_steps_at_once(toy) -> None:
    assert FleetEngine().max_workers == DEFAULT_PARALLELISM == 4 * (os.cpu_count() or 1)
    program = [{"name": f"s{i}", "create": f"sleep 0.2 {i}"} for i in range(8)]
    _, narrow, up = toy(max_workers=2)
    up(program).raise_error()
    assert narrow.peak() <= 2
    _, wide, up = toy(max_workers=8)
    up(program).raise_error()
    assert wide.peak() > 2


def test_failure_text_is_pulumi_commands_command_stdout_and_stderr(toy) -> None:
    _, _, up = toy()
    run = up([{"name": "bad", "create": "fail loudly", "stdin": "the-credential"}])
    text = str(run.error)
    assert text.startswith(f"{COMMAND} (bad):") and "Process exited with status 1" in text
    assert 'running "fail loudly"' in text and "boom" in text
    # Whatever the step printed before failing is in the error, logging settings notwithstanding.
    assert "printed before failing: the-credential" in text


def test_preview_runs_nothing_records_nothing_and_changed_outputs_are_unknown(toy) -> None:
    engine, recorder, up = toy()
    program = [{"name": "a", "create": "make a"}, {"name": "b", "create": "make b", "stdinFrom": "a"}]
    up(program).raise_error()
    state = {urn: stored.inputs for urn, stored in engine.state.items()}
    preview = up([{**program[0], "create": "make a v2"}, program[1]], preview=True)
    preview.raise_error()
    assert len(recorder.calls) == 2 and {u: s.inputs for u, s in engine.state.items()} == state
    # b's stdin is a's stdout, unknown now: b would run again although its own inputs did not change.
    assert preview.operations == {"a": "update", "b": "update"}
    assert up(program, preview=True).operations == {"a": "same", "b": "same"}


@pytest.mark.parametrize(
    ("identifier", "replaced"), [(None, ["cm", "k8s"]), ("cluster-1", [])], ids=["no clusterIdentifier", "stable"]
)
def test_preview_replaces_a_provider_with_an_unknown_kubeconfig_and_everything_on_it(toy, identifier, replaced) -> None:
    _, _, up = toy()
    provider = {"from": "kubeconfig", **({"clusterIdentifier": identifier} if identifier else {})}
    up([{"name": "kubeconfig", "create": "kubeconfig 10.0.0.1"}], provider=provider).raise_error()
    # A change to the step that prints the kubeconfig (its script, its connection) makes it unknown.
    preview = up([{"name": "kubeconfig", "create": "kubeconfig 10.0.0.1 # edited"}], preview=True, provider=provider)
    assert preview.with_operation("replace") == replaced
    # A known kubeconfig for the same cluster never replaces; another cluster does (without an identifier).
    up([{"name": "kubeconfig", "create": "kubeconfig 10.0.0.1 # edited"}], provider=provider).raise_error()
    moved = up([{"name": "kubeconfig", "create": "kubeconfig 10.0.0.2"}], provider=provider)
    assert moved.with_operation("replace") == replaced


def test_a_stack_reference_to_itself_reads_the_last_successful_deployments_outputs(toy) -> None:
    engine, _, up = toy()

    def seen(run: Any) -> Any:
        run.raise_error()
        return run.program.outputs["seen"].value

    # Before the first deployment the stack has no outputs; a preview reads them as an `up` does.
    assert seen(up([], reference="self", stamp="one")) is None
    assert seen(up([], preview=True, reference="self", stamp="two")) == "one"
    # A failed `up` leaves the outputs of the last successful one.
    failed = up([{"name": "bad", "create": "fail"}], reference="self", stamp="bad")
    assert failed.error is not None
    assert engine.stack_outputs["fleet"]["stamp"] == "one"
    assert seen(up([{"name": "a", "create": "make a"}], reference="self", stamp="a")) == "one"
    assert seen(up([{"name": "a", "create": "make a"}], reference="self", stamp="a")) == "out of make a"
    # Another stack is not this engine's to answer: the engine's backend says it does not know it.
    other = up([], reference="organization/mlcluster/prod")
    assert other.error is not None and 'unknown stack "organization/mlcluster/prod"' in str(other.error)


def test_up_with_a_saved_plan_runs_what_it_recorded_and_stops_where_the_program_wants_more(toy) -> None:
    """`pulumi preview --save-plan` then `pulumi up --plan`: the planned inputs are constraints (an input unknown at
    preview accepts its value), a resource the plan does not name may only stay the same, and the run stops at the
    first resource that wants something else, with the engine's words."""
    _, recorder, up = toy()
    program = [{"name": "a", "create": "make a"}, {"name": "b", "create": "make b", "stdinFrom": "a"}]
    up(program).raise_error()
    changed = [{**program[0], "create": "make a v2"}, program[1]]
    plan = up(changed, preview=True).saved_plan
    assert plan is not None and sorted(r.split("::")[-1] for r in plan) == ["a", "b"]
    # b's stdin was unknown at preview (a's new stdout): whatever it is now, the plan accepts it.
    applied = up(changed, plan=plan)
    applied.raise_error()
    assert recorder.commands()[-2:] == ["make a v2", "make b"]

    plan = up([{**program[0], "create": "make a v3"}, program[1]], preview=True).saved_plan
    ran = len(recorder.calls)
    moved = up([{**program[0], "create": "make a v4"}, program[1]], plan=plan)
    assert isinstance(moved.error, PlanViolationError)
    assert str(moved.error).endswith("::a violates plan: properties changed: ~~create")
    assert len(recorder.calls) == ran, "a step ran against the plan"
    extra = up([{**program[0], "create": "make a v3"}, program[1], {"name": "c", "create": "make c"}], plan=plan)
    assert isinstance(extra.error, PlanViolationError)
    assert "create is not allowed by the plan: no steps were expected for this resource" in str(extra.error)


def test_a_failed_dial_is_tried_again_as_pulumi_command_does(tmp_path: Path) -> None:
    """dialErrorLimit + 1 attempts, 100 ms apart and then 1.5 times longer each time, for a dial that never
    connected (a dropped handshake included); a step that ran and failed is not dialled again."""
    runner = SshRunner(tmp_path)
    seen: list[float] = []

    def dropped(kept: list[str], hop_errors: Path) -> subprocess.CompletedProcess[str]:
        seen.append(time.monotonic())
        return subprocess.CompletedProcess([], 255, "", "kex_exchange_identification: Connection closed\n")

    result = runner._dialling({"host": "h", "dialErrorLimit": 3}, dropped)
    assert result.returncode == 255 and len(seen) == 4
    pauses = [round(b - a, 2) for a, b in itertools.pairwise(seen)]
    assert all(abs(p - e) < 0.05 for p, e in zip(pauses, [0.1, 0.15, 0.225], strict=True)), pauses
    assert [d[3] for d in runner.dials] == [False] * 4

    def connected(kept: list[str], hop_errors: Path) -> subprocess.CompletedProcess[str]:
        # The master's control socket is there once the connection is authenticated.
        hop_errors.with_name(hop_errors.name.replace("hop-", "conn-").removesuffix(".log")).touch()
        return subprocess.CompletedProcess([], 3, "", "the step failed\n")

    seen.clear()

    def counted(kept: list[str], hop_errors: Path) -> subprocess.CompletedProcess[str]:
        seen.append(time.monotonic())
        return connected(kept, hop_errors)

    result = runner._dialling({"host": "h", "proxy": {"host": "b"}}, counted)
    assert result.returncode == 3 and len(seen) == 1 and runner.dials[-1][0] == "b"
