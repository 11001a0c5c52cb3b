"""One node step, run for real in a private mount namespace with the fleet's recording stubs.

A light fleet host for step-level cases (no network namespace, no sshd): `unshare -m` binds the node's own
etc/ and var/ over /etc and /var, /dev is a tmpfs holding /dev/null and the image disk's block node, and the
fleet's stubs (tests/fleet/stubs: systemctl, containerd, blkid, mkfs, mount, mountpoint) come first on PATH,
reading /etc/mlcluster-fleet/host.json like on a fleet host. Every stub call lands in the node's calls.jsonl.
Needs root (unshare, mknod): fails, never skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .fleet.hosts import STUBS
from .fleet.stubs._stub import write_launcher

OS_RELEASE = {
    "deb": 'ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n',
    "rpm": 'ID=rocky\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.5"\n',
}
ENV_FILE = {"deb": "/etc/default/kubelet", "rpm": "/etc/sysconfig/kubelet"}
TOOLS = ("systemctl", "containerd", "blkid", "mkfs", "mkfs.xfs", "mkfs.ext4", "mount", "mountpoint")


@dataclass
class Node:
    """One sandboxed host: `root` holds its etc/, var/, bin/ (stub launchers) and state/."""

    root: Path
    os_family: str = "deb"
    containerd_version: str = "1.7.24"

    def __post_init__(self) -> None:
        for sub in ("etc", "var/lib", "bin", "state"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # awk and friends resolve through /etc/alternatives on Debian-family machines.
        if Path("/etc/alternatives").is_dir() and not (self.root / "etc/alternatives").exists():
            shutil.copytree("/etc/alternatives", self.root / "etc/alternatives", symlinks=True)
        self.write("/etc/os-release", OS_RELEASE[self.os_family])
        self.write("/etc/fstab", "# <file system> <mount point> <type> <options> <dump> <pass>\n")
        host = {
            "name": self.root.name,
            "state": str(self.root / "state"),
            "clusterRoot": str(self.root / "cluster"),
            "python": sys.executable,
            "stubs": str(STUBS),
            "binDir": str(self.root / "bin"),
        }
        self.write("/etc/mlcluster-fleet/host.json", json.dumps(host))
        self.settings(containerdVersion=self.containerd_version)
        # The units their packages would have installed.
        (self.root / "state/db.json").write_text(json.dumps({"units": ["containerd", "kubelet"]}))
        for tool in TOOLS:
            write_launcher(self.root / "bin" / tool, sys.executable, STUBS, tool)

    @property
    def env_file(self) -> str:
        return ENV_FILE[self.os_family]

    def settings(self, **values: Any) -> None:
        """Stub behaviour (the fleet's host settings): containerdVersion, disks, fail, ..."""
        path = self.root / "state/settings.json"
        current = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps(current | values))

    def path(self, absolute: str) -> Path:
        top, _, rest = absolute.lstrip("/").partition("/")
        assert top in ("etc", "var"), f"{absolute} is outside the sandboxed /etc and /var"
        return self.root / top / rest

    def write(self, absolute: str, text: str) -> None:
        target = self.path(absolute)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def read(self, absolute: str) -> str:
        return self.path(absolute).read_text()

    def exists(self, absolute: str) -> bool:
        return self.path(absolute).exists()

    def state(self) -> dict[str, Any]:
        return dict(json.loads((self.root / "state/db.json").read_text()))

    def calls(self, tool: str | None = None) -> list[list[str]]:
        """[tool, *argv] of every stub call, in order."""
        log = self.root / "state/calls.jsonl"
        entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return [[e["tool"], *e["argv"]] for e in entries if tool in (None, e["tool"])]

    def count(self, *call: str) -> int:
        return self.calls(call[0]).count(list(call))

    def run(
        self, script: str, block_devices: tuple[str, ...] = (), mounted: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a rendered step script as root in this node's private mount namespace.

        `mounted` {device: directory}: a tmpfs named after the device on that directory, so findmnt (the real
        one) sees the device as mounted there."""
        nodes = "".join(f"mkdir -p \"$(dirname '{d}')\" && mknod '{d}' b 259 1 && " for d in block_devices)
        mount = shutil.which("mount", path="/usr/bin:/bin")
        # set -e, and mknod only once /dev is this namespace's own empty tmpfs: nothing may touch the machine's.
        setup = (
            "set -e; "
            f"{mount} --bind '{self.root}/etc' /etc && {mount} --bind '{self.root}/var' /var && "
            f'{mount} -t tmpfs tmpfs /dev && [ -z "$(ls -A /dev)" ] && mknod -m 666 /dev/null c 1 3 && '
            f"{nodes}"
            + "".join(f"mkdir -p '{t}' && {mount} -t tmpfs '{d}' '{t}' && " for d, t in (mounted or {}).items())
            + "exec bash -s"
        )
        env = {**os.environ, "PATH": f"{self.root}/bin:{os.environ['PATH']}"}
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c", setup],
            input=script,
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=60,
        )
