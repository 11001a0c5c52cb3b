"""What every fleet stub shares: the host it runs on, its persistent state, the call log, the shared cluster.

A stub runs inside one test host's private mount namespace, where `/etc/mlcluster-fleet/host.json` says
which host it is and where that host's state lives (a directory outside the namespace, so tests read it
directly). `settings.json` in that directory is re-read on every call, so a test can change a host's
behaviour between runs: `latency` (seconds every stub call sleeps), `latencies` (per operation prefix,
e.g. {"kubeadm init": 6}), `fail` ({"<tool> <args prefix>": "message"}: the matching call prints the message
and exits 1), `containerdVersion`. The fault sweep (tests/fleet/sweep.py) injects one fault at a time, each used up
by the first call it matches (a regular expression over the whole call line): `failOnce` ({"<regex>": "message"}:
that call fails as `fail` does) and `holdOnce` ({"<regex>": "<file name>"}: that call writes the file into the state
directory and waits until `release` appears there, so the sweep can restart the host or drop the SSH connection
while the call is running). Stubs whose real command works in phases (`kubeadm init`) name each phase with
`checkpoint`: `<call line> @<phase>` takes the same faults, so a fault can fall between two phases.

The fleet's clock (`cluster_root/clock.json`, moved by `Fleet.advance_clock`) is what `Host.now()` returns:
expiring things (bootstrap tokens, uploaded certificate keys) expire against it, so a test can let hours
pass between runs.

The "API server" of a cluster is a directory shared by all hosts of a fleet (`cluster_root/<endpoint>`):
`kubeadm init` creates it, `token create` adds tokens, `join` checks them and registers Nodes, `kubectl`
reads and changes them. Network traffic is involved only where a real program or a load balancer is in the path
(stubs/daemons.py): each control plane serves an API server stand-in on 6443, and an endpoint that is an IP
address on another port (a VIP, cluster.apiVip) is reached over the network by `kubeadm init` and `join`.

Calls are appended to `calls.jsonl` (one JSON object a line: tool, argv, t0, t1, rc and hashes of the
inputs that matter, never their content), so tests can assert order and count.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

# Every stub call is a new interpreter (hundreds per fleet test): modules only some calls need are imported where
# they are needed, so a call pays only for its own (see tests/fleet/__init__.py, "What a stub call costs").

HOST_CONFIG = Path("/etc/mlcluster-fleet/host.json")


class StubExit(Exception):  # noqa: N818 (an exit, not an error)
    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def fail(message: str, code: int = 1) -> StubExit:
    return StubExit(code, message)


def sha256(data: str | bytes) -> str:
    import hashlib

    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


class Host:
    def __init__(self) -> None:
        config = json.loads(HOST_CONFIG.read_text())
        self.name: str = config["name"]
        self.state_dir = Path(config["state"])
        self.cluster_root = Path(config["clusterRoot"])
        self.python: str = config["python"]
        self.stubs: str = config["stubs"]
        self.bin_dir = Path(config["binDir"])
        self.real_binaries = Path(config.get("realBinaries", "/nonexistent"))
        """keepalived and haproxy, copied from the test machine at the fleet's start (stubs/daemons.py)."""
        self.api_server_tls = Path(config.get("apiServerTls", "/nonexistent"))
        settings_file = self.state_dir / "settings.json"
        self.settings: dict[str, Any] = json.loads(settings_file.read_text()) if settings_file.exists() else {}
        self.record_extra: dict[str, Any] = {}
        self.line = ""
        """The running call: tool and arguments, space-separated."""

    @contextlib.contextmanager
    def state(self) -> Iterator[dict[str, Any]]:
        """The host's stub state (services, packages, sysctl, swap), locked for the block."""
        with _locked_json(self.state_dir / "db.json") as data:
            yield data

    def cluster(self, endpoint: str) -> contextlib.AbstractContextManager[dict[str, Any]]:
        return _locked_json(self.cluster_root / _safe(endpoint) / "cluster.json")

    def cluster_exists(self, endpoint: str) -> bool:
        return (self.cluster_root / _safe(endpoint) / "cluster.json").exists()

    def now(self) -> float:
        """Wall time plus the offset the test moved the fleet's clock by."""
        clock = self.cluster_root / "clock.json"
        offset = float(json.loads(clock.read_text())["offset"]) if clock.exists() else 0.0
        return time.time() + offset

    def checkpoint(self, phase: str) -> None:
        """A point between two phases of the running call: a sweep fault aimed at `<call line> @<phase>`
        fails or holds the call here, after the phases before it did their work."""
        at = f"{self.line} @{phase}"
        _inject_once(self, at)
        with open(self.state_dir / "checkpoints.jsonl", "a") as log:
            log.write(json.dumps({"checkpoint": at, "t0": time.time(), "pid": os.getpid()}) + "\n")

    def static_pod_ready(self, component: str) -> bool:
        """Whether this node's static pod `component` is ready: its manifest is in the kubelet's directory and has
        been for the host's `staticPodReadySeconds[component]` (default 0; real time since the manifest's last
        rename, which a park-and-return makes). A container runs from the start (`crictl ps` lists it); a member
        loading its data or an API server waiting for it is not ready."""
        manifest = Path("/etc/kubernetes/manifests") / f"{component}.yaml"
        try:
            since = manifest.stat().st_ctime
        except FileNotFoundError:
            return False
        from selinux import containers_may_run  # type: ignore[import-not-found]  # a sibling stub, on the stubs path

        if containers_may_run(self) is not None:
            return False  # its containers cannot start (SELinux labels of containerd's root)
        delay = float((self.settings.get("staticPodReadySeconds") or {}).get(component, 0))
        return time.time() >= since + delay

    def install_binary(self, tool: str) -> None:
        """A package put `tool` on PATH (the stubs for package binaries appear only once installed)."""
        write_launcher(self.bin_dir / tool, self.python, Path(self.stubs), tool)

    def install_real_binary(self, tool: str) -> None:
        """A package put a real program on PATH: the test machine's copy, run as it is (stubs/daemons.py)."""
        real = self.real_binaries / tool
        if not real.exists():
            raise fail(f"the fleet has no real {tool}: bash .ci/os-packages fleet installs it on the test machine")
        (self.bin_dir / tool).write_text(f'#!/bin/sh\nexec {real} "$@"\n')
        (self.bin_dir / tool).chmod(0o755)

    def remove_binary(self, tool: str) -> None:
        (self.bin_dir / tool).unlink(missing_ok=True)


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.lstrip("v").split("-")[0].split("."))


def package_version(host: Host, name: str) -> str:
    """The Kubernetes version (1.34.2) of an installed package on this host, or ''."""
    with host.state() as state:
        return str(state.get("packages", {}).get(name, "")).split("-")[0]


def record_versions(cluster: dict[str, Any], event: str) -> None:
    """Append what every node runs after `event` to the cluster's history (tests check the skew after each)."""
    cluster.setdefault("history", []).append(
        {
            "event": event,
            "t": time.time(),
            "version": cluster.get("version"),
            "nodes": {
                name: {k: node.get(k) for k in ("kubeletVersion", "controlPlaneVersion") if node.get(k)}
                for name, node in sorted(cluster.get("nodes", {}).items())
            },
        }
    )


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


@contextlib.contextmanager
def _locked_json(path: Path) -> Iterator[dict[str, Any]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {}
        yield data
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)


def blocking_firewall(state_dir: Path, port: str) -> str | None:
    """The firewall of the host whose stub state is `state_dir` that drops connections to `port`, if any
    (firewalld answers them with icmp-host-prohibited: "no route to host")."""
    settings = json.loads((state_dir / "settings.json").read_text())
    db_file = state_dir / "db.json"
    state = json.loads(db_file.read_text()) if db_file.exists() else {}
    if settings.get("firewalld") == "running" and port not in state.get("firewalld", {}).get("runtime", []):
        return "firewalld"
    if settings.get("ufw") == "active" and port not in state.get("ufw", {}).get("rules", []):
        return "ufw"
    return None


STUB_FILES = {
    "kubeadm": "kubeadm.py",
    "kubectl": "kubectl.py",
    "crictl": "etcd.py",
    "apt-cache": "packages.py",
    "systemctl": "systemctl.py",
    "apt-get": "packages.py",
    "apt-mark": "packages.py",
    "dpkg-query": "packages.py",
    "dnf": "packages.py",
    "rpm": "packages.py",
    "modprobe": "kernel.py",
    "sysctl": "kernel.py",
    "swapon": "kernel.py",
    "swapoff": "kernel.py",
    "containerd": "containerd.py",
    "curl": "fetch.py",
    "gpg": "fetch.py",
    "blkid": "disk.py",
    "mkfs": "disk.py",
    "mkfs.xfs": "disk.py",
    "mkfs.ext4": "disk.py",
    "mount": "disk.py",
    "mountpoint": "disk.py",
    "firewall-cmd": "security.py",
    "ufw": "security.py",
    "getenforce": "security.py",
    "getsebool": "selinux.py",
    "setsebool": "selinux.py",
    "restorecon": "selinux.py",
    "semanage": "selinux.py",
}
OS_TOOLS = (
    "systemctl",
    "apt-get",
    "apt-cache",
    "apt-mark",
    "dpkg-query",
    "dnf",
    "rpm",
    "modprobe",
    "sysctl",
    "swapon",
    "swapoff",
    "curl",
    "gpg",
    "blkid",
    "mkfs",
    "mkfs.xfs",
    "mkfs.ext4",
    "mount",
    "mountpoint",
    "firewall-cmd",
    "ufw",
    "getenforce",
    "getsebool",
    "setsebool",
    "restorecon",
    "semanage",
)
"""On every host's PATH from the start (the other stubs appear when their package is installed)."""


HOLD_SECONDS = 120.0
"""How long a held call waits for `release` before it goes on by itself."""


def _take_once(host: Host, key: str, line: str) -> str | None:
    """The value of the first `key` fault whose pattern matches `line`, removed from the settings (used up)."""
    import re

    if not host.settings.get(key):
        return None
    with open(host.state_dir / "settings.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = host.state_dir / "settings.json"
        settings = json.loads(path.read_text())
        faults: dict[str, str] = settings.get(key) or {}
        pattern = next((p for p in faults if re.fullmatch(p, line)), None)
        if pattern is None:
            return None
        value = faults.pop(pattern)
        path.with_suffix(".tmp").write_text(json.dumps(settings))
        path.with_suffix(".tmp").replace(path)  # other calls read it without the lock
    host.record_extra.setdefault("injected", []).append(key)
    return value


def _inject_once(host: Host, line: str) -> None:
    """Apply the sweep's one-time faults aimed at `line` (see the module docstring)."""
    held = _take_once(host, "holdOnce", line)
    if held is not None:
        # Whole the moment it exists: the sweep reads it as soon as it sees the name (a plain write once showed it
        # an empty file).
        partial = host.state_dir / f"{held}.partial"
        partial.write_text(json.dumps({"pid": os.getpid(), "line": line}))
        os.replace(partial, host.state_dir / held)
        release = host.state_dir / "release"
        deadline = time.monotonic() + HOLD_SECONDS
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    message = _take_once(host, "failOnce", line)
    if message is not None:
        raise fail(message)


def write_launcher(path: Path, python: str, stubs: Path, tool: str) -> None:
    path.write_text(f'#!/bin/sh\nexec {python} -s {stubs / STUB_FILES[tool]} {tool} "$@"\n')
    path.chmod(0o755)


def main(tools: dict[str, Callable[[Host, list[str]], int]]) -> None:
    """Entry of a stub file: `<file>.py <tool> args...`; sleeps, injects failures, runs, records."""
    tool, argv = sys.argv[1], sys.argv[2:]
    host = Host()
    t0 = time.time()
    latency = float(host.settings.get("latency", 0))
    # Per-operation latencies (`{"kubeadm init": 6, "apt-get install": 2}`): the longest matching prefix wins.
    line = host.line = " ".join([tool, *argv])
    matching = [p for p in (host.settings.get("latencies") or {}) if line.startswith(p)]
    if matching:
        latency = float(host.settings["latencies"][max(matching, key=len)])
    if latency:
        time.sleep(latency)
    rc = 0
    try:
        for prefix, message in (host.settings.get("fail") or {}).items():
            if line.startswith(prefix):
                raise fail(message)
        _inject_once(host, line)
        rc = tools[tool](host, argv)
    except StubExit as exit_:
        if exit_.message:
            print(exit_.message, file=sys.stderr)
        rc = exit_.code
    finally:
        entry = {
            "tool": tool,
            "argv": argv,
            "t0": t0,
            "t1": time.time(),
            "rc": rc,
            "pid": os.getpid(),
            **host.record_extra,
        }
        with open(host.state_dir / "calls.jsonl", "a") as log:
            log.write(json.dumps(entry) + "\n")
    sys.stdout.flush()
    os._exit(rc)
