"""Node steps as shell text: a step's settings + the shared library + its real `.sh` body.

A step runs over SSH as `bash -c "<script>"`. Each step exists in two forms built from the same parts:

- the full script (`NodeStep.script`): settings, the library and the step's body in one text. It is what a
  reviewer reads in the plan (`nodes/<node>/NN-<step>.sh`) and what the tests run;
- the node's script (`NodeStep.node_script`): the same settings, then the library and the body *sourced* from
  the node's copy of the script files (`~/.mlcluster-scripts/<name>-<sha16>.sh`, put there once per node by the
  `<node>-scripts` copy, components/cluster/node_scripts.py). This is the command the engine stores, twice (input and
  output), so it carries only what differs between nodes and runs: the settings, readable line by line in
  `pulumi preview --diff`, and each file's content hash. A changed script changes its hash, so every command
  that uses it changes and runs again; the node keeps older files, so a delete recorded long ago finds its own.

Secrets travel on stdin, never in either form.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ..config.schema import HEREDOC_DELIMITER, Secret

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
_DELIMITER = HEREDOC_DELIMITER
_HEAD = "#!/usr/bin/env bash\nset -euo pipefail\n"
STORE = ".mlcluster-scripts"
"""Each node's copy of the script files, in the SSH user's login directory: where SFTP writes (the copy runs as
that user) and where every step starts (sudo keeps the directory), so no step needs to know the home's path."""
STORE_VARIABLE = "MLCLUSTER_SCRIPTS"
STEP_MARKER = "== mlcluster step: "
"""Printed before each part of a merged command, so its output can be read step by step."""
_PART_COMMENT = "# ---- mlcluster step: "
_SOURCE_PREFIX = f'. "${STORE_VARIABLE}/'


@cache
def script_source(name: str) -> str:
    return (SCRIPTS / name).read_text()


def _body(name: str) -> str:
    return _without_head(script_source(name))


@cache
def _without_head(text: str) -> str:
    """A script file without its shebang and strict-mode line (every rendered script starts with its own)."""
    lines = text.splitlines()
    while lines and (lines[0].startswith("#!") or lines[0].startswith("set -euo pipefail")):
        lines.pop(0)
    return "\n".join(lines).strip("\n") + "\n"


@dataclass(frozen=True)
class NodeStep:
    """One ordered step on one node: a title for people, the script that runs, and how it is wired."""

    name: str
    title: str
    script: str | None
    """The full script (settings, library, body): None when nothing runs at creation (only `delete_script`)."""
    secret_stdout: bool = False
    log_stdout: bool = True
    """False: stdout carries data for the program (not for people), so only stderr is logged; the step prints
    its progress there."""
    """The step prints credentials (join token, kubeconfig): its output is a secret and is not logged."""
    stdin: Secret | None = None
    """Secrets the step reads on stdin (never part of the command or the plan)."""
    delete_script: str | None = None
    """Runs when the step's resource is deleted (the node left the stack)."""
    settings: Mapping[str, str] = field(default_factory=dict)
    node_script: str | None = None
    """`script` as the node receives it: library and body sourced from the node's copy of the script files.
    None: the node receives `script` itself, a standalone script whose inputs change only when it does (the
    admin kubeconfig's, whose output the Kubernetes provider is built from)."""
    node_delete_script: str | None = None
    """`delete_script` as the node receives it (see node_script)."""

    @property
    def command_script(self) -> str | None:
        return self.node_script or self.script

    @property
    def command_delete_script(self) -> str | None:
        return self.node_delete_script or self.delete_script


def lib_text() -> str:
    return _body("lib.sh")


@cache
def stored_name(name: str, text: str) -> str:
    """The file name of script `name` (`lib`, `swap`, …) with body `text` in the node's copy: named by content."""
    return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.sh"


def stored_file(name: str) -> str:
    """The stored file name of components/scripts/<name>.sh as it is now."""
    return stored_name(name, _body(f"{name}.sh"))


def store_catalog() -> dict[str, str]:
    """Every script file by its stored name, as the node's copy holds it: what `<node>-scripts` uploads."""
    names = sorted(path.name.removesuffix(".sh") for path in SCRIPTS.glob("*.sh"))
    return {stored_file(name): _body(f"{name}.sh") for name in names}


def _assignments(settings: Mapping[str, str]) -> str:
    return "".join(f"{key}={shlex.quote(value)}\n" for key, value in settings.items())


def _source(file: str) -> str:
    return f'# shellcheck source=/dev/null\n{_SOURCE_PREFIX}{file}"\n'


def _store_check(files: list[str]) -> str:
    """Where the node's copy is, and that it holds every file this command sources, each with the content its name
    says (a reinstalled host whose copy the state still records has none, an edited or cut-short file is another
    script: say so, and how to get the files back, before anything runs)."""
    return (
        f'{STORE_VARIABLE}="$PWD/{STORE}"\n'
        f"for file in {' '.join(files)}; do\n"
        f'  sum=$(sha256sum 2>/dev/null <"${STORE_VARIABLE}/$file") && [ "${{file%-*}}-${{sum:0:16}}.sh" = "$file" ] ||'
        f" {{ printf 'error: %s is missing or not what its name says: this host lost its copy of the mlcluster"
        f' scripts (pulumi up --replace its <node>-scripts resource)\\n\' "${STORE_VARIABLE}/$file" >&2; exit 1; }}\n'
        "done\n"
    )


def _checked(name: str, text: str) -> str:
    if _DELIMITER in text:
        raise ValueError(f"script {name} contains the reserved line {_DELIMITER}")
    return text


def _step_script(name: str, settings: Mapping[str, str], code: str) -> str:
    return _checked(name, _HEAD + f"# mlcluster step: {name}\n" + _assignments(settings) + code)


def render_script(name: str, settings: Mapping[str, str]) -> str:
    """The full text of step `name`.sh with its settings: what a reviewer reads and what the tests run."""
    return _step_script(name, settings, lib_text() + _body(f"{name}.sh"))


def render_node_script(name: str, settings: Mapping[str, str]) -> str:
    """Step `name` as the node receives it: the same settings, library and body sourced from the node's copy."""
    lib, body = stored_file("lib"), stored_file(name)
    return _step_script(name, settings, _store_check([lib, body]) + _source(lib) + _source(body))


def rendered_step(name: str, title: str, settings: Mapping[str, str] | None = None, **wiring: object) -> NodeStep:
    """Step `name`.sh with its settings, in both forms (see the module docstring)."""
    settings = settings or {}
    return NodeStep(
        name=name,
        title=title,
        script=render_script(name, settings),
        node_script=render_node_script(name, settings),
        settings=settings,
        **wiring,  # type: ignore[arg-type]
    )


def remote_command(script: str, user: str, step: str) -> str:
    """The command string sent over SSH; non-root users run the step through passwordless sudo."""
    sudo = "" if user == "root" else "sudo -n "
    return f"{sudo}bash -c \"$(cat <<'{_DELIMITER}'\n{script.rstrip()}\n{_DELIMITER}\n)\" mlcluster-{step}"


def script_of_command(command: str) -> str | None:
    """The step script inside a command made by remote_command (for plans and reviews)."""
    start = command.find(f"<<'{_DELIMITER}'\n")
    end = command.rfind(f"\n{_DELIMITER}\n")
    if start < 0 or end < 0:
        return None
    return command[start + len(_DELIMITER) + 5 : end] + "\n"


def stored_files_of(script: str) -> list[str]:
    """The stored files a node's script sources, in order."""
    return [
        line.removeprefix(_SOURCE_PREFIX).removesuffix('"')
        for line in script.splitlines()
        if line.startswith(_SOURCE_PREFIX)
    ]


def expand_stored(script: str, catalog: Mapping[str, str]) -> str:
    """A node's script with each sourced file written out (the full form a reviewer reads); a file the catalog
    lacks (a plan written before the node's copy existed) stays a source line."""
    lines: list[str] = []
    for line in script.splitlines(keepends=True):
        file = line.removeprefix(_SOURCE_PREFIX).rstrip("\n").removesuffix('"')
        if line.startswith(_SOURCE_PREFIX) and file in catalog:
            if lines and lines[-1] == "# shellcheck source=/dev/null\n":
                lines.pop()
            lines.append(f"# ---- {file}\n{catalog[file]}")
        else:
            lines.append(line)
    return "".join(lines)


def step_part(name: str, title: str, settings: Mapping[str, str], *, reads_stdin: bool, stored: bool = False) -> str:
    """One step inside a merged command: its own subshell (an `exit` ends the step, settings stay local),
    announced in the output; stdin only for the step that reads it, so no other step can consume a secret.
    `stored`: the body is sourced from the node's copy instead of written out."""
    body = _source(stored_file(name)) if stored else _body(f"{name}.sh")
    return (
        f"{_PART_COMMENT}{name}: {title}\n"
        f"MLCLUSTER_STEP={name}\n"
        f"printf '%s\\n' {shlex.quote(STEP_MARKER + name)}\n"
        f"(\n{_assignments(settings)}{body})" + ("\n" if reads_stdin else " </dev/null\n")
    )


def merged_script(name: str, parts: list[tuple[str, str]], *, stored_files: list[str] | None = None) -> str:
    """The script of a merged command: the library, then each (step, part) in order. `stored_files`: the node's
    form, whose parts source their bodies from the node's copy (these files, the library first).

    An EXIT trap names the step that failed: the error text is all a failed `up` shows of the command."""
    library = lib_text() if stored_files is None else _store_check(stored_files) + _source(stored_files[0])
    text = (
        _HEAD
        + f"# mlcluster steps: {name}: {' > '.join(step for step, _ in parts)}\n"
        + library
        + "MLCLUSTER_STEP=start\n"
        + "report_failed_step() {\n"
        + "  local rc=$?\n"
        + '  [ "$rc" -eq 0 ] || printf \'error: step %s failed (exit %s)\\n\' "$MLCLUSTER_STEP" "$rc" >&2\n'
        + "}\n"
        + "trap report_failed_step EXIT\n"
        + "".join(part for _, part in parts)
    )
    return _checked(name, text)


def merge_steps(name: str, title: str, steps: list[NodeStep]) -> NodeStep:
    """Steps that always run together as one command: one SSH session and one resource per node, each step's
    own script still readable (and diffable) in it. Only steps without delete scripts or secret output merge,
    and at most one of them may read stdin."""
    readers = [step for step in steps if step.stdin is not None]
    if len(readers) > 1:
        raise ValueError(f"{name}: more than one step reads stdin ({', '.join(s.name for s in readers)})")
    unmergeable = [step.name for step in steps if step.delete_script or step.secret_stdout or step.script is None]
    if unmergeable:
        raise ValueError(f"{name}: steps with a delete script or secret output run alone ({', '.join(unmergeable)})")

    def parts(stored: bool) -> list[tuple[str, str]]:
        return [
            (s.name, step_part(s.name, s.title, s.settings, reads_stdin=s.stdin is not None, stored=stored))
            for s in steps
        ]

    files = [stored_file("lib"), *(stored_file(s.name) for s in steps)]
    return NodeStep(
        name=name,
        title=title,
        script=merged_script(name, parts(stored=False)),
        node_script=merged_script(name, parts(stored=True), stored_files=files),
        stdin=readers[0].stdin if readers else None,
    )


def split_parts(script: str) -> list[tuple[str, str]]:
    """(step, text) of each part of a merged script, in order; [] for a script of one step."""
    parts: list[tuple[str, str]] = []
    for chunk in script.split(_PART_COMMENT)[1:]:
        step = chunk.split(":", 1)[0]
        parts.append((step, _PART_COMMENT + chunk))
    return parts


def split_output(stdout: str) -> dict[str, str]:
    """A merged command's output, step by step (the lines after each step's marker)."""
    steps: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith(STEP_MARKER):
            current = steps.setdefault(line.removeprefix(STEP_MARKER).strip(), [])
        elif current is not None:
            current.append(line)
    return {step: "".join(f"{line}\n" for line in lines) for step, lines in steps.items()}
