"""An executing mock engine: the Pulumi program's `remote.Command`s really run over SSH against the fleet.

What it does, and where it differs from a real `pulumi up` (documented so no test over-claims):

- `command:remote:Command` → `create` runs through the real `ssh` client: the private key from the
  resource's inputs goes to a 0600 file in a private temp directory, the pinned `hostKey` to a temporary
  known_hosts with StrictHostKeyChecking=yes (no pin only with ssh.insecureIgnoreHostKeys), ConnectTimeout =
  perDialTimeout, ConnectionAttempts = dialErrorLimit, BatchMode, the bastion as a ProxyCommand with its
  own pin. `stdin` is fed to the session; stdout/stderr become outputs (those in additionalSecretOutputs
  are returned as secrets). A non-zero exit raises an error naming the resource, step, user, host.
- Every other resource (Kubernetes provider, Helm releases, components) echoes its inputs.
- The run is not a preview, so outputs (join credentials, the kubeconfig) flow into dependents, and the
  registration thread pool is large, so independent resources run at once, as the engine would.
- State across runs: `FleetEngine` remembers what each run registered. A resource registered in an
  earlier run but not in this one is deleted after the run succeeded: its `delete` command runs over SSH,
  dependents before their dependencies (reverse dependency order), as Pulumi deletes.
- Unlike Pulumi, a repeated run re-runs EVERY `create` (Pulumi would skip unchanged resources). That is
  the stricter test of idempotency: it is what happens when state is lost or every step is replaced.
- A failed step behaves as with `pulumi up --continue-on-error`: its error is held until nothing else is
  running, so every resource that does not depend on it still runs; its dependents never start. (Without
  that flag Pulumi lets running steps finish but starts no new ones; a re-run continues, the steps being
  idempotent.) The run then fails with the first error.
"""

from __future__ import annotations

import gc
import hashlib
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc

from components.plan.engine import ProgramRun, RecordedResource, RecordingMonitor, reveal, run_program

from ..conftest import as_config

COMMAND = "command:remote:Command"
STEP_TAG = " mlcluster-"


class RemoteCommandError(RuntimeError):
    """A step failed on a host (or the host could not be reached); the message names both."""


@dataclass
class StepRun:
    resource: str
    step: str
    host: str
    user: str
    action: str
    """create or delete"""
    started: float
    ended: float
    rc: int
    stdout: str | None
    """None for steps whose stdout is a secret (never kept)."""
    stderr: str


@dataclass
class Stored:
    record: RecordedResource
    inputs: dict[str, Any]


@dataclass
class FleetRun:
    program: ProgramRun | None
    error: BaseException | None
    steps: list[StepRun]
    wall_seconds: float
    deleted: list[str] = field(default_factory=list)

    def step(self, resource: str, action: str = "create") -> StepRun:
        found = [s for s in self.steps if s.resource == resource and s.action == action]
        assert len(found) == 1, f"expected one {action} of {resource}, found {len(found)}"
        return found[0]

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error


def _step_of(command: str) -> str:
    return command.rsplit(STEP_TAG, 1)[-1].strip() if STEP_TAG in command else "?"


def _secret(value: Any) -> dict[str, Any]:
    return {rpc._special_sig_key: rpc._special_secret_sig, "value": value}


class SshRunner:
    """Runs one command over SSH the way pulumi-command's connection settings describe it."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._lock = threading.Lock()
        self._keys: dict[str, Path] = {}
        self._counter = 0

    def _key_file(self, private_key: str) -> Path:
        digest = hashlib.sha256(private_key.encode()).hexdigest()[:16]
        with self._lock:
            if digest not in self._keys:
                path = self.workdir / f"key-{digest}"
                path.touch(mode=0o600)
                path.write_text(private_key if private_key.endswith("\n") else private_key + "\n")
                self._keys[digest] = path
            return self._keys[digest]

    def _known_hosts(self, host: str, port: int, host_key: str) -> Path:
        with self._lock:
            self._counter += 1
            path = self.workdir / f"known_hosts-{self._counter}"
        pattern = host if port == 22 else f"[{host}]:{port}"
        path.write_text(f"{pattern} {host_key}\n")
        return path

    def ssh_args(self, connection: Mapping[str, Any]) -> list[str]:
        host, port = str(connection["host"]), int(connection.get("port") or 22)
        # KexAlgorithms and Ciphers: what pulumi-command's Go SSH client negotiates first (and cheaper on CI).
        args = [
            "ssh",
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "KexAlgorithms=curve25519-sha256",
            "-o",
            "Ciphers=aes128-gcm@openssh.com",
            "-o",
            f"ConnectTimeout={int(connection.get('perDialTimeout') or 15)}",
            "-o",
            f"ConnectionAttempts={int(connection.get('dialErrorLimit') or 10)}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-p",
            str(port),
        ]
        if connection.get("privateKey"):
            args += ["-i", str(self._key_file(str(connection["privateKey"])))]
        host_key = connection.get("hostKey")
        if host_key:
            known = self._known_hosts(host, port, str(host_key))
            args += [
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                f"UserKnownHostsFile={known}",
                "-o",
                f"HostKeyAlgorithms={str(host_key).split()[0]}",
            ]
        else:
            args += ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
        proxy = connection.get("proxy")
        if proxy:
            jump = [*self.ssh_args(proxy), "-W", "%h:%p", f"{proxy.get('user') or 'root'}@{proxy['host']}"]
            args += ["-o", f"ProxyCommand={shlex.join(jump)}"]
        return args

    def run(
        self, connection: Mapping[str, Any], command: str, stdin: str | None, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        user = connection.get("user") or "root"
        argv = [*self.ssh_args(connection), f"{user}@{connection['host']}", command]
        return subprocess.run(argv, input=stdin or "", capture_output=True, text=True, timeout=timeout, check=False)


class FleetEngine:
    """Runs the program against the fleet, run after run, remembering what each run registered."""

    def __init__(self, workdir: Path | None = None, max_workers: int = 64) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="mlcfleet-engine-")
        self.workdir = workdir or Path(self._tmp.name)
        self.workdir.chmod(0o700)
        self.ssh = SshRunner(self.workdir)
        self.max_workers = max_workers
        self.state: dict[str, Stored] = {}
        self.runs: list[FleetRun] = []
        self._lock = threading.Lock()
        self._active = 0
        self._last_activity = time.monotonic()

    def _busy(self, delta: int) -> None:
        with self._lock:
            self._active += delta
            self._last_activity = time.monotonic()

    def _hold_until_quiet(self, quiet_seconds: float = 1.0) -> None:
        """Wait until no resource is being created and none has started for quiet_seconds: by then every
        resource that does not depend on a failed one has run (dependents register within milliseconds)."""
        while True:
            with self._lock:
                if self._active == 0 and time.monotonic() - self._last_activity > quiet_seconds:
                    return
            time.sleep(0.05)

    def close(self) -> None:
        self._tmp.cleanup()

    def _execute(  # noqa: PLR0917
        self,
        resource: str,
        inputs: Mapping[str, Any],
        command: str,
        action: str,
        secret_stdout: bool,
        steps: list[StepRun],
    ) -> subprocess.CompletedProcess[str]:
        connection = inputs["connection"]
        stdin = inputs.get("stdin") if action == "create" else None
        started = time.time()
        result = self.ssh.run(connection, command, stdin)
        step = StepRun(
            resource=resource,
            step=_step_of(command),
            host=str(connection["host"]),
            user=str(connection.get("user") or "root"),
            action=action,
            started=started,
            ended=time.time(),
            rc=result.returncode,
            stdout=None if secret_stdout else result.stdout,
            stderr=result.stderr,
        )
        with self._lock:
            steps.append(step)
        where = f"{step.user}@{step.host}:{int(connection.get('port') or 22)}"
        if result.returncode == 255 and not result.stdout:
            raise RemoteCommandError(
                f"{resource}: cannot open an SSH session to {where} for step {step.step!r}: "
                f"{result.stderr.strip() or 'ssh exited 255'}"
            )
        if result.returncode != 0:
            tail = "\n".join(result.stderr.strip().splitlines()[-20:])
            raise RemoteCommandError(
                f"{resource}: step {step.step!r} ({action}) failed on {where} with exit code "
                f"{result.returncode}:\n{tail}"
            )
        return result

    def up(self, values: Mapping[str, Any], secret: list[str], *, stack: str = "fleet") -> FleetRun:
        config = as_config(values)
        steps: list[StepRun] = []
        monitors: list[RecordingMonitor] = []
        created: dict[str, dict[str, Any]] = {}
        """Inputs (secrets revealed) of each command that ran, by URN: what a later delete needs."""
        engine = self

        class ExecutingMocks(pulumi_mocks.Mocks):
            def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
                if args.typ != COMMAND:
                    return f"{args.name}-id", dict(args.inputs)
                engine._busy(+1)
                try:
                    result = self._create(args)
                except RemoteCommandError:
                    engine._busy(-1)
                    engine._hold_until_quiet()
                    raise
                engine._busy(-1)
                return result

            def _create(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
                inputs = reveal(dict(args.inputs))
                record = next(r for r in monitors[0].recorded if r.name == args.name and r.type == args.typ)
                secret_outputs = set(record.options["additionalSecretOutputs"])
                state = dict(args.inputs)
                if "create" not in inputs:
                    # As pulumi-command: no create command, no session (a marker whose delete matters).
                    with engine._lock:
                        created[record.urn] = inputs
                    return f"{args.name}-id", {**state, "stdout": "", "stderr": ""}
                result = engine._execute(
                    args.name, inputs, inputs["create"], "create", "stdout" in secret_outputs, steps
                )
                for key, value in (("stdout", result.stdout), ("stderr", result.stderr)):
                    state[key] = _secret(value) if key in secret_outputs else value
                with engine._lock:
                    created[record.urn] = inputs
                return f"{args.name}-id", state

            def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
                return {}, None

        started = time.monotonic()
        program: ProgramRun | None = None
        error: BaseException | None = None
        # Garbage collection only in this thread: a failed run leaves futures whose finalizers log their
        # exceptions; formatted concurrently from worker threads, Python 3.11's traceback carets (ast.parse)
        # corrupt the AST recursion counter and every later ast.parse in the process fails (SystemError).
        gc.disable()
        try:
            program = run_program(
                config,
                [f"mlcluster:{k}" for k in secret],
                stack=stack,
                preview=False,
                mocks=ExecutingMocks(),
                max_workers=self.max_workers,
                on_start=monitors.append,
            )
        except Exception as exc:
            error = exc
        finally:
            gc.enable()
            gc.collect()
        run = FleetRun(program=program, error=error, steps=steps, wall_seconds=0.0)
        recorded = {r.urn: r for r in monitors[0].recorded} if monitors else {}
        if error is None:
            try:
                run.deleted = self._delete_removed(set(recorded), steps)
            except RemoteCommandError as exc:
                run.error = exc
        for urn, inputs in created.items():
            self.state[urn] = Stored(recorded[urn], inputs)
        for urn, record in recorded.items():
            if record.type != COMMAND:
                self.state[urn] = Stored(record, record.raw_inputs)
        run.wall_seconds = time.monotonic() - started
        self.runs.append(run)
        return run

    def _delete_removed(self, registered: set[str], steps: list[StepRun]) -> list[str]:
        """Delete what the previous runs had and this one did not register: dependents first."""
        removed = {urn: stored for urn, stored in self.state.items() if urn not in registered}
        deleted: list[str] = []
        while removed:
            needed = {dep for s in removed.values() for dep in [*s.record.depends_on, s.record.parent]}
            ready = sorted((urn for urn in removed if urn not in needed), key=lambda u: removed[u].record.name)
            if not ready:
                raise RuntimeError(f"dependency cycle among removed resources: {sorted(removed)}")
            for urn in ready:
                stored = removed.pop(urn)
                delete = stored.inputs.get("delete") if stored.record.type == COMMAND else None
                if delete:
                    self._execute(stored.record.name, stored.inputs, delete, "delete", False, steps)
                del self.state[urn]
                deleted.append(stored.record.name)
        return deleted
