"""A check that fails is never read as an answer (issue: every fault recoverable).

`[ -n "$(swapon --show)" ]` is false when swapon fails, so the step said `ok: swap is off` and was recorded as done.
The shapes that turn a failed command into an answer, linted over every node script:

- a command substitution inside a `[ … ]`/`[[ … ]]` test: the test sees only the text, never the status;
- a substitution whose status is thrown away (`$(cmd || true)`, `x=$(cmd) || true`, `$(cmd; true)`);
- `|| true` after a command whose failure would otherwise stop the step;
- a condition that silences a query's errors (`if ! kubectl get … >/dev/null 2>&1`), where "not found" and
  "could not ask" read the same;
- a substitution in an argument (`ok "firewall: $(firewall_in_use)"`) or a `local` declaration
  (`local x=$(cmd)`): the command that runs is `ok` or `local`, whose status is 0 whatever the substitution did;
- a command piped into `grep -q` (`ufw show added | grep -q …`): a producer that failed reads as "no match";
- a function that asks something (a substitution or a `die` in its body) called as a condition (`if at_version`):
  bash turns errexit off for the whole call, so a failed command inside it no longer stops the step and its
  `die` in a substitution only ends that subshell (found by the fault sweep, tests/fleet/sweep.py).

What a script may do instead: assign first (`found=$(cmd) || die …`), then test the variable; or use a command
whose exit status *is* the answer and which has no other failure worth stopping for — those are listed below,
each with why, and a line outside the list fails this test.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from components.render.shell import lib_text

from .fleet.hosts import STUBS
from .fleet.stubs._stub import write_launcher
from .node_sandbox import Node

SCRIPTS = Path(__file__).resolve().parents[1] / "components" / "scripts"

SUBSTITUTION_IN_TEST = re.compile(r"\[\[?[^\]]*\$\((?!\()")  # not $(( )), which is arithmetic
# What cannot fail in a way worth stopping for, and so may stand in a test or a condition as it is.
HARMLESS = re.compile(r"\$\(date \+%s\)|command -v \S+ >/dev/null(?: 2>&1)?|declare -F \S+ >/dev/null")
STATUS_DROPPED = re.compile(r"\$\([^)]*\|\|\s*true|\)\s*\|\|\s*true|;\s*true\s*\)")
OR_TRUE = re.compile(r"\|\|\s*true\b")
SILENCED_CONDITION = re.compile(r"^\s*(?:if|elif|while|until)\s+!?\s*(?P<command>[^;]*?)(?:>/dev/null )?2>/dev/null|"
                                r"^\s*(?:if|elif|while|until)\s+!?\s*(?P<command2>[^;]*?)>/dev/null 2>&1")  # fmt: skip

PIPED_INTO_GREP_Q = re.compile(r"\|\s*grep\s+-\w*q")
# `$(printf … | tr/sed …)` only reformats the script's own text: nothing there can fail worth stopping for.
SUBSTITUTION_IN_ARGUMENT = re.compile(
    r"^\s*(?:ok|changed|echo|printf)\s.*\$\((?!\(|printf )|^\s*local\s+\w+=\$\((?!\()"
)
CONDITION_CALL = r"(?:^\s*(?:if|elif|while|until)\s+!?\s*|&&\s*!?\s*|\|\|\s*!?\s*){name}\b"
CHECKED_FUNCTIONS: dict[str, str] = {
    # Functions that may stand in a condition: every failure inside ends the step by an explicit `die`/`exit`.
    "write_if_changed": "returns 1 for 'unchanged'; each of its commands is followed by an explicit die",
}

TOLERATED: dict[tuple[str, str], str] = {
    # (script, the line's text, stripped): why the failure is the answer, or harmless.
    ("lib.sh", 'if ! firewall-cmd --permanent --query-port="$port" >/dev/null 2>&1; then'): (
        "--query-port answers by status (1: not open); a firewalld that cannot answer was ruled out by --state"
    ),
    ("lib.sh", 'elif ! firewall-cmd --query-port="$port" >/dev/null 2>&1; then'): (
        "--query-port answers by status (1: not open); a firewalld that cannot answer was ruled out by --state"
    ),
    (
        "lib.sh",
        "if firewall-cmd --permanent --query-protocol=vrrp >/dev/null 2>&1 && firewall-cmd --query-protocol=vrrp"
        " >/dev/null 2>&1; then",
    ): "--query-protocol answers by status (1: not allowed); a firewalld that cannot answer was ruled out by --state",
    ("api-vip.sh", 'tcp_connects "$VIP_ADDRESS" "$VIP_PORT" 3 || true'): (
        "the attempt only makes the kernel ask who has the address (ARP); the neighbour table read next is the answer"
    ),
    ("kubeadm-join.sh", "IFS= read -r token || true"): "read is 1 at end of input; every value is checked after",
    ("kubeadm-join.sh", "IFS= read -r ca_hash || true"): "read is 1 at end of input; every value is checked after",
    ("kubeadm-join.sh", "IFS= read -r certificate_key || true"): (
        "read is 1 at end of input (a worker gets no key); every value is checked after"
    ),
    (
        "image-disk.sh",
        'elsewhere=$(findmnt -rn -S "$device" -o TARGET 2>/dev/null | grep -vxF "$mount_point" || true)',
    ): "findmnt is 1 for 'not mounted' and grep 1 for 'no other mount point': both are the answer 'nowhere else'",
    ("containerd.sh", 'write_if_changed /etc/yum.repos.d/docker-ce.repo "$DOCKER_REPO_RPM" || true'): (
        "write_if_changed returns 1 for 'unchanged' and stops the step itself on any failure"
    ),
    ("kubeadm-init.sh", 'write_if_changed "$config" "$KUBEADM_CONFIG" 0600 || true'): (
        "write_if_changed returns 1 for 'unchanged' and stops the step itself on any failure"
    ),
    ("kubeadm-join.sh", 'write_if_changed "$file" "$config" 0600 || true'): (
        "write_if_changed returns 1 for 'unchanged' and stops the step itself on any failure"
    ),
    ("etcd-restore.sh", 'if (exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}") 2>/dev/null; then'): (
        "a refused connection is the answer 'etcd no longer listens'; the crictl check after it must answer too"
    ),
    (
        "gpu-preflight.sh",
        'elif [ -z "$root" ] && declare -F detect_os >/dev/null && (detect_os) >/dev/null 2>&1 &&'
        " declare -F kernel_headers_package >/dev/null; then",
    ): "an OS the family detection does not know reports headers as not found (a warning), never as present",
}


def _lines() -> list[tuple[str, int, str]]:
    out = []
    for script in sorted(SCRIPTS.glob("*.sh")):
        for number, line in enumerate(script.read_text().splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            out.append((script.name, number, line))
    return out


RELIES_ON_ERREXIT = re.compile(r"^\s*(?:local\s+)?\w+=\$\((?!\().*$")
HANDLED = re.compile(r"\|\|\s*(?:die|exit|return|status=)")


def asking_functions() -> dict[str, str]:
    """Functions of the node scripts that rely on errexit to stop at a failed substitution (an assignment from
    `$(…)` without its own `|| die`/`|| exit`/`|| status=$?`), by name -> defining script."""
    found = {}
    for script in sorted(SCRIPTS.glob("*.sh")):
        for match in re.finditer(r"^(\w+)\(\) \{\n(.*?)^\}", script.read_text(), re.M | re.S):
            # Statements continued on the next line (`x=$(…) ||` / `\`) are read as one.
            body = re.sub(r"(\|\||\\)\n\s*", r"\1 ", match.group(2))
            statements = [line for line in body.splitlines() if not line.lstrip().startswith("#")]
            if match.group(1) not in CHECKED_FUNCTIONS and any(
                RELIES_ON_ERREXIT.match(line) and not HANDLED.search(line) for line in statements
            ):
                found[match.group(1)] = script.name
    return found


def offences(lines: list[tuple[str, int, str]], functions: dict[str, str] | None = None) -> list[str]:
    found = []
    conditions = [
        (name, re.compile(CONDITION_CALL.format(name=re.escape(name))))
        for name in (asking_functions() if functions is None else functions)
    ]
    for script, number, line in lines:
        text = line.strip()
        if (script, text) in TOLERATED:
            continue
        text = HARMLESS.sub("", text)
        if SUBSTITUTION_IN_TEST.search(text):
            found.append(f"{script}:{number}: a command substitution inside a test loses its status: {text}")
        elif STATUS_DROPPED.search(text) or OR_TRUE.search(text):
            found.append(f"{script}:{number}: `|| true` makes a failed command an answer: {text}")
        elif SILENCED_CONDITION.search(text):
            found.append(f"{script}:{number}: a condition that silences a query's errors: {text}")
        elif PIPED_INTO_GREP_Q.search(text):
            found.append(f"{script}:{number}: a failed producer piped into grep -q reads as no match: {text}")
        elif SUBSTITUTION_IN_ARGUMENT.search(text) and not text.startswith("die "):
            found.append(f"{script}:{number}: a substitution in an argument loses its status: {text}")
        else:
            called = [name for name, pattern in conditions if pattern.search(text)]
            if called:
                found.append(f"{script}:{number}: {called[0]} asks something and is called as a condition: {text}")
    return found


def test_no_node_script_reads_a_failed_check_as_an_answer() -> None:
    assert offences(_lines()) == []


def test_every_tolerated_line_still_exists() -> None:
    present = {(script, line.strip()) for script, _, line in _lines()}
    assert not sorted(set(TOLERATED) - present), "stale TOLERATED entries"


@pytest.mark.parametrize(
    "line",
    [
        'if [ -n "$(swapon --show --noheadings 2>/dev/null)" ]; then',  # the swap check
        'running() { [ -n "$(crictl ps --name "^$1\\$" -q)" ]; }',
        'probe=$(blkid -p -o export "$device" || true)',
        'status=$(kubectl get node "$NODE_NAME" --no-headers) || true',
        'if ! kubectl get node "$NODE_NAME" >/dev/null 2>&1; then',
        'write_if_changed "$file" "$config" 0600 || true',
        'ok "host firewall: $(firewall_in_use)"',  # found by the fault sweep: os.sh printed "host firewall: "
        "local state=$(firewall-cmd --state)",
        'if ! ufw show added | grep -qxF "ufw allow $rule"; then',
    ],
)
def test_the_lint_catches_each_shape(line: str) -> None:
    """The negative control: the old forms, the swap check's first of all, are caught."""
    assert offences([("example.sh", 1, line)])


def test_a_function_relying_on_errexit_is_caught_when_called_as_a_condition(tmp_path: Path) -> None:
    """The negative control for the condition rule: kube-packages.sh's old `if at_version`, whose pkg_version failure
    (a package database it could not read) read as "not at the version" and reinstalled (found by the fault sweep)."""
    old = (
        'at_version() {\n  local installed\n  for pkg in kubeadm; do\n    installed=$(pkg_version "$pkg")\n  done\n}\n'
    )
    script = tmp_path / "example.sh"
    script.write_text(old + "if at_version; then\n  ok at\nfi\n")
    functions = {"at_version": "example.sh"}
    lines = [("example.sh", n, line) for n, line in enumerate(script.read_text().splitlines(), 1)]
    assert offences(lines, functions) == [
        "example.sh:7: at_version asks something and is called as a condition: if at_version; then"
    ]
    # Called as a plain statement, errexit applies inside it: no offence.
    assert offences([("example.sh", 1, "at_version")], functions) == []


OLD_SWAP_CHECK = 'if [ -n "$(swapon --show --noheadings 2>/dev/null)" ]; then'


def _swap_step(node: Node, body: str) -> subprocess.CompletedProcess[str]:
    for tool in ("swapon", "swapoff"):
        write_launcher(node.root / "bin" / tool, sys.executable, STUBS, tool)
    # The step as render_script sends it, with the body given here: the library, then the script.
    return node.run(lib_text() + body)


@pytest.mark.parametrize("form", ["current", "old"])
def test_a_failing_swap_check_stops_the_step_and_the_old_form_read_it_as_off(tmp_path: Path, form: str) -> None:
    """On a node (private mount namespace, the fleet's stubs) with swap on and `swapon --show` failing: the step
    fails with swapon's message; the old form — the negative control — printed `ok: swap is off` and succeeded,
    and kubeadm init then failed on swap on every later run."""
    body = (SCRIPTS / "swap.sh").read_text()
    if form == "old":
        current = body.split("\n")[3:5]
        assert current[0].startswith("active=$(swapon --show --noheadings)"), current
        body = body.replace(current[0] + "\n" + current[1], OLD_SWAP_CHECK)
    node = Node(tmp_path)
    (node.root / "state/db.json").write_text(json.dumps({"units": [], "swap": True}))
    node.settings(fail={"swapon --show": "swapon: /proc/swaps: open failed: Input/output error"})
    result = _swap_step(node, body)
    if form == "current":
        assert result.returncode != 0, result.stdout
        assert "swapon --show failed" in result.stderr and "ok: swap is off" not in result.stdout
    else:
        assert result.returncode == 0 and "ok: swap is off" in result.stdout, (result.stdout, result.stderr)
    assert json.loads((node.root / "state/db.json").read_text())["swap"] is True  # swap still on either way
