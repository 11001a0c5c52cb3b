"""Node steps as shell text: a step's settings + the shared library + its real `.sh` body.

A step runs over SSH as `bash -c "<script>"`; the script travels inside the command text (readable in the
plan), while secrets travel on stdin, never in the command.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ..config.schema import HEREDOC_DELIMITER, Secret

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
_DELIMITER = HEREDOC_DELIMITER
_HEAD = "#!/usr/bin/env bash\nset -euo pipefail\n"


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


def render_script(name: str, settings: Mapping[str, str]) -> str:
    """The full text of step `name`.sh with its settings: what a reviewer reads and what the node runs."""
    assignments = "".join(f"{key}={shlex.quote(value)}\n" for key, value in settings.items())
    text = _HEAD + f"# mlcluster step: {name}\n" + assignments + _body("lib.sh") + _body(f"{name}.sh")
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
