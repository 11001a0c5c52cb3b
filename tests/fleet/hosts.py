"""Test hosts: a network namespace, a private mount namespace and an sshd each (see the package docstring)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.config.spec import DEFAULT_KUBERNETES_VERSION
from components.config.support import KUBERNETES_MINORS, parse

from ..markers import slow_work
from .stubs._stub import OS_TOOLS, _locked_json, write_launcher

STUBS = Path(__file__).resolve().parent / "stubs"
LOCK = Path("/run/lock/mlcluster-fleet.lock")
OWNERS = Path("/run/mlcluster-fleet")
"""One file per running fleet (named by its bridge): the owning process id and its network namespaces, so a
fleet whose test process died without teardown is removed by the next fleet that starts."""
SUBNETS = 512
"""198.18.0.0/15 holds 512 /24 networks; each fleet takes a free one, so fleets of parallel sessions coexist."""

OS_RELEASES = {
    "debian-12": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
    "debian-13": 'PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nID=debian\nVERSION_ID="13"\n',
    "ubuntu-22.04": 'PRETTY_NAME="Ubuntu 22.04.5 LTS"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\n',
    "ubuntu-24.04": 'PRETTY_NAME="Ubuntu 24.04.3 LTS"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n',
    "rocky-9": 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.6"\n',
    "rocky-10": 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="10.0"\n',
    "almalinux-9": 'NAME="AlmaLinux"\nID="almalinux"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.6"\n',
    "almalinux-10": 'NAME="AlmaLinux"\nID="almalinux"\nID_LIKE="rhel centos fedora"\nVERSION_ID="10.0"\n',
    "rhel-9": 'NAME="Red Hat Enterprise Linux"\nID="rhel"\nID_LIKE="fedora"\nVERSION_ID="9.6"\n',
    "rhel-10": 'NAME="Red Hat Enterprise Linux"\nID="rhel"\nID_LIKE="centos fedora"\nVERSION_ID="10.0"\n',
}
PACKAGE_BINARIES = ("kubeadm", "kubectl", "containerd")
REAL_PACKAGE_BINARIES = ("keepalived", "haproxy")
"""Real programs a host gets from its package (stubs/daemons.py): hidden at /usr/sbin until it installs them."""
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
_DEFAULT_MINOR = parse(DEFAULT_KUBERNETES_VERSION) or (1, 0)
PREVIOUS_MINOR_VERSION = next(
    m.newest_patch for m in KUBERNETES_MINORS if m.minor == (_DEFAULT_MINOR[0], _DEFAULT_MINOR[1] - 1)
)
"""The newest patch the support calendar knows of the minor before the default: where the fleet's upgrades start."""
NEXT_MINOR_VERSION = next(
    m.newest_patch for m in KUBERNETES_MINORS if m.minor == (_DEFAULT_MINOR[0], _DEFAULT_MINOR[1] + 1)
)


class FleetUnavailable(AssertionError):  # noqa: N818 (reads as the condition it reports)
    """The machine cannot run the fleet (not root, no netns, no sshd): a failure, never a skip."""


@dataclass(frozen=True)
class HostSpec:
    """One test host. `os` selects /etc/os-release (keys of OS_RELEASES)."""

    name: str
    os: str = "debian-12"
    containerd: str = "1.7.24"
    cgroup: str = "v2"
    """v2: cgroup2 at /sys/fs/cgroup (a real cgroup2 mount); v1: a tmpfs there, as a cgroup v1 host has (what
    `stat -fc %T /sys/fs/cgroup/` tells apart: kubernetes/website content/en/docs/concepts/architecture/cgroups.md)."""
    user: str = "root"
    """SSH user; any other user gets passwordless sudo (as mlcluster requires)."""
    swap: bool = True
    """Start with swap on and a swap line in /etc/fstab, as a fresh server often has."""
    latency: float = 0.0
    """Seconds every stub call on this host sleeps (to model slow package managers)."""
    only_via: str | None = None
    """Name of a host (a bastion) that alone may open SSH sessions to this one."""
    offline: bool = False
    """An air-gapped host: the one outside URL the stubs otherwise answer (the package repository key) does not
    answer either; only the fleet's own network does (stubs/fetch.py)."""


@dataclass
class FleetHost:
    spec: HostSpec
    address: str
    host_key: str
    """The pinned public host key, `ssh-ed25519 AAAA...`, generated for this run."""
    dir: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def state_dir(self) -> Path:
        return self.dir / "state"

    def _jsonl(self, name: str) -> list[dict[str, Any]]:
        path = self.state_dir / name
        return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """Stub calls in order: {tool, argv, t0, t1, rc, ...hashes}."""
        return [c for c in self._jsonl("calls.jsonl") if tool is None or c["tool"] == tool]

    def sessions(self) -> list[dict[str, Any]]:
        """SSH sessions the host served: start/end events with the mlcluster step each ran."""
        return self._jsonl("sessions.jsonl")

    def state(self) -> dict[str, Any]:
        """The stubs' view of the host: packages, held, services, sysctl, swap, units."""
        path = self.state_dir / "db.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def set(self, **settings: Any) -> None:
        """Change stub behaviour from now on: latency=seconds, latencies={"<tool> <args>": seconds},
        fail={"<tool> <args>": "message"}, containerdVersion=, repoLacks=["kubelet-1.35.0", ...]."""
        path = self.state_dir / "settings.json"
        with open(self.state_dir / "settings.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # as the stubs take it to use up a one-time fault
            current = json.loads(path.read_text())
            current.update(settings)
            path.with_suffix(".tmp").write_text(json.dumps(current))
            path.with_suffix(".tmp").replace(path)  # stubs read it without the lock

    def run(self, command: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A shell command inside the host's namespaces, as root (bypassing SSH): for test setup and checks."""
        assert self.process is not None, f"{self.name} is not running"
        return subprocess.run(
            ["nsenter", "-t", str(self.process.pid), "-m", "-n", "--", "bash", "-c", command],
            capture_output=True,
            text=True,
            check=check,
            timeout=30,
        )

    def exists(self, path: str) -> bool:
        return self.run(f"test -e {path}", check=False).returncode == 0

    def read(self, path: str) -> str:
        return self.run(f"cat {path}").stdout

    def vanish(self) -> None:
        """The host dies for good: its sshd stops answering and its kubelet stops reporting (NotReady)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        for path in (self.dir.parent.parent / "cluster").glob("*/cluster.json"):
            with _locked_json(path) as cluster:  # under the lock the stubs take
                if self.name in cluster.get("nodes", {}):
                    cluster["nodes"][self.name]["ready"] = False

    def node(self, *roles: str, **extra: Any) -> dict[str, Any]:
        """This host as an entry of `mlcluster:nodes` (name, host, roles, pinned hostKey, user)."""
        entry: dict[str, Any] = {
            "name": self.name,
            "host": self.address,
            "roles": list(roles or ["worker"]),
            "hostKey": self.host_key,
        }
        if self.spec.user != "root":
            entry["user"] = self.spec.user
        return {**entry, **extra}


def _client_key(path: Path, comment: str) -> str:
    """A new ed25519 key pair for the engine's client at `path`; returns its public key."""
    _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))
    return path.with_suffix(".pub").read_text()


def _sh(*argv: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise FleetUnavailable(f"{' '.join(argv)} failed: {result.stderr.strip()}")


def require_fleet_support() -> None:
    problems = []
    if os.geteuid() != 0:
        problems.append("not root")
    for tool in ("ip", "unshare", "nsenter", "ssh", "ssh-keygen", "/usr/sbin/sshd", "sudo"):
        if shutil.which(tool) is None:
            problems.append(f"{tool} missing (apt-get install openssh-server openssh-client iproute2 sudo)")
    if problems:
        raise FleetUnavailable("the SSH fleet cannot run here: " + "; ".join(problems))


class Fleet:
    """N test hosts on one private /24 in 198.18.0.0/15, with a client key pair that all of them trust."""

    def __init__(self, root: Path, subnet: int) -> None:
        self.dir = root
        self.subnet = subnet
        self.tag = f"{os.getpid() % 10000:04d}{subnet:03d}"
        self.bridge = f"mlcb{self.tag}"
        self.hosts: dict[str, FleetHost] = {}
        key = root / "client" / "id_ed25519"
        self.client_private_key = key.read_text() if key.exists() else ""

    def address(self, index: int) -> str:
        return f"198.{18 + self.subnet // 256}.{self.subnet % 256}.{index}"

    @property
    def gateway(self) -> str:
        return self.address(1)

    def unreachable_address(self) -> str:
        """An address on the fleet's network where nothing answers."""
        return self.address(250)

    def __getitem__(self, name: str) -> FleetHost:
        return self.hosts[name]

    def clusters(self) -> list[dict[str, Any]]:
        """The stubs' shared cluster state ("API server") of each cluster initialised on this fleet."""
        return [json.loads(p.read_text()) for p in sorted((self.dir / "cluster").glob("*/cluster.json"))]

    def cluster_lock(self) -> contextlib.AbstractContextManager[dict[str, Any]]:
        """The one cluster's shared state, locked as the stubs lock it, written back after the block (a test
        changing the "API server": a running job marker, say)."""
        (path,) = sorted((self.dir / "cluster").glob("*/cluster.json"))
        return _locked_json(path)

    def now(self) -> float:
        """The stubs' clock: wall time plus what `advance_clock` moved it by (FleetEngine.clock for the program)."""
        clock = self.dir / "cluster" / "clock.json"
        return time.time() + (float(json.loads(clock.read_text())["offset"]) if clock.exists() else 0.0)

    def advance_clock(self, seconds: float) -> None:
        """Move the stubs' clock forward (tokens, certificate keys and certificates expire against it); real time
        is untouched."""
        clock = self.dir / "cluster" / "clock.json"
        offset = float(json.loads(clock.read_text())["offset"]) if clock.exists() else 0.0
        clock.write_text(json.dumps({"offset": offset + seconds}))

    def rotate_client_key(self) -> str:
        """A new client key pair: every host accepts the new key only (the old one is removed, as a rotation does);
        returns the new private key, which `stack_values` gives from now on."""
        client = self.dir / "client"
        for old in ("id_ed25519", "id_ed25519.pub"):
            (client / old).unlink()
        public = _client_key(client / "id_ed25519", "mlcluster-fleet-client-2")
        for host in self.hosts.values():
            (host.dir / "etc-upper" / "ssh" / "fleet_authorized_keys" / host.spec.user).write_text(public)
        self.client_private_key = (client / "id_ed25519").read_text()
        return self.client_private_key

    def stack_values(self, nodes: Sequence[dict[str, Any]], **sections: Any) -> tuple[dict[str, Any], list[str]]:
        """Config values for the program (and which are secret) with the fleet's key; platform layers off."""
        ssh = {"user": "root", "privateKey": self.client_private_key, "connectTimeoutSeconds": 2, "dialAttempts": 1}
        values: dict[str, Any] = {
            "kubernetesVersion": DEFAULT_KUBERNETES_VERSION,
            "cluster": {"mode": "kubeadm", "name": "fleet"},
            "ssh": ssh,
            "nodes": list(nodes),
            **{layer: {"enabled": False} for layer in ("gpuOperator", "kueue", "kserve", "kubeflow", "storage")},
            "monitoring": {"enabled": False, "faultHandling": {"mode": "off"}},
        }
        for key, value in sections.items():
            values[key] = {**values[key], **value} if isinstance(values.get(key), dict) else value
        return values, ["ssh"]

    # -- lifecycle -------------------------------------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def running(cls, specs: Sequence[HostSpec], *, keep: bool = False) -> Iterator[Fleet]:
        """Start the hosts, yield the fleet, tear everything down (the directory stays with keep=True)."""
        slow_work("fleet")
        require_fleet_support()
        root = Path(tempfile.mkdtemp(prefix="mlcfleet-"))
        root.chmod(0o755)  # non-root SSH users record their sessions under it
        fleet = None
        try:
            fleet = cls._allocate(root)
            fleet._start(specs)
            yield fleet
        finally:
            if fleet is not None:
                fleet.stop()
            if not keep and not os.environ.get("MLCLUSTER_FLEET_KEEP"):
                shutil.rmtree(root, ignore_errors=True)

    @classmethod
    def _allocate(cls, root: Path) -> Fleet:
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        with open(LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
            free = [i for i in range(SUBNETS) if f" 198.{18 + i // 256}.{i % 256}." not in used]
            if not free:
                raise FleetUnavailable("no free /24 left in 198.18.0.0/15")
            _reap_orphans()
            fleet = cls(root, random.choice(free))
            OWNERS.mkdir(parents=True, exist_ok=True)
            _write_owner(fleet.bridge, {"pid": os.getpid(), "netns": []})
            _sh("ip", "link", "add", fleet.bridge, "type", "bridge")
            _sh("ip", "addr", "add", f"{fleet.gateway}/24", "dev", fleet.bridge)
            _sh("ip", "link", "set", fleet.bridge, "up")
        return fleet

    def _start(self, specs: Sequence[HostSpec]) -> None:
        (self.dir / "cluster").mkdir()
        sbin = self.dir / "sbin"
        sbin.mkdir()
        for tool in OS_TOOLS:
            write_launcher(sbin / tool, sys.executable, STUBS, tool)
        shutil.copy(STUBS / "session.sh", sbin / "fleet-session")
        absent = self.dir / "absent"
        absent.write_text('#!/bin/sh\necho "$0: command not found" >&2\nexit 127\n')
        absent.chmod(0o755)
        real = self.dir / "real"
        real.mkdir()
        for tool in REAL_PACKAGE_BINARIES:
            if Path(f"/usr/sbin/{tool}").exists():  # absent: a host that installs it fails, naming the cause
                shutil.copy2(f"/usr/sbin/{tool}", real / tool)
        tls = self.dir / "apiserver-tls"
        tls.mkdir()
        _sh(
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "3650",
            "-subj",
            "/CN=kube-apiserver",
            "-keyout",
            str(tls / "tls.key"),
            "-out",
            str(tls / "tls.crt"),
        )
        client = self.dir / "client"
        client.mkdir(mode=0o700)
        client_public = _client_key(client / "id_ed25519", "mlcluster-fleet-client")
        self.client_private_key = (client / "id_ed25519").read_text()
        for index, spec in enumerate(specs):
            if spec.os not in OS_RELEASES:
                raise ValueError(f"{spec.name}: unknown os {spec.os!r} (one of {sorted(OS_RELEASES)})")
            self.hosts[spec.name] = self._prepare(spec, 10 + index, client_public)
        for host in self.hosts.values():
            self._boot(host)
        for host in self.hosts.values():
            self._wait_for_sshd(host)

    def _prepare(self, spec: HostSpec, index: int, client_public: str) -> FleetHost:
        host_dir = self.dir / "hosts" / spec.name
        for sub in (
            "etc-upper",
            "etc-work",
            "var-upper",
            "var-work",
            "root-upper",
            "root-work",
            "home",
            "sysmodule",
            "bin",
            "state",
        ):
            (host_dir / sub).mkdir(parents=True)
        (host_dir / "state").chmod(0o755)
        # sshd starts the command with the user's bash, which reads ~/.bashrc even without a terminal (Debian
        # builds bash so). The test machine's root .bashrc runs `pyenv init`, whose rehash waits on a lock file: a
        # host restarted in the middle of one kept the lock on its disk, and every later session on it waited a
        # minute (a sweep row took 560 s). A server has no such profile: the host's root gets an empty one.
        (host_dir / "root-upper" / ".bashrc").write_text("# fleet host: not the test machine's shell profile\n")
        etc = host_dir / "etc-upper"
        (etc / "os-release").write_text(OS_RELEASES[spec.os])
        (etc / "fstab").write_text("# fleet host\n" + ("/swap.img none swap sw 0 0\n" if spec.swap else ""))
        (etc / "mlcluster-fleet").mkdir()
        (etc / "mlcluster-fleet" / "state").symlink_to(host_dir / "state")
        (etc / "mlcluster-fleet" / "host.json").write_text(
            json.dumps(
                {
                    "name": spec.name,
                    "state": str(host_dir / "state"),
                    "clusterRoot": str(self.dir / "cluster"),
                    "python": sys.executable,
                    "stubs": str(STUBS),
                    "binDir": "/usr/local/bin",
                    "realBinaries": str(self.dir / "real"),
                    "apiServerTls": str(self.dir / "apiserver-tls"),
                }
            )
        )
        (host_dir / "state" / "settings.json").write_text(
            json.dumps(
                {"latency": spec.latency, "fail": {}, "containerdVersion": spec.containerd, "offline": spec.offline}
            )
        )
        (host_dir / "state" / "db.json").write_text(json.dumps({"swap": spec.swap}))
        sessions = host_dir / "state" / "sessions.jsonl"
        sessions.touch()
        sessions.chmod(0o666)
        ssh = etc / "ssh"
        ssh.mkdir()
        key = ssh / "fleet_host_ed25519_key"
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key))
        host_key = " ".join(key.with_suffix(".pub").read_text().split()[:2])
        (ssh / "fleet_authorized_keys").mkdir()
        (ssh / "fleet_authorized_keys" / spec.user).write_text(client_public)
        address = self.address(index)
        allow = ""
        if spec.only_via is not None:
            bastion_index = 10 + list(self.hosts).index(spec.only_via)
            allow = f"AllowUsers *@{self.address(bastion_index)}\n"
        (ssh / "fleet_sshd_config").write_text(
            f"ListenAddress {address}:22\n"
            "HostKey /etc/ssh/fleet_host_ed25519_key\n"
            "AuthorizedKeysFile /etc/ssh/fleet_authorized_keys/%u\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "PermitRootLogin prohibit-password\nPidFile none\nLogLevel VERBOSE\n"
            # MaxStartups and MaxSessions stay at OpenSSH's defaults (10:30:100, 10), as on a real host: the
            # engine's crowds of dials meet the limit a real bastion has.
            "AllowTcpForwarding yes\n"
            "ForceCommand /usr/local/sbin/fleet-session\n"
            # pulumi-command copies files over SFTP (the scripts every step sources): the distributions' default.
            f"Subsystem sftp {SFTP_SERVER}\n"
            "SetEnv PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n" + allow
        )
        if spec.user != "root":
            for name, line in (
                ("passwd", f"{spec.user}:x:1500:1500::/home/{spec.user}:/bin/bash\n"),
                ("group", f"{spec.user}:x:1500:\n"),
                ("shadow", f"{spec.user}:*:20000:0:99999:7:::\n"),
            ):
                (etc / name).write_text(Path(f"/etc/{name}").read_text() + line)
            (etc / "shadow").chmod(0o640)
            (etc / "sudoers.d").mkdir()
            sudoers = etc / "sudoers.d" / "fleet-user"
            sudoers.write_text(f"{spec.user} ALL=(ALL) NOPASSWD:ALL\n")
            sudoers.chmod(0o440)
        masks = "".join(
            f"[ -e /usr/bin/{tool} ] && mount --bind {self.dir}/absent /usr/bin/{tool}\n" for tool in PACKAGE_BINARIES
        ) + "".join(
            f"[ -e /usr/sbin/{tool} ] && mount --bind {self.dir}/absent /usr/sbin/{tool}\n"
            for tool in REAL_PACKAGE_BINARIES
        )
        home = f"mkdir -p /home/{spec.user} && chown 1500:1500 /home/{spec.user}\n" if spec.user != "root" else ""
        (host_dir / "boot.sh").write_text(
            "set -e\n"
            # /root too: the machine's stays readable (interpreters may live there), writes stay with the host.
            + "".join(
                f"mount -t overlay overlay -o lowerdir=/{d},upperdir={host_dir}/{d}-upper,workdir={host_dir}/{d}-work"
                f" /{d}\n"
                for d in ("etc", "var", "root")
            )
            + f"mount --bind {host_dir}/home /home\n"
            + home
            + "mount -t tmpfs -o mode=0755 tmpfs /run\nmkdir -p /run/sshd /run/lock\n"
            + (
                "mount -t cgroup2 cgroup2 /sys/fs/cgroup\n"
                if spec.cgroup == "v2"
                else "mount -t tmpfs -o mode=0755 tmpfs /sys/fs/cgroup\n"
            )
            + f"mount --bind {host_dir}/sysmodule /sys/module\n"
            f"mount --bind {self.dir}/sbin /usr/local/sbin\n"
            f"mount --bind {host_dir}/bin /usr/local/bin\n"
            + masks
            + f"exec /usr/sbin/sshd -D -f /etc/ssh/fleet_sshd_config -E {host_dir}/sshd.log\n"
        )
        return FleetHost(spec=spec, address=address, host_key=host_key, dir=host_dir)

    def netns(self, host: FleetHost) -> str:
        return f"mlc{self.tag}-{host.name}"[:40]

    def _boot(self, host: FleetHost) -> None:
        netns = self.netns(host)
        owner = OWNERS / self.bridge
        _write_owner(self.bridge, {"pid": os.getpid(), "netns": [*json.loads(owner.read_text())["netns"], netns]})
        veth = f"mlv{self.tag}{list(self.hosts).index(host.name):02d}"
        _sh("ip", "netns", "add", netns)
        _sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        _sh("ip", "link", "set", veth, "master", self.bridge, "up")
        _sh("ip", "-n", netns, "link", "set", "eth0", "up")
        _sh("ip", "-n", netns, "link", "set", "lo", "up")
        self._power_on(host)

    def _power_on(self, host: FleetHost) -> None:
        """Start the host in its network namespace: a private mount namespace over its disk, then sshd. Its
        interface has only the host's own address, as after a real power cycle (an address keepalived added
        before the cut is gone)."""
        netns = self.netns(host)
        _sh("ip", "-n", netns, "addr", "flush", "dev", "eth0")
        _sh("ip", "-n", netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        boot = ["ip", "netns", "exec", self.netns(host), "unshare", "--mount", "--propagation", "private", "--", "bash"]
        with open(host.dir / "boot.log", "ab") as boot_log:
            host.process = subprocess.Popen(
                [*boot, str(host.dir / "boot.sh")],
                stdout=subprocess.DEVNULL,
                stderr=boot_log,
                start_new_session=True,
            )

    def _power_off(self, host: FleetHost) -> None:
        """Every process of the host dies at once (sshd, the sessions, what they run), as in a power cut."""
        netns = self.netns(host)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=False).stdout
            if not pids.split():
                break
            for pid in pids.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.05)
        else:
            raise AssertionError(f"{host.name}: processes outlived the power cut: {pids.split()}")
        if host.process is not None:
            host.process.wait(timeout=5)

    def reboot(self, name: str) -> None:
        """The host restarts: every process dies at once (its SSH sessions and what they were running), the
        disk stays; once sshd answers again, its runtime state (loaded modules, sysctl, swap, running services)
        is what its files give at boot (stubs/boot.py)."""
        host = self[name]
        self._power_off(host)
        self._power_on(host)
        self._wait_for_sshd(host)
        booted = host.run(f"{sys.executable} -s {STUBS / 'boot.py'}", check=False)
        if booted.returncode != 0:
            raise AssertionError(f"{name}: the boot stub failed: {booted.stderr}")

    def drop_connection(self, name: str, pid: int) -> None:
        """The SSH connection of the session running process `pid` on host `name` drops: that session's sshd
        processes die, so the client sees the connection close; the commands the session started go on
        without it (no terminal, so no hangup), as after a network cut."""
        host = self[name]
        assert host.process is not None
        dropped = []
        current = pid
        while current > 1 and current != host.process.pid:
            status = Path(f"/proc/{current}/status").read_text()
            parent = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
            if Path(f"/proc/{current}/comm").read_text().strip() == "sshd":
                dropped.append(current)
            current = parent
        assert dropped, f"{name}: process {pid} is not in an SSH session"
        for sshd in dropped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(sshd, signal.SIGKILL)

    DISK = ("etc-upper", "var-upper", "root-upper", "home", "sysmodule", "bin", "state")
    """What of a host survives a power cut (its overlays' work directories are rebuilt at each restore)."""

    def snapshot(self, into: Path) -> None:
        """Power every host off, copy their disks and the clusters' state into `into`, power them on again: a
        point `restore` returns the whole fleet to (runtime state included, as a hibernation would)."""
        self._copy_disks(self.dir, into)

    def restore(self, source: Path) -> None:
        """The fleet as it was at `snapshot(source)`."""
        self._copy_disks(source, self.dir)

    def _copy_disks(self, source: Path, target: Path) -> None:
        for host in self.hosts.values():
            self._power_off(host)
        parts = [Path("cluster")] + [Path("hosts") / name / part for name in self.hosts for part in self.DISK]
        for part in parts:
            shutil.rmtree(target / part, ignore_errors=True)
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            _sh("cp", "-a", str(source / part), str(target / part))  # overlay whiteouts are device files
        for host in self.hosts.values():
            for work in ("etc-work", "var-work", "root-work"):
                shutil.rmtree(host.dir / work, ignore_errors=True)
                (host.dir / work).mkdir()
            self._power_on(host)
        for host in self.hosts.values():
            self._wait_for_sshd(host)
            self._resume(host)

    def _resume(self, host: FleetHost) -> None:
        """Processes that were running at the snapshot run again (real services, the API server stand-in); the
        state is read from outside first, so a host with none costs no call."""
        services = host.state().get("services", {})
        manifest = host.dir / "etc-upper" / "kubernetes" / "manifests" / "kube-apiserver.yaml"
        real = any(services.get(unit, {}).get("active") for unit in REAL_PACKAGE_BINARIES)
        if real or (manifest.exists() and services.get("kubelet", {}).get("enabled")):
            resumed = host.run(f"{sys.executable} -s {STUBS / 'daemons.py'} resume", check=False)
            if resumed.returncode != 0:
                raise AssertionError(f"{host.name}: resuming its processes failed: {resumed.stderr}")

    def _wait_for_sshd(self, host: FleetHost) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            assert host.process is not None
            if host.process.poll() is not None:
                raise FleetUnavailable(
                    f"{host.name}: sshd exited: {(host.dir / 'boot.log').read_text()}"
                    f"{(host.dir / 'sshd.log').read_text() if (host.dir / 'sshd.log').exists() else ''}"
                )
            with contextlib.suppress(OSError), socket.create_connection((host.address, 22), timeout=0.5):
                return
            time.sleep(0.05)
        raise FleetUnavailable(f"{host.name}: sshd did not listen on {host.address}:22 within 10s")

    def stop(self) -> None:
        for host in self.hosts.values():
            if host.process is not None and host.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(host.process.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    host.process.wait(timeout=5)
        _remove_network(self.bridge, [self.netns(h) for h in self.hosts.values()])


def _remove_network(bridge: str, namespaces: Sequence[str]) -> None:
    for netns in namespaces:
        pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=False).stdout
        for pid in pids.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", netns], capture_output=True, check=False)
    subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
    (OWNERS / bridge).unlink(missing_ok=True)


def _write_owner(bridge: str, record: dict[str, Any]) -> None:
    """An owner record replaced whole: another test process reaping orphans (under the allocation lock, which a
    host's boot does not take) reads either the old record or the new one, never a file cut short."""
    staged = OWNERS / f".{bridge}.{os.getpid()}.tmp"
    staged.write_text(json.dumps(record))
    staged.replace(OWNERS / bridge)


def _reap_orphans() -> None:
    """Remove fleets whose owning test process is gone (it crashed or was killed before its teardown)."""
    if not OWNERS.is_dir():
        return
    for owner in OWNERS.iterdir():
        if owner.name.startswith("."):
            continue  # a record being written (_write_owner)
        record = json.loads(owner.read_text())
        try:
            os.kill(record["pid"], 0)
        except ProcessLookupError:
            _remove_network(owner.name, record["netns"])
