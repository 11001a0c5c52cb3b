"""A node in a private mount namespace: real step scripts run against a scratch /etc, /var and /dev.

`unshare -m` gives each run its own mounts: the host's root dir is bound over /etc and /var, /dev is a tmpfs
with /dev/null and the image disk's block node, and recording stubs (systemctl, containerd, blkid, mkfs,
mount, mountpoint) come first on PATH. Every stub call lands in state/calls.log, so a test counts restarts
and formats instead of trusting the script's own output. Needs root (unshare, mknod): fails, never skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

OS_RELEASE = {
    "deb": 'ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n',
    "rpm": 'ID=rocky\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.5"\n',
}
ENV_FILE = {"deb": "/etc/default/kubelet", "rpm": "/etc/sysconfig/kubelet"}

STUBS = {
    "systemctl": """
        echo "systemctl $*" >>"$STATE/calls.log"
        exit 0
    """,
    "containerd": """
        echo "containerd $*" >>"$STATE/calls.log"
        printf 'containerd github.com/containerd/containerd v%s 0123abc\\n' "$(cat "$STATE/containerd-version")"
    """,
    # blkid -p -o export DEV | -o value -s UUID|TYPE DEV, answered from what mkfs (or the test) left in state/.
    "blkid": """
        echo "blkid $*" >>"$STATE/calls.log"
        type=$(cat "$STATE/fs-type" 2>/dev/null || true)
        pttype=$(cat "$STATE/pt-type" 2>/dev/null || true)
        case "$*" in
          *"-o export"*)
            [ -n "$type$pttype" ] || exit 2
            [ -z "$type" ] || printf 'DEVNAME=%s\\nUUID=%s\\nTYPE=%s\\n' "${!#}" "$(cat "$STATE/fs-uuid")" "$type"
            [ -z "$pttype" ] || printf 'PTTYPE=%s\\n' "$pttype"
            ;;
          *"-s UUID"*) [ -n "$type" ] || exit 2; cat "$STATE/fs-uuid" ;;
          *"-s TYPE"*) [ -n "$type" ] || exit 2; echo "$type" ;;
        esac
    """,
    "mkfs": """
        echo "mkfs $*" >>"$STATE/calls.log"
        [ "$1" = -t ] || exit 1
        echo "$2" >"$STATE/fs-type"
        echo 5f1c0de0-0000-4000-8000-00000000beef >"$STATE/fs-uuid"
    """,
    "mount": """
        echo "mount $*" >>"$STATE/calls.log"
        touch "$STATE/mounted"
    """,
    "mountpoint": """
        echo "mountpoint $*" >>"$STATE/calls.log"
        [ -f "$STATE/mounted" ]
    """,
}


@dataclass
class Node:
    """One sandboxed host: `root` holds its etc/, var/, stubs/ and state/."""

    root: Path
    os_family: str = "deb"
    containerd_version: str = "1.7.24"
    runs: list[subprocess.CompletedProcess[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for sub in ("etc", "var/lib", "stubs", "state"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # awk and friends resolve through /etc/alternatives on Debian-family hosts.
        if Path("/etc/alternatives").is_dir() and not (self.root / "etc/alternatives").exists():
            shutil.copytree("/etc/alternatives", self.root / "etc/alternatives", symlinks=True)
        self.write("/etc/os-release", OS_RELEASE[self.os_family])
        self.write("/etc/fstab", "# <file system> <mount point> <type> <options> <dump> <pass>\n")
        (self.root / "state/containerd-version").write_text(self.containerd_version)
        for name, body in STUBS.items():
            stub = self.root / "stubs" / name
            stub.write_text("#!/usr/bin/env bash\nset -euo pipefail\n" + textwrap.dedent(body).lstrip())
            stub.chmod(0o755)

    @property
    def env_file(self) -> str:
        return ENV_FILE[self.os_family]

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

    def set_disk(self, fs_type: str | None = None, pt_type: str | None = None) -> None:
        """What blkid finds on the image disk before the step runs."""
        if fs_type:
            (self.root / "state/fs-type").write_text(fs_type)
            (self.root / "state/fs-uuid").write_text("0ld0ld00-0000-4000-8000-000000000001")
        if pt_type:
            (self.root / "state/pt-type").write_text(pt_type)

    def calls(self) -> list[str]:
        log = self.root / "state/calls.log"
        return log.read_text().splitlines() if log.exists() else []

    def count(self, call: str) -> int:
        return sum(1 for line in self.calls() if line == call)

    def run(self, script: str, block_devices: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        """Run a rendered step script as root in this node's private mount namespace."""
        nodes = "".join(f"mkdir -p \"$(dirname '{d}')\" && mknod '{d}' b 259 1 && " for d in block_devices)
        # The real mount (the stub on PATH is for the script) sets up the namespace.
        mount = shutil.which("mount", path="/usr/bin:/bin")
        # set -e, and mknod only once /dev is this namespace's own tmpfs: nothing may touch the host's /dev.
        setup = (
            "set -e; "
            f"{mount} --bind '{self.root}/etc' /etc && {mount} --bind '{self.root}/var' /var && "
            f'{mount} -t tmpfs tmpfs /dev && [ -z "$(ls -A /dev)" ] && mknod -m 666 /dev/null c 1 3 && '
            f"{nodes}exec bash -s"
        )
        env = {**os.environ, "PATH": f"{self.root}/stubs:{os.environ['PATH']}", "STATE": f"{self.root}/state"}
        result = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c", setup],
            input=script,
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=60,
        )
        self.runs.append(result)
        return result
