"""What changes between two offline plans, per node and per release: the review to read without the CLI.

    python -m components.plan --stack onprem --out build/new --compare build/old
    python -m components.plan.diff build/old build/new

Resources are matched by URN less the stack (names carry no position, so an inserted step does not rename the others).
A node step whose script changed re-runs on `up`; a step whose `triggers` changed is replaced (its on-delete
script runs, then the step); release changes are shown as chart/version and values keys. Secret inputs are
"[secret]" in both plans, so a changed secret does not show here. The SSH connection is one secret input (it holds
the private key); its non-secret facts (host, port, user, bastion, host-key fingerprint) are compared from the plans'
`placement` and each step's `connection`: a step whose connection changed runs again on `up`, on the new target.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..render.shell import expand_stored, script_of_command, split_parts
from .bundle import section_changes
from .engine import COMPUTED

COMMAND = "command:remote:Command"
SCRIPT_COPY = "command:remote:CopyToRemote"
NODE_RESOURCES = (COMMAND, SCRIPT_COPY)
RELEASE = "kubernetes:helm.sh/v3:Release"
RELEASE_IDENTITY = ("chart", "version", "namespace")
SCRIPT_LINES_SHOWN = 12
IDENTITY = ("metadata.name", "metadata.namespace")
"""A Kubernetes object whose name or namespace changes is replaced: pulumi-kubernetes creates the new one and
deletes the old one at the end of the `up` (v4.32.0 provider.go, Diff's forceNewFields)."""
REPLACED_OBJECT = "replaced: the new object is created, what names it moves to it, the old one is deleted at the end"

Kind = Literal["added", "removed", "re-runs", "replaced", "changed"]


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class KeyChange:
    key: str
    old: Any
    new: Any

    def __str__(self) -> str:
        if self.old is MISSING:
            return f"+ {self.key}: {_show(self.new)}"
        if self.new is MISSING:
            return f"- {self.key}: {_show(self.old)}"
        return f"~ {self.key}: {_show(self.old)} -> {_show(self.new)}"


@dataclass(frozen=True)
class StepChange:
    node: str
    step: str
    kind: Kind
    why: str
    script: list[str] = field(default_factory=list)
    """Changed script lines, `-`/`+` prefixed (create script for re-runs, on-delete script otherwise)."""


@dataclass(frozen=True)
class ReleaseChange:
    release: str
    kind: Kind
    identity: list[KeyChange] = field(default_factory=list)
    """chart, version, namespace."""
    values: list[KeyChange] = field(default_factory=list)
    inputs: list[KeyChange] = field(default_factory=list)
    """Every other input or option (timeout, repository, protect...)."""


@dataclass(frozen=True)
class ResourceChange:
    resource: str
    kind: Kind
    keys: list[KeyChange] = field(default_factory=list)


@dataclass(frozen=True)
class PlanDiff:
    steps: list[StepChange]
    releases: list[ReleaseChange]
    resources: list[ResourceChange]
    outputs: list[KeyChange]
    placement: dict[str, list[KeyChange]] = field(default_factory=dict)
    """Per node: changed connection facts (host, port, user, hostKey, bastion.*)."""
    warnings: list[str] = field(default_factory=list)
    """Every warning of the new plan: a review shows them whatever changed."""
    new_warnings: list[str] = field(default_factory=list)
    """Those the earlier plan did not have."""
    acceptance: list[str] = field(default_factory=list)
    """What acceptance does differently: nodes due and why, level, the nodes it covers, floors, images."""
    secrets: list[KeyChange] = field(default_factory=list)
    """Secrets whose encrypted text in the stack file changed (digests only, never their content)."""
    bundle: list[str] = field(default_factory=list)
    """The air-gap lockfile's items added, removed, or whose digest changed (plan --bundle-lock)."""

    @property
    def empty(self) -> bool:
        return not (
            self.steps
            or self.releases
            or self.resources
            or self.outputs
            or self.placement
            or self.acceptance
            or self.bundle
        )

    def steps_by_node(self) -> dict[str, list[StepChange]]:
        grouped: dict[str, list[StepChange]] = {}
        for change in self.steps:
            grouped.setdefault(change.node, []).append(change)
        return grouped


def _show(value: Any) -> str:
    if value == COMPUTED:
        return "(known only during up)"
    return value if isinstance(value, str) and "\n" not in value else json.dumps(value, sort_keys=True)


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Leaves of a nested value as (dotted.key[0], leaf); empty maps and lists are leaves."""
    if isinstance(value, Mapping) and value:
        for key in sorted(value):
            yield from flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from flatten(item, f"{prefix}[{index}]")
    else:
        yield prefix, value


def key_changes(old: Any, new: Any, prefix: str = "") -> list[KeyChange]:
    before, after = dict(flatten(old, prefix)), dict(flatten(new, prefix))
    return [
        KeyChange(key, before.get(key, MISSING), after.get(key, MISSING))
        for key in sorted(before.keys() | after.keys())
        if before.get(key, MISSING) != after.get(key, MISSING)
    ]


Catalog = Mapping[str, str]
"""A plan's `scripts`: the node copy's files its commands source, by stored name."""


def _expanded(command: Any, catalog: Catalog) -> str | None:
    """The script inside a command with what it sources written out (so a changed library or step body shows
    as the lines that changed, not only as a new content hash)."""
    if not isinstance(command, str):
        return None
    script = script_of_command(command)
    return expand_stored(script, catalog) if script else command


def _script(command: Any, catalog: Catalog) -> list[str]:
    return (_expanded(command, catalog) or "").splitlines()


def quotes_apart(lines: list[str]) -> list[str]:
    """The lines of a script with the closing quote of a multi-line single-quoted value on a line of its own, so
    that a line added after a value's last line does not show that line as changed (its quote moved)."""
    out, inside = [], False
    for line in lines:
        quotes = line.count("'")
        if inside and quotes % 2 == 1 and line.endswith("'") and len(line) > 1:
            out += [line[:-1], "'"]
        else:
            out.append(line)
        if quotes % 2 == 1:
            inside = not inside
    return out


def _line_changes(old: list[str], new: list[str]) -> list[str]:
    lines = difflib.unified_diff(quotes_apart(old), quotes_apart(new), lineterm="", n=0)
    return [line for line in lines if not line.startswith(("---", "+++", "@@"))]


def script_changes(old: Any, new: Any, catalogs: tuple[Catalog, Catalog] = ({}, {})) -> list[str]:
    return _line_changes(_script(old, catalogs[0]), _script(new, catalogs[1]))


def _parts(command: Any, catalog: Catalog) -> dict[str, str]:
    script = _expanded(command, catalog) if isinstance(command, str) and script_of_command(command) else None
    return dict(split_parts(script)) if script else {}


def part_changes(old: Any, new: Any, catalogs: tuple[Catalog, Catalog] = ({}, {})) -> dict[str, list[str]]:
    """For a merged command: each step whose part changed, with its changed lines under a `[step]` header."""
    before, after = _parts(old, catalogs[0]), _parts(new, catalogs[1])
    if not (before or after):
        return {}
    changes: dict[str, list[str]] = {}
    for step in [*after, *(s for s in before if s not in after)]:
        if before.get(step) != after.get(step):
            lines = _line_changes(before.get(step, "").splitlines(), after.get(step, "").splitlines())
            changes[step] = [f"[{step}]", *lines]
    return changes


def _step_name(resource: Mapping[str, Any]) -> str:
    node = str(resource.get("runsOn") or "")
    return str(resource["name"]).removeprefix(f"{node}-")


def _under(key: str, paths: list[str]) -> bool:
    """Whether a dotted key is one of the property paths (as ignoreChanges/replaceOnChanges write them) or below."""
    for written in paths:
        path = written.replace("[*]", "")
        if key == path or key.startswith((f"{path}.", f"{path}[")):
            return True
    return False


def input_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[KeyChange]:
    """Changed inputs the engine acts on: those under the resource's ignoreChanges are left out, as `up` does."""
    ignored = list(new["options"].get("ignoreChanges") or [])
    return [c for c in key_changes(old["inputs"], new["inputs"]) if not _under(c.key, ignored)]


_SETTING = re.compile(r"([A-Z][A-Z0-9_]*)=(\S*)$")


def delete_summary(command: Any) -> str | None:
    """`<step> (SETTING=value, ...)` of a recorded on-delete command: which step it runs, with what."""
    script = script_of_command(command) if isinstance(command, str) else None
    if script is None:
        return None
    step, settings = None, []
    for line in script.splitlines():
        if line.startswith("# mlcluster step: ") and step is None:
            step = line.removeprefix("# mlcluster step: ").strip()
        elif step is not None and (match := _SETTING.match(line)) and match.group(1) != "MLCLUSTER_SCRIPTS":
            settings.append(f"{match.group(1)}={match.group(2)}")
        elif step is not None and line.startswith(("for file in", "# ----")):
            break
    if step is None:
        return None
    return f"{step} ({', '.join(settings)})" if settings else step


def _acceptance_records(stdin: Any) -> dict[str, dict[str, str]]:
    """Each node's record in the acceptance step's input (its `=== nodes` section: `<node> <gpus> <wave> <job>
    <record>`, the record `key=value;...`)."""
    if not isinstance(stdin, str) or "=== nodes\n" not in stdin:
        return {}
    section = stdin.split("=== nodes\n", 1)[1].split("\n=== ", 1)[0]
    records = {}
    for line in section.splitlines():
        words = line.split(" ")
        if len(words) == 5:
            records[words[0]] = dict(item.split("=", 1) for item in words[4].split(";") if "=" in item)
    return records


def acceptance_changes(old: Any, new: Any) -> list[str]:
    """Which nodes the acceptance step tests anew, and what of each node's record changed (a new record is a test)."""
    before, after = _acceptance_records(old), _acceptance_records(new)
    lines = []
    for name, record in after.items():
        was = before.get(name)
        if was is None:
            lines.append(f"{name} (new in the plan)")
        elif was != record:
            fields = [f"{k} {was.get(k, '(none)')} -> {v}" for k, v in record.items() if was.get(k) != v]
            lines.append(f"{name} ({', '.join(fields)})")
    gone = [name for name in before if name not in after]
    if gone:
        lines.append(f"no longer tested: {', '.join(gone)}")
    return lines


def _on_removal(resource: Mapping[str, Any]) -> str:
    """What removing a command runs, where: its recorded on-delete script (the step and its settings), or nothing
    (say so: a reviewer must not read a drain or a reset into a removal that runs none)."""
    if (resource.get("options") or {}).get("retainOnDelete"):
        return "forgotten (retainOnDelete): nothing runs"
    delete = resource["inputs"].get("delete")
    if delete:
        where = resource.get("runsOn") or "its host"
        summary = delete_summary(delete)
        return f"its on-delete script runs on {where}" + (f": {summary}" if summary else "")
    return "it has no on-delete script: nothing runs"


RERUN_MEANS = {
    "kubeadm-init": (
        "an initialised control plane only rewrites its kubeadm config file, which kubeadm does not read again"
        " (the kubelet settings reach nodes through kubelet-tuning, labels and taints through node-metadata; other"
        " ClusterConfiguration changes are not applied)"
    ),
    "node-metadata": (
        "only the lines below change on the Nodes, through the API; a removed label or taint goes only where"
        " mlcluster set it (never one someone else set)"
    ),
}
"""What a re-run of these steps' changed script does on a cluster where they already ran, beyond what their script
lines say: the diff says it beside the re-run (a once-only step's does nothing). A join has none: its script is in
its ignoreChanges (a joined node only reports 'already joined'), so a changed join does not re-run at all."""

CLOCKED = {
    "join-credentials": (
        "its script names the mint window (the UTC day, or hour while a control plane is to join) and the plans were"
        " made at different moments ({old} and {new}): the window may have moved with the clock, not the stack;"
        " give both plans the same --at to compare the stacks only"
    ),
}
"""Steps whose text the program's clock writes: beside their re-run, the diff says when the plans' moments differ."""


def _step_change(
    old: Mapping[str, Any], new: Mapping[str, Any], catalogs: tuple[Catalog, Catalog] = ({}, {})
) -> StepChange | None:
    node, step = str(new.get("runsOn") or "unknown"), _step_name(new)
    old_inputs, new_inputs = old["inputs"], new["inputs"]
    inputs = input_changes(old, new)
    changed = {c.key.split(".")[0].split("[")[0] for c in inputs}
    # The connection input is one secret on the wire; its facts tell whether it changed (any change re-runs).
    if not _under("connection", list(new["options"].get("ignoreChanges") or [])) and key_changes(
        *_recorded_by_both(old.get("connection"), new.get("connection"))
    ):
        changed.add("connection")
    options = key_changes(_options(old), _options(new), "options")
    if not changed and not options:
        return None
    replace_on = ["triggers", *(new["options"].get("replaceOnChanges") or [])]
    if new["type"] == SCRIPT_COPY and "connection" in changed and _under("connection", replace_on):
        return StepChange(
            node, step, "replaced", "replaced (connection changed): the scripts are copied to the new target"
        )
    if any(_under(c.key, replace_on) for c in inputs):
        first = "on-delete script runs" if old["inputs"].get("delete") else "no on-delete script"
        return StepChange(node, step, "replaced", f"replaced (triggers changed): {first}, then the step")
    if new["type"] == SCRIPT_COPY and changed == {"source"}:
        return StepChange(node, step, "re-runs", "the scripts changed: the node's copy gets the new files (none go)")
    if step == "acceptance" and changed == {"stdin"}:
        tested = acceptance_changes(old_inputs.get("stdin"), new_inputs.get("stdin"))
        if tested:
            count = sum(not line.startswith("no longer tested") for line in tested)
            return StepChange(node, step, "re-runs", f"tests {count} node(s): {'; '.join(tested)}")
    if changed - {"delete"}:
        why = ", ".join(sorted(c if c != "create" else "script" for c in changed)) + " changed"
        if step in RERUN_MEANS and "create" in changed:
            why += f"; {RERUN_MEANS[step]}"
        parts = part_changes(old_inputs.get("create"), new_inputs.get("create"), catalogs)
        if parts:
            why += f" in {', '.join(parts)}; the whole command re-runs (each step in it checks before it acts)"
            return StepChange(node, step, "re-runs", why, [line for lines in parts.values() for line in lines])
        return StepChange(
            node, step, "re-runs", why, script_changes(old_inputs.get("create"), new_inputs.get("create"), catalogs)
        )
    if changed:
        return StepChange(
            node,
            step,
            "changed",
            "on-delete script changed",
            script_changes(old_inputs["delete"], new_inputs["delete"], catalogs),
        )
    return StepChange(node, step, "changed", "; ".join(str(c) for c in options))


def _release_change(name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> ReleaseChange | None:
    # An empty values map is a leaf when flattened: it going to or from {} is said by the keys inside.
    inputs = [c for c in input_changes(old, new) if not (c.key == "values" and {} in (c.old, c.new))]
    identity = [c for c in inputs if c.key in RELEASE_IDENTITY]
    values = [KeyChange(c.key.removeprefix("values."), c.old, c.new) for c in inputs if c.key.startswith("values.")]
    rest = [c for c in inputs if c not in identity and not c.key.startswith("values.")]
    rest += key_changes(old["options"], new["options"], "options")
    if not (identity or values or rest):
        return None
    return ReleaseChange(name, "changed", identity, values, rest)


def resource_key(urn: str) -> str:
    """The URN without stack and project (`urn:pulumi:<stack>::<project>::<type>::<name>`), so that two stacks
    of the same program (staging and production, a renamed stack) compare resource by resource."""
    parts = urn.split("::", 2)
    return parts[2] if len(parts) == 3 else urn


_URN_PREFIX = re.compile(r"urn:pulumi:[^:]+::[^:]+::")


def _without_stack(value: Any) -> Any:
    """References to other resources (options.provider, dependencies) compared without stack and project."""
    if isinstance(value, str):
        return _URN_PREFIX.sub("urn:", value)
    if isinstance(value, list):
        return [_without_stack(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _without_stack(v) for k, v in value.items()}
    return value


def _by_urn(plan: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {resource_key(r["urn"]): _without_stack(r) for r in plan.get("resources", [])}


def _options(resource: Mapping[str, Any]) -> dict[str, Any]:
    """Options that decide what `up` does: aliases only say which recorded resource this one is."""
    return {k: v for k, v in resource["options"].items() if k != "aliases"}


def _as_recorded(before: Mapping[str, Any], after: dict[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """`after` keyed as the engine matches it to the state: a resource new under its URN but recorded under
    one of its aliases is that recorded resource (moved, not replaced)."""
    keyed: dict[str, Mapping[str, Any]] = {}
    for key, resource in after.items():
        matched = key
        if key not in before:
            # Already without stack and project (`urn:<type>::<name>`), as every URN in a keyed resource.
            aliases = resource["options"].get("aliases") or []
            recorded = [a.removeprefix("urn:") for a in aliases if isinstance(a, str)]
            matched = next((alias for alias in recorded if alias in before), key)
        keyed[matched] = resource
    return keyed


def diff_plans(old: Mapping[str, Any], new: Mapping[str, Any]) -> PlanDiff:
    """Pure: two plan.json documents in, what changes per node step, release and other resource out."""
    before = _by_urn(old)
    after = _as_recorded(before, _by_urn(new))
    catalogs = (old.get("scripts") or {}, new.get("scripts") or {})
    steps: list[StepChange] = []
    releases: list[ReleaseChange] = []
    resources: list[ResourceChange] = []
    for urn in [*before, *(u for u in after if u not in before)]:
        was, now = before.get(urn), after.get(urn)
        resource = now or was
        assert resource is not None
        if resource["type"] in NODE_RESOURCES:
            node, step = str(resource.get("runsOn") or "unknown"), _step_name(resource)
            if was is None:
                steps.append(StepChange(node, step, "added", "new step: runs on up"))
            elif now is None:
                steps.append(StepChange(node, step, "removed", f"step removed: {_on_removal(was)}"))
            elif change := _step_change(was, now, catalogs):
                if step in CLOCKED and change.kind == "re-runs" and old.get("at") != new.get("at"):
                    note = CLOCKED[step].format(old=old.get("at") or "an unrecorded moment", new=new.get("at"))
                    change = dataclasses.replace(change, why=f"{change.why}; {note}")
                steps.append(change)
        elif resource["type"] == RELEASE:
            name = str(resource["inputs"].get("name") or resource["name"])
            if was is None or now is None:
                releases.append(ReleaseChange(name, "added" if was is None else "removed"))
            elif release := _release_change(name, was, now):
                releases.append(release)
        elif was is None or now is None:
            resources.append(
                ResourceChange(f"{resource['type']}::{resource['name']}", "added" if was is None else "removed")
            )
        else:
            keys = input_changes(was, now) + key_changes(_options(was), _options(now), "options")
            if keys:
                kind: Kind = "replaced" if any(c.key in IDENTITY for c in keys) else "changed"
                resources.append(ResourceChange(f"{resource['type']}::{resource['name']}", kind, keys))
    outputs = key_changes(old.get("outputs") or {}, new.get("outputs") or {})
    secrets = key_changes(old.get("secrets") or {}, new.get("secrets") or {}) if "secrets" in old else []
    steps += _rotated_key_steps(secrets, after, {(c.node, c.step) for c in steps})
    warnings = [str(w) for w in new.get("warnings") or []]
    earlier = {str(w) for w in old.get("warnings") or []}
    return PlanDiff(
        steps,
        releases,
        resources,
        outputs,
        placement_changes(old, new),
        warnings,
        [w for w in warnings if w not in earlier],
        acceptance_review_changes(old.get("acceptance"), new.get("acceptance")),
        secrets,
        section_changes(old.get("bundle"), new.get("bundle")),
    )


CONNECTION_KEYS = ("ssh.privateKey", "ssh.bastion.privateKey")


def _rotated_key_steps(
    secrets: list[KeyChange], after: Mapping[str, Mapping[str, Any]], changed: set[tuple[str, str]]
) -> list[StepChange]:
    """An SSH key of the stack's connections rotated: every step that connects with it has a new `connection`
    input, so `up` runs it again (pulumi-command reruns create on any input change); offline plans hold a
    placeholder for the key, so the steps are found by how they authenticate."""
    rotated = [c for c in secrets if c.key in CONNECTION_KEYS]
    if not rotated:
        return []
    why = (
        f"connection changed: {', '.join(c.key for c in rotated)} rotated (encrypted value"
        f" {', '.join(f'{c.old} -> {c.new}' for c in rotated)}); the step runs again with the new key, checking"
        " before it acts"
    )
    out = []
    for resource in after.values():
        if resource["type"] not in NODE_RESOURCES:
            continue
        connection = resource.get("connection") or {}
        uses_key = connection.get("auth") == "privateKey" or (
            "ssh.bastion.privateKey" in {c.key for c in rotated} and "bastion" in connection
        )
        node, step = str(resource.get("runsOn") or "unknown"), _step_name(resource)
        if not uses_key or (node, step) in changed:
            continue
        replace_on = ["triggers", *(resource["options"].get("replaceOnChanges") or [])]
        if resource["type"] == SCRIPT_COPY and _under("connection", replace_on):
            out.append(
                StepChange(node, step, "replaced", "replaced (connection changed): the scripts are copied again")
            )
        else:
            out.append(StepChange(node, step, "re-runs", why))
    return out


def acceptance_review_changes(old: Any, new: Any) -> list[str]:
    """The review's acceptance section, before -> after: which nodes are tested on this `up` and why, then every
    other setting of the plan (level, nodes covered, floors, images) that changed."""
    if not isinstance(new, Mapping):
        return ["acceptance: off"] if isinstance(old, Mapping) else []
    before: Mapping[str, Any] = old if isinstance(old, Mapping) else {}
    lines = []
    was_due, due = before.get("due") or {}, new.get("due") or {}
    for node, why in due.items():
        if was_due.get(node) != why:
            lines.append(f"tests {node}: {'; '.join(why)}")
    lines += [f"no longer tests {node}" for node in was_due if node not in due]
    for change in key_changes(
        {k: v for k, v in before.items() if k not in ("due", "dueDecidedDuringUp")},
        {k: v for k, v in new.items() if k not in ("due", "dueDecidedDuringUp")},
    ):
        lines.append(str(change))
    if lines and new.get("dueDecidedDuringUp"):
        lines.append("and any recorded node whose driver changed (its GPU preflight reads the driver during up)")
    return lines


NEWER_FACTS = ("auth",)
"""Connection facts plans of older releases did not write: absent from the earlier plan, they are no change."""


def _recorded_by_both(old: Any, new: Any) -> tuple[Any, Any]:
    """The connection facts to compare: a fact the earlier plan's release did not write yet (how a step
    authenticates) is no change of the connection; any other fact that appears or goes is (a bastion added)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        unrecorded = [k for k in NEWER_FACTS if k not in old]
        return old, {k: v for k, v in new.items() if k not in unrecorded}
    return old, new


def placement_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, list[KeyChange]]:
    """Nodes whose connection facts differ; a node added or removed shows as its steps do, not here."""
    before, after = old.get("placement") or {}, new.get("placement") or {}
    changes = {
        node: key_changes(*_recorded_by_both(before[node], after[node]))
        for node in sorted(before.keys() & after.keys())
    }
    return {node: keys for node, keys in changes.items() if keys}


def load_plan(path: Path) -> dict[str, Any]:
    """A plan directory (its plan.json) or a plan.json file."""
    file = path / "plan.json" if path.is_dir() else path
    document: dict[str, Any] = json.loads(file.read_text())
    return document


_MARK = {"added": "+", "removed": "-", "re-runs": "~", "replaced": "±", "changed": "~"}


def _node_block(changes: list[StepChange]) -> list[str]:
    grouped: dict[tuple[Kind, str, tuple[str, ...]], list[str]] = {}
    for change in changes:
        grouped.setdefault((change.kind, change.why, tuple(change.script)), []).append(change.step)
    lines = []
    for (kind, why, script), steps in grouped.items():
        named = steps[0] if len(steps) == 1 else f"{', '.join(steps)} ({len(steps)} steps)"
        lines.append(f"    {_MARK[kind]} {named:<24} {kind}: {why}")
        shown = script[:SCRIPT_LINES_SHOWN]
        lines += [f"        {line}" for line in shown]
        if len(script) > len(shown):
            lines.append(f"        ... {len(script) - len(shown)} more changed lines")
    return lines


def render(diff: PlanDiff, title: str = "plan diff") -> str:
    warnings = [f"  {'+' if w in diff.new_warnings else ' '} {w}" for w in diff.warnings]
    if warnings:
        warnings = ["", f"warnings ({len(diff.warnings)}, {len(diff.new_warnings)} new: +)", *warnings]
    if diff.empty:
        return "\n".join([f"{title}: no changes", *warnings])
    lines = [f"{title}:", *warnings]
    if diff.placement:
        lines += ["", "placement (where the steps run: SSH target, user, bastion, pinned host key)"]
        for node, keys in diff.placement.items():
            lines.append(f"  {node}")
            lines += [f"      {c}" for c in keys]
    by_node = diff.steps_by_node()
    if by_node:
        lines += ["", "nodes (steps that re-run, are replaced, added or removed on `up`)"]
        # Nodes whose changes read the same (four GPU workers, one version bump) are one block; within a node, steps
        # with the same change are one line.
        blocks: dict[tuple[str, ...], list[str]] = {}
        for node, changes in by_node.items():
            blocks.setdefault(tuple(_node_block(changes)), []).append(node)
        for block, nodes in blocks.items():
            lines.append(
                f"  {', '.join(nodes)}" + (f" (the same on each of the {len(nodes)})" if len(nodes) > 1 else "")
            )
            lines += block
    if diff.releases:
        lines += ["", "releases"]
        for release in diff.releases:
            lines.append(
                f"  {_MARK[release.kind]} {release.release}"
                + ("" if release.kind == "changed" else f" ({release.kind})")
            )
            lines += [f"      {c}" for c in release.identity]
            lines += [f"      values {c}" for c in release.values]
            lines += [f"      {c}" for c in release.inputs]
    if diff.resources:
        lines += ["", "other resources"]
        for resource in diff.resources:
            said = {"replaced": f" ({REPLACED_OBJECT})", "changed": ""}.get(resource.kind, f" ({resource.kind})")
            lines.append(f"  {_MARK[resource.kind]} {resource.resource}{said}")
            lines += [f"      {c}" for c in resource.keys]
    if diff.secrets:
        lines += ["", "secrets (their encrypted text in the stack file changed; nothing of a secret is shown)"]
        lines += [f"  {c}" for c in diff.secrets]
    if diff.acceptance:
        lines += ["", "acceptance (what the acceptance step tests on `up`)"] + [f"  {c}" for c in diff.acceptance]
    if diff.bundle:
        lines += ["", "bundle (the air-gap lockfile: items added, removed, or whose digest changed)"]
        lines += [f"  {c}" for c in diff.bundle]
    if diff.outputs:
        lines += ["", "outputs"] + [f"  {c}" for c in diff.outputs]
    kinds = [c.kind for c in diff.steps]
    lines += [
        "",
        f"summary: {kinds.count('re-runs')} step(s) re-run and {kinds.count('replaced')} replaced on"
        f" {len(by_node)} node(s), {kinds.count('added')} added, {kinds.count('removed')} removed;"
        f" {len(diff.releases)} release(s) change; {len(diff.resources)} other resource(s) change;"
        f" {len(diff.placement)} node(s) change placement",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.plan.diff", description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="earlier plan directory (or its plan.json)")
    parser.add_argument("new", type=Path, help="later plan directory (or its plan.json)")
    args = parser.parse_args(argv)
    print(render(diff_plans(load_plan(args.old), load_plan(args.new)), f"plan diff {args.old} -> {args.new}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
