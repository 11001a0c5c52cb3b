"""modprobe, sysctl, swapon, swapoff: kernel state of one host, in its private view."""

from __future__ import annotations

import os
from pathlib import Path

from _stub import Host, fail, main, sha256

KNOWN_MODULES = {"overlay", "br_netfilter", "nf_conntrack", "ip_vs", "nvidia", "nvidia_uvm"}
BRIDGE_KEYS = ("net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables")
DEFAULTS = {
    "net.ipv4.ip_forward": "0",
    "vm.swappiness": "60",
    "fs.inotify.max_user_instances": "128",
    "fs.inotify.max_user_watches": "8192",
    "vm.max_map_count": "65530",
}


def _exists(key: str) -> bool:
    # The net.bridge keys exist only once br_netfilter is loaded, as on a real kernel.
    if key in BRIDGE_KEYS:
        return os.path.isdir("/sys/module/br_netfilter")
    return key in DEFAULTS


def modprobe(host: Host, argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")]
    for name in names:
        if name not in KNOWN_MODULES:
            raise fail(f"modprobe: FATAL: Module {name} not found in directory /lib/modules/6.1.0-fleet")
        os.makedirs(f"/sys/module/{name}", exist_ok=True)
    return 0


def _set(state: dict[str, object], key: str, value: str) -> None:
    if not _exists(key):
        raise fail(f"sysctl: cannot stat /proc/sys/{key.replace('.', '/')}: No such file or directory", 255)
    values = state.setdefault("sysctl", {})
    assert isinstance(values, dict)
    values[key] = value


def sysctl(host: Host, argv: list[str]) -> int:
    with host.state() as state:
        values = state.setdefault("sysctl", {})
        if argv and argv[0] == "-n":
            for key in argv[1:]:
                if not _exists(key):
                    raise fail(f"sysctl: cannot stat /proc/sys/{key.replace('.', '/')}: No such file or directory", 255)
                print(values.get(key, DEFAULTS.get(key, "0")))
            return 0
        if argv and argv[0] == "--system":
            import glob

            files = sorted(glob.glob("/etc/sysctl.d/*.conf"))
            texts = {f: Path(f).read_text() for f in files}
            host.record_extra["files"] = {f: sha256(text) for f, text in texts.items()}
            for path, text in texts.items():
                print(f"* Applying {path} ...")
                for raw in text.splitlines():
                    line = raw.strip()
                    if not line or line.startswith(("#", ";")):
                        continue
                    key, _, value = line.partition("=")
                    _set(state, key.strip(), value.strip())
                    print(f"{key.strip()} = {value.strip()}")
            return 0
        if argv and argv[0] == "-w":
            for assignment in argv[1:]:
                key, _, value = assignment.partition("=")
                _set(state, key, value)
                print(f"{key} = {value}")
            return 0
    raise fail(f"sysctl: unsupported by the stub: {' '.join(argv)}")


def swapon(host: Host, argv: list[str]) -> int:
    with host.state() as state:
        if "--show" in argv:
            if state.get("swap", False):
                if "--noheadings" not in argv:
                    print("NAME      TYPE SIZE USED PRIO")
                print("/swap.img file   2G   0B   -2")
            return 0
        state["swap"] = True
    return 0


def swapoff(host: Host, argv: list[str]) -> int:
    with host.state() as state:
        state["swap"] = False
    return 0


if __name__ == "__main__":
    main({"modprobe": modprobe, "sysctl": sysctl, "swapon": swapon, "swapoff": swapoff})
