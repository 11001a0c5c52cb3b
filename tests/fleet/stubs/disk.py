"""blkid, mkfs, mount, mountpoint for the image disk: nothing touches a real device.

What blkid finds on a device starts from the host setting `disks` ({"/dev/x": {"type": "ext4"}} or
{"pttype": "gpt"}; absent: blank) and then follows what mkfs did (kept in the host's stub state).
`mount <mountpoint>` resolves the device through /etc/fstab (UUID=...) like the real tool and refuses an
unknown UUID; `mountpoint -q` answers from the mounts made so far.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from _stub import Host, fail, main
from selinux import mounted

if TYPE_CHECKING:
    from typing import Any


def _disk(host: Host, state: dict[str, Any], device: str) -> dict[str, Any]:
    disks: dict[str, Any] = state.setdefault("disks", {})
    if device not in disks:
        initial = dict((host.settings.get("disks") or {}).get(device, {}))
        if initial.get("type") and "uuid" not in initial:
            initial["uuid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{host.name}{device}"))
        disks[device] = initial
    return dict(disks[device])


def blkid(host: Host, argv: list[str]) -> int:
    device = argv[-1]
    with host.state() as state:
        disk = _disk(host, state, device)
    if "export" in argv:
        lines = [f"{k.upper()}={disk[k]}" for k in ("uuid", "type", "pttype") if disk.get(k)]
        if not lines:
            return 2
        print("\n".join([f"DEVNAME={device}", *lines]))
        return 0
    tag = argv[argv.index("-s") + 1].lower() if "-s" in argv else "type"
    if not disk.get(tag):
        return 2
    print(disk[tag])
    return 0


def mkfs(host: Host, argv: list[str]) -> int:
    if argv[:1] != ["-t"] or len(argv) != 3:
        raise fail(f"mkfs: the stub expects `mkfs -t TYPE DEVICE`, got {argv}")
    fs_type, device = argv[1], argv[2]
    with host.state() as state:
        disk = _disk(host, state, device)
        if disk.get("type"):
            raise fail(f"mkfs.{fs_type}: {device} contains a {disk['type']} file system (refusing without -f)")
        state["disks"][device] = {"type": fs_type, "uuid": str(uuid.uuid4())}
    return 0


def mkfs_backend(host: Host, argv: list[str]) -> int:
    """mkfs.xfs / mkfs.ext4 only stand for an installed xfsprogs / e2fsprogs (steps call `mkfs -t`)."""
    raise fail(f"the stub expects `mkfs -t TYPE DEVICE`, not a direct call with {argv}")


def mount(host: Host, argv: list[str]) -> int:
    if len(argv) != 1:
        raise fail(f"mount: the stub only mounts an fstab entry by mount point, got {argv}")
    target = argv[0]
    entry = next((line.split() for line in Path("/etc/fstab").read_text().splitlines()
                  if line.split()[1:2] == [target]), None)  # fmt: skip
    if entry is None:
        raise fail(f"mount: {target}: can't find in /etc/fstab.", 1)
    with host.state() as state:
        devices = {d["uuid"]: name for name, d in state.get("disks", {}).items() if d.get("uuid")}
        source = entry[0].removeprefix("UUID=")
        if source not in devices:
            raise fail(f"mount: {target}: can't find UUID={source}.", 32)
        state.setdefault("mounts", {})[target] = devices[source]
        mounted(state, target, devices[source])
    return 0


def mountpoint(host: Host, argv: list[str]) -> int:
    target = argv[-1]
    with host.state() as state:
        return 0 if target in state.get("mounts", {}) else 32


if __name__ == "__main__":
    main(
        {
            "blkid": blkid,
            "mkfs": mkfs,
            "mkfs.xfs": mkfs_backend,
            "mkfs.ext4": mkfs_backend,
            "mount": mount,
            "mountpoint": mountpoint,
        }
    )
