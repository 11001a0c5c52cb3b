"""An executing mock engine with Pulumi's deployment rules: the program's `remote.Command`s run over SSH.

It follows the rules of ../shared/docs/REAL-ENGINE.md (each has its own test in tests/fleet/test_engine.py):

- State: every resource's inputs (secrets revealed, for the engine only) and outputs are recorded as each
  step finishes, as Pulumi checkpoints after each step. A resource runs only when its inputs differ from
  the recorded ones; paths in `ignoreChanges` keep their recorded value. A second run with no change
  runs nothing and opens no SSH session.
- `command:remote:Command`: a new resource runs `create`; changed inputs run `update` (or `create` when
  `update` is unset) in place; a change of `triggers` or of a `replaceOnChanges` path replaces it: the new
  one is created, and the old one's `delete` runs at the end of the run (before the create with
  `deleteBeforeReplace`). Deletes run with the *recorded* inputs, stdin included, dependents first;
  a resource recorded with `retainOnDelete` leaves the state without its delete running; one recorded with
  `protect` stops the run when its delete is reached (after its dependents' deletes ran). Options (such
  as retainOnDelete) of an unchanged resource are recorded without running it.
- A create that fails is not recorded (the next run creates it again); an update that fails keeps the
  old record. The first failure stops the engine from starting new steps; steps already running finish
  (`continue_on_error=True` is `pulumi up --continue-on-error`: everything not depending on the failure
  still runs). Removed resources are deleted only after a run without error.
- Parallelism: at most `max_workers` registrations at once, by default the CLI's default
  (4 x CPUs, `pkg/cmd/pulumi/operations/up.go`).
- Failure text as pulumi-command writes it (`provider/pkg/provider/remote/commandOutputs.go`): the exit
  status, the whole command and everything the step printed, stdout then stderr (the real provider
  interleaves them in the order they arrived), behind the resource's type and name as the CLI shows it.
  Stdout and stderr lose one trailing newline, as the provider trims them.
- `preview()`: nothing runs and nothing is recorded; a resource that would be created, updated or
  replaced has unknown outputs (for a Command: stdout and stderr, whatever input changed), and whatever
  is computed from them is unknown. The Kubernetes provider is replaced when its kubeconfig is unknown or
  names another cluster, unless `clusterIdentifier` is set and unchanged; every resource on a replaced
  provider is replaced with it (pulumi-kubernetes `provider.go`, DiffConfig).
- SSH: the real `ssh` client with pulumi-command's settings: the pinned `hostKey` (its type is the only
  host-key algorithm allowed), ConnectTimeout = perDialTimeout, the bastion as a ProxyCommand with its own pin,
  the keys of an SSH agent when the engine is given one (`agent_socket`, pulumi-command's SSH_AUTH_SOCK) besides
  the connection's key. A dial that fails before its session (refused, timed out, dropped by sshd's MaxStartups)
  is tried again as pulumi-command does: dialErrorLimit + 1 attempts, 100 ms apart and then 1.5 times longer each
  time, no jitter (`SshRunner._dialling`); every attempt is recorded (`SshRunner.dials`, `peak_dials`).
- `command:remote:CopyToRemote` of a path archive: over SFTP as the connection's user, into
  `remotePath/<the directory's name>`; compared by the archive's hash (`Archive.Equals`), and an update copies
  only when the hash or the remote path changed (pulumi-command `copyController.go`).
- Update plans: `preview(save_plan=True)` records, by URN, the operation and inputs of each resource that changes
  (`FleetRun.saved_plan`); `up(plan=...)` holds the run to it (pkg/resource/deploy/plan.go, step_generator.go): a
  resource the plan names must register the inputs it recorded, where a value unknown at preview accepts anything;
  one it does not name may only stay the same. The first violation stops the run as a failed step does, in the
  engine's words (`resource URN violates plan: properties changed: ~~create`, without the values).
- Aliases: a resource whose URN is not in the state but one of its `aliases` is, is that recorded resource
  under a new URN (compared, updated or left alone as usual, never created or deleted for the move).
- Every resource other than a Command echoes its inputs as outputs.
- Stack outputs: what the program registered for the root stack, which the SDK sends once every export has
  resolved, also in an `up` that fails (in a step no export depends on): a successful `up` keeps those alone, a
  failed one writes them over the previous ones (pulumi #15754); a program that never registered them leaves the
  previous ones. A `pulumi:pulumi:StackReference` read,
  in a preview as in an `up`, answers the named stack's outputs of its last deployment, this stack's own
  included (the engine's builtin provider, `readStackReference`): `{}` before the first one; another stack is
  `unknown stack`.
- `clock`: the program's clock during a run (the certificates' days left), by default the machine's; set it to
  `Fleet.now` so the program and the stubs agree after `Fleet.advance_clock`.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import hashlib
import json
import os
import re
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import pulumi
import yaml
from pulumi.output import Unknown
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc

from components.plan.engine import (
    PROGRAM,
    STACK_REFERENCE,
    ProgramRun,
    RecordedResource,
    RecordingMonitor,
    reveal,
    run_program,
    stack_reference,
)

from ..conftest import as_config
from ..upstream import kueue_crds
from .kubernetes_api import KubernetesApi, KubernetesApiError

COMMAND = "command:remote:Command"
COPY = "command:remote:CopyToRemote"
KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
IDENTITY = ("metadata.name", "metadata.namespace")
"""pulumi-kubernetes replaces an object whose name or namespace changes (v4.32.0 provider/pkg/provider/provider.go,
Diff: `forceNewFields := []string{".metadata.name", ".metadata.namespace"}`)."""
STEP_TAG = " mlcluster-"
DEFAULT_PARALLELISM = 4 * (os.cpu_count() or 1)
"""`pulumi up`'s default --parallel: 4 x GOMAXPROCS (pkg/cmd/pulumi/operations/up.go)."""
Runner = Callable[[Mapping[str, Any], str, "str | None"], "subprocess.CompletedProcess[str]"]


class RemoteCommandError(RuntimeError):
    """A step failed on a host (or the host could not be reached), in pulumi-command's words."""


class PlanViolationError(RemoteCommandError):
    """`pulumi up --plan`: the program wants what the saved plan did not record (pkg/resource/deploy/plan.go,
    step_generator.go); the run stops there, as at a failed step."""


class EngineStoppedError(RuntimeError):
    """A step was not started because an earlier one failed (Pulumi starts no new steps after a failure)."""


@dataclass
class StepRun:
    resource: str
    step: str
    host: str
    user: str
    action: str
    """create, update or delete"""
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
    """Inputs as recorded (secrets revealed, ignoreChanges applied): what a diff and a delete use."""
    outputs: dict[str, Any] = field(default_factory=dict)
    """Outputs as the program received them (secrets wrapped)."""


@dataclass
class FleetRun:
    program: ProgramRun | None
    error: BaseException | None
    steps: list[StepRun]
    wall_seconds: float
    deleted: list[str] = field(default_factory=list)
    operations: dict[str, str] = field(default_factory=dict)
    """What the engine did (or, in a preview, would do) with each resource, by name: create, update,
    replace, same, delete."""
    preview: bool = False
    connections_held: int = 0
    """SSH connections open at the end of the run, closed as the provider exits (one per command that ran)."""
    saved_plan: dict[str, dict[str, Any]] | None = None
    """`preview(save_plan=True)`: by URN, the operation and inputs (unknowns kept) of each resource that changes."""

    def step(self, resource: str, action: str | None = None) -> StepRun:
        """The one run of `resource`'s command: by default its create or update (what ran it in this run)."""
        actions = (action,) if action else ("create", "update")
        found = [s for s in self.steps if s.resource == resource and s.action in actions]
        assert len(found) == 1, f"expected one {'/'.join(actions)} of {resource}, found {len(found)}"
        return found[0]

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error

    def with_operation(self, operation: str) -> list[str]:
        return sorted(name for name, op in self.operations.items() if op == operation)


def _step_of(command: str) -> str:
    return command.rsplit(STEP_TAG, 1)[-1].strip() if STEP_TAG in command else "?"


def _secret(value: Any) -> dict[str, Any]:
    return {rpc._special_sig_key: rpc._special_secret_sig, "value": value}


def _has_unknown(value: Any) -> bool:
    if isinstance(value, Unknown):
        return True
    if isinstance(value, str):
        return value == rpc.UNKNOWN
    if isinstance(value, dict):
        return any(_has_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unknown(v) for v in value)
    return False


def archive_digest(path: Path) -> str:
    """What the engine compares a path archive by (pulumi `Archive.EnsureHash`): its files' names and contents."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{file.relative_to(path)}\0{file.stat().st_size}\0".encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def with_archive_hashes(inputs: dict[str, Any]) -> dict[str, Any]:
    """Path archives as the engine records them, by hash (`Archive.Equals` compares hashes only: where the
    directory lies does not matter, what it holds does); the path is kept beside it for the copy."""
    result = dict(inputs)
    for key, value in inputs.items():
        if isinstance(value, pulumi.FileArchive):
            path = Path(value.path)
            result[key] = {"archiveHash": archive_digest(path), "path": str(path)}
    return result


def with_ignored_changes(inputs: dict[str, Any], recorded: Mapping[str, Any], paths: list[str]) -> dict[str, Any]:
    """`ignoreChanges`: each listed path (dotted, as Pulumi writes them) keeps its recorded value."""
    result = copy.deepcopy(inputs)
    for path in paths:
        keys = path.split(".")
        source: Any = recorded
        for key in keys:
            source = source.get(key) if isinstance(source, Mapping) else None
        target = result
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        if source is None:
            target.pop(keys[-1], None)
        else:
            target[keys[-1]] = source
    return result


def _compared(value: Any) -> Any:
    return value["archiveHash"] if isinstance(value, dict) and "archiveHash" in value else value


def changed_keys(inputs: Mapping[str, Any], recorded: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in {*inputs, *recorded} if _compared(inputs.get(k)) != _compared(recorded.get(k)))


def _active_cluster(kubeconfig: str) -> Any:
    """The cluster entry the kubeconfig's current context uses (what pulumi-kubernetes compares)."""
    try:
        config = yaml.safe_load(kubeconfig) or {}
        contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
        wanted = contexts.get(config.get("current-context"), {}).get("cluster")
        return next((c["cluster"] for c in config.get("clusters") or [] if c["name"] == wanted), None)
    except (yaml.YAMLError, KeyError, TypeError, AttributeError):
        return kubeconfig


def kubernetes_provider_replaced(inputs: Mapping[str, Any], recorded: Mapping[str, Any]) -> bool:
    """pulumi-kubernetes DiffConfig: a set, unchanged clusterIdentifier decides alone; otherwise an unknown
    kubeconfig (a preview of a changed source) or one whose active cluster differs replaces the provider."""
    new_id, old_id = inputs.get("clusterIdentifier"), recorded.get("clusterIdentifier")
    if new_id is not None and new_id == old_id and not _has_unknown(new_id):
        return False
    if new_id != old_id:
        return True
    kubeconfig = inputs.get("kubeconfig")
    if _has_unknown(kubeconfig):
        return True
    return bool(_active_cluster(str(kubeconfig)) != _active_cluster(str(recorded.get("kubeconfig"))))


def is_kubernetes_object(type_: str) -> bool:
    """A Kubernetes object the provider applies itself (not a Helm release, not the provider)."""
    return type_.startswith("kubernetes:") and type_ != HELM_RELEASE


def _delete_first(record: RecordedResource) -> bool:
    return bool(record.options.get("deleteBeforeReplace"))


def _identity(manifest: Mapping[str, Any]) -> tuple[Any, Any]:
    metadata = manifest.get("metadata") or {}
    return metadata.get("name"), metadata.get("namespace")


class SshRunner:
    """Runs one command over SSH the way pulumi-command's connection settings describe it. `agent_socket`: the
    SSH agent of the machine that runs `pulumi` (SSH_AUTH_SOCK), whose keys pulumi-command offers besides the
    connection's privateKey."""

    def __init__(self, workdir: Path, agent_socket: Path | None = None) -> None:
        self.workdir = workdir
        self.agent_socket = agent_socket
        self._lock = threading.Lock()
        self._keys: dict[str, Path] = {}
        self._counter = 0
        self.dials: list[tuple[str, float, float, bool]] = []
        """Every dial attempt: first hop, start, connected-or-failed time (epoch seconds), connected."""
        self._masters: list[Path] = []
        """Control sockets of the connections this run's commands dialled: pulumi-command's `run` dials a client
        per command, closes the command's session and never the client (provider/pkg/provider/remote/
        commandOutputs.go), so each connection stays open, with its sshd (and a bastion's), until the provider
        exits at the end of `pulumi up` (`release`)."""

    def _kept(self) -> tuple[list[str], Path]:
        """ssh options that keep this call's connection open after its command, and the file a bastion hop's
        errors go to. The ssh client that runs the command becomes a master that outlives it (ControlPersist) on
        a socket of its own: one dial per call, as pulumi-command's one client per command, which closes the
        command's session and never the client (provider/pkg/provider/remote/commandOutputs.go), so the
        connection, its sshd and a bastion's stay until the provider exits at the end of `pulumi up`
        (`release`). ControlPersist sends a ProxyCommand's stderr to /dev/null; the hop writes it to the file,
        which the result's stderr gets back (`_with_hop_errors`)."""
        with self._lock:
            self._counter += 1
            path, hop_errors = self.workdir / f"conn-{self._counter}", self.workdir / f"hop-{self._counter}.log"
            self._masters.append(path)
        connected = path.with_suffix(".connected")
        return [
            *("-o", "ControlMaster=yes", "-o", f"ControlPath={path}", "-o", "ControlPersist=yes"),
            # Run locally once the connection is up: tells a lost connection from one never made.
            *("-o", "PermitLocalCommand=yes", "-o", f"LocalCommand=touch {shlex.quote(str(connected))}"),
        ], hop_errors

    @staticmethod
    def _with_hop_errors(
        result: subprocess.CompletedProcess[str], hop_errors: Path, connection: Mapping[str, Any]
    ) -> subprocess.CompletedProcess[str]:
        """The result as a client without ControlPersist reports it: a hop's errors, and the line OpenSSH prints
        when a connection it had ends under a running command (the persisting master prints neither)."""
        said = hop_errors.read_text() if hop_errors.exists() else ""
        hop_errors.unlink(missing_ok=True)
        connected = hop_errors.with_name(hop_errors.name.replace("hop-", "conn-").removesuffix(".log") + ".connected")
        lost = ""
        # 255 with no exit status from a connection that was made: it was lost (our steps never exit 255).
        if result.returncode == 255 and connected.exists() and not CONNECTION_LOST.search(result.stderr):
            lost = f"Connection to {connection['host']} closed by remote host.\n"
        connected.unlink(missing_ok=True)
        if not said and not lost:
            return result
        return subprocess.CompletedProcess(result.args, result.returncode, result.stdout, said + result.stderr + lost)

    def open_connections(self) -> int:
        """Connections this run dialled that are still open (their master's socket is there)."""
        with self._lock:
            return sum(1 for path in self._masters if path.exists())

    def release(self) -> int:
        """The provider exits: every kept connection closes. Returns how many were open."""
        with self._lock:
            masters, self._masters = self._masters, []
        released = 0
        for path in masters:
            if path.exists():
                subprocess.run(
                    ["ssh", "-o", f"ControlPath={path}", "-O", "exit", "kept"],
                    check=False,
                    capture_output=True,
                    timeout=10,
                )
                released += 1
            path.unlink(missing_ok=True)
        return released

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

    def ssh_args(self, connection: Mapping[str, Any], hop_errors: Path | None = None) -> list[str]:
        host, port = str(connection["host"]), int(connection.get("port") or 22)
        # KexAlgorithms and Ciphers: what pulumi-command's Go SSH client negotiates first (and cheaper on CI).
        args = [
            "ssh",
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            # No agent: only the connection's key. With one, its keys too (pulumi-command offers both).
            f"IdentitiesOnly={'no' if self.agent_socket else 'yes'}",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "KexAlgorithms=curve25519-sha256",
            "-o",
            "Ciphers=aes128-gcm@openssh.com",
            "-o",
            f"ConnectTimeout={int(connection.get('perDialTimeout') or 15)}",
            # One attempt per dial: `_dialling` retries as pulumi-command does, a dropped handshake included
            # (ssh's own attempts retry only a refused or timed-out TCP connect, a second apart).
            "-o",
            "ConnectionAttempts=1",
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
                # Go's knownhosts callback allows only the pinned key's type: an ssh-rsa pin never
                # negotiates rsa-sha2-256/512.
                "-o",
                f"HostKeyAlgorithms={str(host_key).split()[0]}",
            ]
        else:
            args += ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
        proxy = connection.get("proxy")
        if proxy:
            jump = [*self.ssh_args(proxy), "-W", "%h:%p", f"{proxy.get('user') or 'root'}@{proxy['host']}"]
            errors = f" 2>>{shlex.quote(str(hop_errors))}" if hop_errors is not None else ""
            args += ["-o", f"ProxyCommand={shlex.join(jump)}{errors}"]
        return args

    def run(
        self, connection: Mapping[str, Any], command: str, stdin: str | None, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        user = connection.get("user") or "root"

        def attempt(kept: list[str], hop_errors: Path) -> subprocess.CompletedProcess[str]:
            argv = [*self.ssh_args(connection, hop_errors), *kept, f"{user}@{connection['host']}", command]
            return subprocess.run(
                argv, input=stdin or "", capture_output=True, text=True, timeout=timeout, check=False, env=self._env()
            )

        return self._dialling(connection, attempt)

    def _dialling(
        self, connection: Mapping[str, Any], attempt: Callable[[list[str], Path], subprocess.CompletedProcess[str]]
    ) -> subprocess.CompletedProcess[str]:
        """pulumi-command's dial (provider/pkg/provider/remote/connection.go `dialWithRetry`): a dial that fails
        before the session (refused, timed out, dropped by the server's MaxStartups, authentication) is tried
        again, dialErrorLimit + 1 attempts in all (10 + 1 by default), after 100 ms, then 1.5 times longer each
        time up to 5 s (pulumi's `retry.Until` defaults), with no jitter: a crowd retries together. One count
        covers the whole chain through a bastion (the provider counts the bastion's dial and the node's apart).
        Each attempt is recorded in `dials`: its first hop, when it started and when it connected or failed."""
        dial_error_limit = connection.get("dialErrorLimit")
        attempts = (10 if dial_error_limit is None else int(dial_error_limit)) + 1
        first_hop = str((connection.get("proxy") or connection)["host"])
        delay = 0.1
        for tried in range(1, attempts + 1):
            kept, hop_errors = self._kept()
            started = time.time()
            result = attempt(kept, hop_errors)
            # Connected: ssh's LocalCommand left its marker (it stays when the connection is lost later), or the
            # master's control socket is there. sftp turns LocalCommand off and a master that lost its connection
            # removes its socket, so a copy cut off mid-way counts as a failed dial here and is copied again,
            # where pulumi-command would fail it (the sweep cuts commands, not copies).
            socket = hop_errors.with_name(hop_errors.name.replace("hop-", "conn-").removesuffix(".log"))
            marker = socket.with_suffix(".connected")
            connected_at = next((p.stat().st_mtime for p in (marker, socket) if p.exists()), None)
            with self._lock:
                self.dials.append((first_hop, started, connected_at or time.time(), connected_at is not None))
            result = self._with_hop_errors(result, hop_errors, connection)
            # No connection made (sftp says so with status 1, ssh with 255): a failed dial, tried again.
            if connected_at is not None or tried == attempts:
                return result
            time.sleep(delay)
            delay = min(delay * 1.5, 5.0)
        raise AssertionError("unreachable: the last attempt returns")

    def peak_dials(self) -> dict[str, int]:
        """By first hop (the bastion, or the node), the most dials in flight at once: from an attempt's start to
        its connection (authenticated, end to end) or its failure. A server counts fewer: only until its own
        authentication."""
        with self._lock:
            dials = list(self.dials)
        peaks: dict[str, int] = {}
        for hop in {d[0] for d in dials}:
            marks = sorted(m for d in dials if d[0] == hop for m in ((d[1], 1), (d[2], -1)))
            running = peak = 0
            for _, delta in marks:
                running += delta
                peak = max(peak, running)
            peaks[hop] = peak
        return peaks

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
        return {**env, "SSH_AUTH_SOCK": str(self.agent_socket)} if self.agent_socket else env

    def copy(
        self, connection: Mapping[str, Any], source: Path, remote_path: str, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """pulumi-command's CopyToRemote of a directory, over SFTP as the connection's user: into
        `remote_path/<its name>` (made if missing; `remote_path` must exist), file by file, overwriting."""
        user = connection.get("user") or "root"
        target = f"{remote_path.rstrip('/')}/{source.name}"
        batch = [f"-mkdir {json.dumps(target)}"] + [
            f"put {json.dumps(str(path))} {json.dumps(f'{target}/{path.name}')}"
            for path in sorted(source.iterdir())
            if path.is_file()
        ]

        def attempt(kept: list[str], hop_errors: Path) -> subprocess.CompletedProcess[str]:
            # sftp takes ssh's options, but the port as -P.
            args = [
                "sftp" if a == "ssh" else "-P" if a == "-p" else a
                for a in [*self.ssh_args(connection, hop_errors), *kept]
            ]
            return subprocess.run(
                [*args, "-b", "-", f"{user}@{connection['host']}"],
                input="\n".join(batch) + "\n",
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                env=self._env(),
            )

        return self._dialling(connection, attempt)


CONNECTION_LOST = re.compile(
    r"^(Connection to \S+ closed by remote host\.|client_loop: .*|Connection reset by .*)$\n?", re.M
)
"""What OpenSSH's client prints when the connection ends under a running command (pulumi-command's Go client
prints nothing of its own)."""


def failure_text(
    resource: str, connection: Mapping[str, Any], command: str, result: Any, resource_type: str = COMMAND
) -> str:
    """What `pulumi up` prints for a failed remote.Command (or copy): pulumi-command's error behind the resource."""
    if result.returncode == 255 and CONNECTION_LOST.search(result.stderr):
        # The session's channel closed without an exit status (the host restarted or the connection dropped):
        # x/crypto/ssh's ExitMissingError, as pulumi-command wraps the session's error.
        return (
            f"{COMMAND} ({resource}):\n    error: wait: remote command exited without exit status or exit signal:"
            f" running {json.dumps(command)}:\n{result.stdout}{CONNECTION_LOST.sub('', result.stderr).rstrip()}"
        )
    if (result.returncode == 255 and not result.stdout) or resource_type == COPY:
        # ssh itself failed (or the copy, which has no command): the Go client's error names the address it dialled.
        where = f"{connection['host']}:{int(connection.get('port') or 22)}"
        detail = result.stderr.strip() or "ssh exited 255"
        return f"{resource_type} ({resource}):\n    error: ssh: dial tcp {where}: {detail}"
    return (
        f"{COMMAND} ({resource}):\n    error: Process exited with status {result.returncode}: running "
        f"{json.dumps(command)}:\n{result.stdout}{result.stderr}"
    )


def _check_plan(plan: Mapping[str, Mapping[str, Any]], urn: str, operation: str, inputs: Mapping[str, Any]) -> None:
    """The update-plan rule (pkg/resource/deploy/plan.go `checkGoal`/`checkDiff`, step_generator.go
    `validateSteps`): a resource the plan does not name may only stay the same; one it names must register the
    inputs it recorded, where a value unknown at preview accepts anything. A same in place of a planned update is
    allowed. The error names the properties as the engine does (`~~key`), without their values."""
    planned = plan.get(urn)
    if planned is None:
        if operation != "same":
            raise PlanViolationError(
                f"{operation} is not allowed by the plan: no steps were expected for this resource"
            )
        return
    expected = planned["inputs"]
    changed = sorted(
        key
        for key in set(expected) | set(inputs)
        if not _has_unknown(expected.get(key)) and _compared(expected.get(key)) != _compared(inputs.get(key))
    )
    if changed:
        raise PlanViolationError(
            f"resource {urn} violates plan: properties changed: " + ", ".join(f"~~{key}" for key in changed)
        )


@dataclass
class _Deployment:
    """One run's bookkeeping."""

    preview: bool
    project: str = "mlcluster"
    stack: str = "fleet"
    steps: list[StepRun] = field(default_factory=list)
    operations: dict[str, str] = field(default_factory=dict)
    replaced_providers: set[str] = field(default_factory=set)
    first_error: BaseException | None = None
    plan: dict[str, dict[str, Any]] | None = None
    """`up --plan`: the saved plan the run is held to."""
    saved_plan: dict[str, dict[str, Any]] | None = None
    """`preview --save-plan`: the plan this preview writes."""


class FleetEngine:
    """Runs the program against the fleet, run after run, with Pulumi's rules for what runs when."""

    def __init__(
        self,
        workdir: Path | None = None,
        max_workers: int | None = None,
        *,
        continue_on_error: bool = False,
        runner: Runner | None = None,
        agent_socket: Path | None = None,
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="mlcfleet-engine-")
        self.workdir = workdir or Path(self._tmp.name)
        self.workdir.chmod(0o700)
        self.ssh = SshRunner(self.workdir, agent_socket)
        self.runner: Runner = runner or self.ssh.run
        self.max_workers = max_workers or DEFAULT_PARALLELISM
        self.continue_on_error = continue_on_error
        self.kubernetes = KubernetesApi(kueue_crds())
        """The cluster the program's Kubernetes objects are applied to (kubernetes_api.py)."""
        self.state: dict[str, Stored] = {}
        """The checkpoint: by URN; a replaced resource's old copy waits under '<urn>#replaced' for its delete."""
        self.runs: list[FleetRun] = []
        self.stack_outputs: dict[str, dict[str, Any]] = {}
        """By stack name: the outputs of its last successful `up` (secrets wrapped as on the wire)."""
        self.clock: Callable[[], float] | None = None
        self.before_release: Callable[[FleetRun], None] | None = None
        """Called at the end of each run while its connections are still open (a test counts them)."""
        self._lock = threading.Lock()
        self._active = 0
        self._last_activity = time.monotonic()

    def _busy(self, delta: int) -> None:
        with self._lock:
            self._active += delta
            self._last_activity = time.monotonic()

    def _hold_until_quiet(self, quiet_seconds: float = 1.0) -> None:
        """--continue-on-error: wait until no resource is being created and none has started for
        quiet_seconds: by then every resource that does not depend on a failed one has run."""
        while True:
            with self._lock:
                if self._active == 0 and time.monotonic() - self._last_activity > quiet_seconds:
                    return
            time.sleep(0.05)

    def close(self) -> None:
        self.ssh.release()
        self._tmp.cleanup()

    def _execute(  # noqa: PLR0917
        self,
        resource: str,
        inputs: Mapping[str, Any],
        command: str,
        action: str,
        secret_stdout: bool,
        deployment: _Deployment,
    ) -> subprocess.CompletedProcess[str]:
        connection = inputs["connection"]
        started = time.time()
        # Create, update and delete all get the stdin of the inputs they run with (a delete: the recorded one).
        result = self.runner(connection, command, inputs.get("stdin"))
        stdout = result.stdout.removesuffix("\n")
        shown = None if secret_stdout else stdout
        self._record(deployment, resource, _step_of(command), connection, action, started, result, shown, command)
        return subprocess.CompletedProcess(result.args, 0, stdout, result.stderr.removesuffix("\n"))

    def _record(  # noqa: PLR0917
        self,
        deployment: _Deployment,
        resource: str,
        step: str,
        connection: Mapping[str, Any],
        action: str,
        started: float,
        result: subprocess.CompletedProcess[str],
        stdout: str | None,
        command: str | None,
    ) -> None:
        """One run of a resource on a host, in the run's record; a failure raises pulumi-command's error text
        (`command` None: a copy, which has none)."""
        run = StepRun(
            resource=resource,
            step=step,
            host=str(connection["host"]),
            user=str(connection.get("user") or "root"),
            action=action,
            started=started,
            ended=time.time(),
            rc=result.returncode,
            stdout=stdout,
            stderr=result.stderr.removesuffix("\n"),
        )
        with self._lock:
            deployment.steps.append(run)
        if result.returncode != 0:
            kind = COMMAND if command is not None else COPY
            raise RemoteCommandError(failure_text(resource, connection, command or "", result, kind))

    def _copy(self, resource: str, inputs: Mapping[str, Any], action: str, deployment: _Deployment) -> None:
        """CopyToRemote's create or update: the archive's directory to the host (pulumi-command copies only when
        the hash or the remote path changed, which is what brings an update here)."""
        connection = inputs["connection"]
        started = time.time()
        result = self.ssh.copy(connection, Path(inputs["source"]["path"]), str(inputs["remotePath"]))
        # A copy prints nothing (pulumi-command has no output for it); sftp's echo of its batch is ours.
        self._record(deployment, resource, "scripts", connection, action, started, result, "", None)

    def _fail(self, deployment: _Deployment, error: BaseException) -> None:
        with self._lock:
            if deployment.first_error is None:
                deployment.first_error = error

    def _operation(
        self, record: RecordedResource, inputs: dict[str, Any], old: Stored | None, deployment: _Deployment
    ) -> str:
        if old is None:
            return "create"
        provider = record.options.get("provider") or ""
        with self._lock:
            on_replaced_provider = any(provider.startswith(urn + "::") for urn in deployment.replaced_providers)
        if on_replaced_provider:
            return "replace"
        if record.type == KUBERNETES_PROVIDER:
            if kubernetes_provider_replaced(inputs, old.inputs):
                with self._lock:
                    deployment.replaced_providers.add(record.urn)
                return "replace"
            return "same" if inputs == old.inputs else "update"
        changed = changed_keys(inputs, old.inputs)
        if not changed:
            return "same"
        if is_kubernetes_object(record.type) and _identity(inputs) != _identity(old.inputs):
            # A new name: the new object is created, the old one deleted at the end. (The provider asks for
            # delete-before-replace only when the name stays, which an identity change never does.)
            return "replace"
        replace_on = set(record.options.get("replaceOnChanges") or [])
        if record.type == COMMAND:
            replace_on.add("triggers")
        if "*" in replace_on or replace_on.intersection(changed):
            return "replace"
        return "update"

    def _register(
        self, args: pulumi_mocks.MockResourceArgs, monitor: RecordingMonitor, deployment: _Deployment
    ) -> tuple[str | None, dict[str, Any]]:
        if args.typ == STACK_REFERENCE:
            return self._stack_reference(args, deployment)
        record = next((r for r in monitor.recorded if r.name == args.name and r.type == args.typ), None)
        if record is None:
            return f"{args.name}-id", dict(args.inputs)
        inputs = with_archive_hashes(reveal(dict(args.inputs)))
        old = self.state.get(record.urn)
        moved_from = None
        if old is None:
            # An alias names the resource's earlier URN: the recorded resource is this one, moved (its record
            # moves when this step is recorded; a failed update leaves it where it was).
            moved_from = next((a for a in self._aliases(record) if a in self.state), None)
            old = self.state.get(moved_from) if moved_from else None
        if old is not None and record.options.get("ignoreChanges"):
            inputs = with_ignored_changes(inputs, old.inputs, record.options["ignoreChanges"])
        operation = self._operation(record, inputs, old, deployment)
        with self._lock:
            deployment.operations[record.name] = operation
            stopped = deployment.first_error is not None and not self.continue_on_error
        if deployment.saved_plan is not None and operation != "same":
            with self._lock:
                deployment.saved_plan[record.urn] = {"op": operation, "inputs": copy.deepcopy(inputs)}
        if deployment.plan is not None:
            _check_plan(deployment.plan, record.urn, operation, inputs)
        if old is not None and operation == "same":
            if not deployment.preview:
                with self._lock:
                    self.state.pop(moved_from or "", None)
                    self.state[record.urn] = Stored(record, old.inputs, old.outputs)
            return f"{args.name}-id", old.outputs
        if stopped:
            raise EngineStoppedError(f"{record.name}: not started, an earlier step failed")
        if deployment.preview:
            outputs = dict(args.inputs)
            if record.type == COMMAND:
                outputs |= {"stdout": rpc.UNKNOWN, "stderr": rpc.UNKNOWN}
            return f"{args.name}-id", outputs
        if record.type == COPY and (
            operation != "update" or {"source", "remotePath"} & set(changed_keys(inputs, old.inputs if old else {}))
        ):
            # pulumi-command's Update copies only when the source's hash or the remote path changed.
            self._copy(args.name, inputs, "update" if operation == "update" else "create", deployment)
        if record.type != COMMAND:
            # An object without metadata.name is autonamed by pulumi-kubernetes (`<name>-<random>`, a new one per
            # replacement): it never clashes, and the model leaves it out.
            in_cluster = (
                is_kubernetes_object(record.type)
                and bool((inputs.get("metadata") or {}).get("name"))
                and not self._on_replaced_provider(record, deployment)
            )
            if in_cluster:
                self._apply(record, inputs, old, operation)
            with self._lock:
                if in_cluster and old is not None and operation == "replace" and not _delete_first(record):
                    self.state[record.urn + "#replaced"] = old
                self.state.pop(moved_from or "", None)
                self.state[record.urn] = Stored(record, inputs, dict(args.inputs))
            return f"{args.name}-id", dict(args.inputs)

        secret_outputs = set(record.options["additionalSecretOutputs"])
        outputs = dict(args.inputs)
        if old is not None and operation == "replace" and record.options.get("deleteBeforeReplace"):
            self._delete(old, deployment)
            with self._lock:
                self.state.pop(record.urn, None)
        command = inputs.get("update") if operation == "update" and inputs.get("update") else inputs.get("create")
        if command:
            action = "update" if operation == "update" else "create"
            result = self._execute(args.name, inputs, command, action, "stdout" in secret_outputs, deployment)
            stdout, stderr = result.stdout, result.stderr
        else:
            # As pulumi-command: no create command, no session (a marker whose delete matters).
            stdout = stderr = ""
        for key, value in (("stdout", stdout), ("stderr", stderr)):
            outputs[key] = _secret(value) if key in secret_outputs else value
        with self._lock:
            if old is not None and operation == "replace" and not record.options.get("deleteBeforeReplace"):
                self.state[record.urn + "#replaced"] = old
            self.state.pop(moved_from or "", None)
            self.state[record.urn] = Stored(record, inputs, outputs)
        return f"{args.name}-id", outputs

    def _on_replaced_provider(self, record: RecordedResource, deployment: _Deployment) -> bool:
        """On a provider that now names another cluster: its objects are created there, not changed here."""
        provider = record.options.get("provider") or ""
        with self._lock:
            return any(provider.startswith(urn + "::") for urn in deployment.replaced_providers)

    def _apply(self, record: RecordedResource, inputs: Mapping[str, Any], old: Stored | None, operation: str) -> None:
        """What pulumi-kubernetes sends the API server for this step (the old copy of a create-before-delete
        replacement is deleted at the end of the run, by _delete)."""
        try:
            if operation == "update" and old is not None:
                self.kubernetes.update(inputs)
                return
            if operation == "replace" and old is not None and _delete_first(record):
                self.kubernetes.delete(old.inputs)
            self.kubernetes.create(inputs)
        except KubernetesApiError as error:
            raise RemoteCommandError(f"{record.type} ({record.name}): {operation}: {error}") from error

    def _stack_reference(
        self, args: pulumi_mocks.MockResourceArgs, deployment: _Deployment
    ) -> tuple[str | None, dict[str, Any]]:
        name = str(args.inputs.get("name") or args.name)
        _organization, project, stack = ([None, None, *name.split("/")])[-3:]
        if project != deployment.project or stack != deployment.stack:
            raise RuntimeError(f'unknown stack "{name}"')
        return stack_reference(args, self.stack_outputs.get(stack, {}))

    def up(self, values: Mapping[str, Any], secret: list[str], **kwargs: Any) -> FleetRun:
        """`pulumi up`: run what changed, record it, then delete what the program no longer registers."""
        return self._run(values, secret, preview=False, **kwargs)

    def preview(self, values: Mapping[str, Any], secret: list[str], **kwargs: Any) -> FleetRun:
        """`pulumi preview`: what would happen, with unknown outputs; runs nothing, records nothing."""
        return self._run(values, secret, preview=True, **kwargs)

    def _run(
        self,
        values: Mapping[str, Any],
        secret: list[str],
        *,
        preview: bool,
        stack: str = "fleet",
        program: Path = PROGRAM,
        plan: dict[str, dict[str, Any]] | None = None,
        save_plan: bool = False,
    ) -> FleetRun:
        config = as_config(values)
        monitors: list[RecordingMonitor] = []
        deployment = _Deployment(preview=preview, stack=stack, plan=plan, saved_plan={} if save_plan else None)
        engine = self

        class ExecutingMocks(pulumi_mocks.Mocks):
            def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
                engine._busy(+1)
                try:
                    return engine._register(args, monitors[0], deployment)
                except RemoteCommandError as error:
                    engine._fail(deployment, error)
                    if engine.continue_on_error:
                        engine._busy(-1)
                        engine._hold_until_quiet()
                        engine._busy(+1)
                    raise
                finally:
                    engine._busy(-1)

            def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
                return {}, None

        started = time.monotonic()
        program_run: ProgramRun | None = None
        error: BaseException | None = None
        # Garbage collection only in this thread: a failed run leaves futures whose finalizers log their
        # exceptions; a collection inside another thread's ast.parse would format those tracebacks there, and
        # Python 3.11's carets (ast.parse again) reset the AST recursion counter under it (tests/python_source.py).
        gc.disable()
        clock = self.clock
        program_clock = (
            mock.patch("components.cluster.clock.utc_now", lambda: datetime.fromtimestamp(clock(), UTC))
            if clock is not None
            else contextlib.nullcontext()
        )
        try:
            with program_clock:
                program_run = run_program(
                    config,
                    [f"mlcluster:{k}" for k in secret],
                    stack=stack,
                    preview=preview,
                    mocks=ExecutingMocks(),
                    max_workers=self.max_workers,
                    program=program,
                    on_start=monitors.append,
                )
        except Exception as exc:
            error = exc
        finally:
            gc.enable()
            gc.collect()
        # The run fails with the first step that failed, not with whatever the SDK surfaced last.
        error = deployment.first_error or error
        run = FleetRun(program=program_run, error=error, steps=deployment.steps, wall_seconds=0.0, preview=preview)
        run.saved_plan = deployment.saved_plan
        recorded = monitors[0].recorded if monitors else []
        # A resource that moved (its alias recorded, its new URN not yet) is not removed.
        moved = {alias for r in recorded if r.urn not in self.state for alias in self._aliases(r)}
        registered = {r.urn for r in recorded} | moved
        removed = {urn: stored for urn, stored in self.state.items() if urn not in registered}
        if preview:
            for stored in removed.values():
                run.operations.setdefault(stored.record.name, "delete")
        elif error is None:
            try:
                run.deleted = self._delete_removed(removed, deployment)
            except RemoteCommandError as exc:
                run.error = exc
        exported = monitors[0].stack_outputs if monitors else None
        if not preview and exported is not None:
            # The engine keeps the stack's outputs as the program registered them: after a successful `up` those
            # alone; after a failed one, those it registered over the previous ones (pulumi #15754).
            known = {
                key: _secret(output.value) if output.secret else output.value
                for key, output in exported.items()
                if output.known
            }
            kept = self.stack_outputs.get(stack, {}) if run.error is not None else {}
            self.stack_outputs[stack] = {**kept, **known}
        run.operations = {**run.operations, **deployment.operations}
        # The end of `pulumi up`: the provider exits and with it every connection its commands kept open.
        if self.before_release is not None:
            self.before_release(run)
        run.connections_held = self.ssh.release()
        run.wall_seconds = time.monotonic() - started
        self.runs.append(run)
        return run

    @staticmethod
    def _aliases(record: RecordedResource) -> list[str]:
        return [a for a in record.options.get("aliases") or [] if isinstance(a, str)]

    def _delete(self, stored: Stored, deployment: _Deployment) -> None:
        if stored.record.options.get("protect"):
            # The engine checks the recorded flag when it reaches this delete: the deletes of its dependents,
            # ordered before it, have run (pkg/resource/deploy/step.go, DeleteStep).
            raise RemoteCommandError(
                f"error: resource {stored.record.urn} cannot be deleted\nbecause it is protected. To unprotect the"
                " resource, either remove the `protect` flag from the resource in your Pulumi program and run"
                f" `pulumi up`, or use the command:\n`pulumi state unprotect '{stored.record.urn}'`"
            )
        if stored.record.options.get("retainOnDelete"):
            return  # retainOnDelete: the resource leaves the state, its delete never runs
        if is_kubernetes_object(stored.record.type) and (stored.inputs.get("metadata") or {}).get("name"):
            try:
                self.kubernetes.delete(stored.inputs)
            except KubernetesApiError as error:
                raise RemoteCommandError(f"{stored.record.type} ({stored.record.name}): delete: {error}") from error
            return
        delete = stored.inputs.get("delete") if stored.record.type == COMMAND else None
        if delete:
            self._execute(stored.record.name, stored.inputs, delete, "delete", False, deployment)

    def _delete_removed(self, removed: dict[str, Stored], deployment: _Deployment) -> list[str]:
        """Delete what this run did not register (and replaced resources' old copies): dependents first."""
        deleted: list[str] = []
        pending = dict(removed)
        while pending:
            needed = {dep for s in pending.values() for dep in [*s.record.depends_on, s.record.parent]}
            ready = sorted(
                (k for k, s in pending.items() if s.record.urn not in needed), key=lambda k: pending[k].record.name
            )
            if not ready:
                raise RuntimeError(f"dependency cycle among removed resources: {sorted(pending)}")
            for key in ready:
                stored = pending.pop(key)
                self._delete(stored, deployment)
                with self._lock:
                    del self.state[key]
                deleted.append(stored.record.name)
        return deleted
