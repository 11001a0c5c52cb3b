"""Node steps as shell text: a step's settings + the shared library + its real `.sh` body.

A step runs over SSH as `bash -c "<script>"`; the script travels inside the command text (readable in the
plan), while secrets travel on stdin, never in the command.

The shared library is installed on each node once, content-addressed (`LIB_DIR/lib-<sha>.sh`), by the node's
first command (the GPU preflight when it runs, else the preparation), which carries its text; every later
step's command sources it by that path instead of carrying another copy (the engine stores each command's text
twice, as input and output). A changed library changes the path, so every step that uses it changes and runs
again.
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
_LIB_DELIMITER = "MLCLUSTER_LIB_TEXT"
LIB_DIR = "/var/lib/mlcluster/lib"
STEP_MARKER = "== mlcluster step: "
"""Printed before each part of a merged command, so its output can be read step by step."""
_PART_COMMENT = "# ---- mlcluster step: "


@cache
def script_source(name: str) -> str:
    return (SCRIPTS / name).read_text()


def _body(name: str) -> str:
    lines = script_source(name).splitlines()
    while lines and (lines[0].startswith("#!") or lines[0].startswith("set -euo pipefail")):
        lines.pop(0)
    return "\n".join(lines).strip("\n") + "\n"


@dataclass(frozen=True)
class NodeStep:
    """One ordered step on one node: a title for people, the script that runs, and how it is wired."""

    name: str
    title: str
    script: str | None
    """None: nothing runs when the resource is created (only `delete_script` matters)."""
    secret_stdout: bool = False
    """The step prints credentials (join token, kubeconfig): its output is a secret and is not logged."""
    stdin: Secret | None = None
    """Secrets the step reads on stdin (never part of the command or the plan)."""
    delete_script: str | None = None
    """Runs when the step's resource is deleted (the node left the stack)."""
    settings: Mapping[str, str] = field(default_factory=dict)
    embeds_lib: bool = False
    """The command carries the library itself (the preparation that installs it, the preflight that may run
    before it); every other step's command sources the installed copy."""
    standalone: bool = False
    """The script neither carries nor sources the library, so its inputs change only when the script itself
    does (the admin kubeconfig, whose output the Kubernetes provider is built from)."""
    sources_lib: bool = False
    """The script already sources the installed library (a preparation after a preflight that installed it)."""


def lib_text() -> str:
    return _body("lib.sh")


def lib_path() -> str:
    """Where the shared library lives on a node: named by its content."""
    return f"{LIB_DIR}/lib-{hashlib.sha256(lib_text().encode()).hexdigest()[:16]}.sh"


def render_script(name: str, settings: Mapping[str, str]) -> str:
    """The full text of step `name`.sh with its settings: what a reviewer reads and what the node runs."""
    assignments = "".join(f"{key}={shlex.quote(value)}\n" for key, value in settings.items())
    text = _HEAD + f"# mlcluster step: {name}\n" + assignments + _body("lib.sh") + _body(f"{name}.sh")
    if _DELIMITER in text:
        raise ValueError(f"script {name} contains the reserved line {_DELIMITER}")
    return text


def render_installing_script(name: str, settings: Mapping[str, str]) -> str:
    """Step `name` as the first command a node runs: it installs the library (once, by content) and sources
    it, so the node's later commands, the preparation included, carry only its path."""
    assignments = "".join(f"{key}={shlex.quote(value)}\n" for key, value in settings.items())
    text = _HEAD + f"# mlcluster step: {name}\n" + assignments + _install_lib() + _body(f"{name}.sh")
    if _DELIMITER in text:
        raise ValueError(f"script {name} contains the reserved line {_DELIMITER}")
    return text


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


def with_installed_lib(script: str) -> str:
    """A step's script that sources the node's installed library instead of carrying its own copy."""
    if lib_text() not in script:
        raise ValueError("the script does not embed lib.sh")
    return script.replace(lib_text(), _source_lib(), 1)


def _source_lib() -> str:
    path = lib_path()
    return (
        f"[ -r {path} ] || {{ printf 'error: %s\\n' '{path} is missing: the first mlcluster step on this node"
        " installs it' >&2; exit 1; }\n"
        f"# shellcheck source=/dev/null\n. {path}\n"
    )


def _install_lib() -> str:
    """Shell text that writes the library to its content-addressed path (once) and sources it."""
    text = lib_text()
    if _LIB_DELIMITER in text:
        raise ValueError(f"lib.sh contains the reserved line {_LIB_DELIMITER}")
    path = lib_path()
    return (
        f"mkdir -p {LIB_DIR}\n"
        f"if [ ! -f {path} ]; then\n"
        f"  cat >{path}.tmp <<'{_LIB_DELIMITER}'\n{text}{_LIB_DELIMITER}\n"
        f"  mv -f {path}.tmp {path}\n"
        "fi\n"
        f"# shellcheck source=/dev/null\n. {path}\n"
    )


def step_part(name: str, title: str, settings: Mapping[str, str], *, reads_stdin: bool) -> str:
    """One step inside a merged command: its own subshell (an `exit` ends the step, settings stay local),
    announced in the output; stdin only for the step that reads it, so no other step can consume a secret."""
    assignments = "".join(f"{key}={shlex.quote(value)}\n" for key, value in settings.items())
    return (
        f"{_PART_COMMENT}{name}: {title}\n"
        f"MLCLUSTER_STEP={name}\n"
        f"printf '%s\\n' {shlex.quote(STEP_MARKER + name)}\n"
        f"(\n{assignments}{_body(f'{name}.sh')})" + ("\n" if reads_stdin else " </dev/null\n")
    )


def merged_script(name: str, parts: list[tuple[str, str]], *, install_lib: bool = True) -> str:
    """The script of a merged command: install (or, when an earlier command did, only source) the library,
    then each (step, part) in order.

    An EXIT trap names the step that failed: the error text is all a failed `up` shows of the command."""
    text = (
        _HEAD
        + f"# mlcluster steps: {name}: {' > '.join(step for step, _ in parts)}\n"
        + (_install_lib() if install_lib else _source_lib())
        + "MLCLUSTER_STEP=start\n"
        + "report_failed_step() {\n"
        + "  local rc=$?\n"
        + '  [ "$rc" -eq 0 ] || printf \'error: step %s failed (exit %s)\\n\' "$MLCLUSTER_STEP" "$rc" >&2\n'
        + "}\n"
        + "trap report_failed_step EXIT\n"
        + "".join(part for _, part in parts)
    )
    if _DELIMITER in text:
        raise ValueError(f"script {name} contains the reserved line {_DELIMITER}")
    return text


def merge_steps(name: str, title: str, steps: list[NodeStep], *, install_lib: bool = True) -> NodeStep:
    """Steps that always run together as one command: one SSH session and one resource per node, each step's
    own script still readable (and diffable) in it. Only steps without delete scripts or secret output merge,
    and at most one of them may read stdin. `install_lib`: this command is the node's first and installs the
    library; otherwise it sources the copy an earlier command installed."""
    readers = [step for step in steps if step.stdin is not None]
    if len(readers) > 1:
        raise ValueError(f"{name}: more than one step reads stdin ({', '.join(s.name for s in readers)})")
    unmergeable = [step.name for step in steps if step.delete_script or step.secret_stdout or step.script is None]
    if unmergeable:
        raise ValueError(f"{name}: steps with a delete script or secret output run alone ({', '.join(unmergeable)})")
    parts = [(s.name, step_part(s.name, s.title, s.settings, reads_stdin=s.stdin is not None)) for s in steps]
    return NodeStep(
        name=name,
        title=title,
        script=merged_script(name, parts, install_lib=install_lib),
        stdin=readers[0].stdin if readers else None,
        embeds_lib=install_lib,
        sources_lib=not install_lib,
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
