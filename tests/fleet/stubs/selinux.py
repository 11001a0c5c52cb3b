"""getsebool, setsebool, restorecon, semanage fcontext: a host's SELinux booleans and file labels, and what the
targeted policy lets the daemons the fleet runs for real (haproxy, keepalived) do, read from the policy's source.

The policy (fedora-selinux/selinux-policy v41.24, the RHEL c9s/c10s branches carry the same rules):
- rhcs.te L50 `gen_tunable(haproxy_connect_any, false)`; L662-671 haproxy_t may name_connect only to commplex_link,
  commplex_main, fmpro_internal, http, http_cache and rtp_media ports, and (L664-666) bind commplex_main, http and
  http_cache ports; L682-686 the boolean allows connecting to and binding every TCP port.
- corenetwork.te.in: the TCP ports of those types (L141 commplex_link 4331 5001, L142 commplex_main 5000, L174
  fmpro_internal 5003, L197 http 80 81 443 488 8008 8009 8443 9000, L198 http_cache 8080 8118 8123 10001-10010,
  L332 rtp_media 5004-5005); 6443 is in none (L421: unreserved_port_t).
- keepalived.fc L5 `/usr/libexec/keepalived(/.*)?` keepalived_unconfined_script_exec_t; keepalived.te L146 a
  domtrans into its script domain from that type only; /etc files are etc_t (files.fc L50), which keepalived_t
  may read but not execute (no can_exec / files_exec_etc_files for it).
- container-selinux v2.250.0 container.fc L85 `/var/lib/containerd(/.*)?` container_var_lib_t, L87 snapshots
  container_file_t, L88 sandboxes container_ro_file_t; container.if L563
  `files_var_lib_filetrans($1, container_var_lib_t, dir, "containerd")`: containerd creating its default root in
  /var/lib gets container_var_lib_t; a root elsewhere inherits its directory's type. container.te allows the
  containers' domains nothing on unlabeled_t files (L776, L838-839 are keys and sockets only), which a new
  filesystem's files are until relabelled (no security.selinux attribute: the kernel's unlabeled initial SID).

Host setting `selinux` ("Enforcing" | "Permissive" | "Disabled"; unset: no SELinux tools, as security.py's
getenforce). A file's label is what restorecon last gave it, else its directory's (a new file inherits it), down
to a directory the base file contexts label. Booleans, labels and equivalences live in the host state.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING

from _stub import Host, fail, main

if TYPE_CHECKING:
    from typing import Any

BOOLEAN_DEFAULTS = {"haproxy_connect_any": False, "keepalived_connect_any": False}
"""gen_tunable defaults (rhcs.te L50, keepalived.te L14)."""
_HTTP = [80, 81, 443, 488, 8008, 8009, 8443, 9000]
_HTTP_CACHE = [8080, 8118, 8123, *range(10001, 10011)]
HAPROXY_CONNECT_PORTS = frozenset([4331, 5001, 5000, 5003, *_HTTP, *_HTTP_CACHE, 5004, 5005])
HAPROXY_BIND_PORTS = frozenset([5000, *_HTTP, *_HTTP_CACHE])
FILE_CONTEXTS = (
    (r"/var/lib/containerd/[^/]*/snapshots(/.*)?", "container_file_t"),
    (r"/var/lib/containerd/[^/]*/sandboxes(/.*)?", "container_ro_file_t"),
    (r"/var/lib/containerd(/.*)?", "container_var_lib_t"),
    (r"/usr/libexec/keepalived(/.*)?", "keepalived_unconfined_script_exec_t"),
    (r"/etc/.*", "etc_t"),
    (r"/usr/libexec(/.*)?", "bin_t"),
    (r"/var/lib(/.*)?", "var_lib_t"),
)
"""The file contexts of the paths mlcluster labels, most specific first (the policy's own order of precedence)."""
BASE_DIRECTORIES = ("/usr/libexec", "/var/lib", "/etc", "/var", "/usr", "/mnt", "/srv", "/data")
"""Directories that exist on a host as installed, labelled by the base policy: a new path inherits from them."""
SCRIPT_TYPE = "keepalived_unconfined_script_exec_t"


def _selinux(state: dict[str, Any]) -> dict[str, Any]:
    selinux: dict[str, Any] = state.setdefault("selinux", {"booleans": {}, "labels": {}, "equivalences": {}})
    return selinux


def _mode(host: Host, tool: str) -> str:
    mode = host.settings.get("selinux")
    if mode is None:
        raise fail(f"bash: {tool}: command not found", 127)
    return str(mode)


def expected_label(path: str, equivalences: dict[str, str]) -> str:
    for root, target in equivalences.items():
        if path == root or path.startswith(root.rstrip("/") + "/"):
            path = target + path[len(root.rstrip("/")) :]
            break
    for pattern, label in FILE_CONTEXTS:
        if re.fullmatch(pattern, path):
            return label
    return "default_t"


def label_of(state: dict[str, Any], path: str) -> str:
    """What the file carries now: restorecon's last word, else its directory's (inherited at creation)."""
    selinux = _selinux(state)
    current = path.rstrip("/") or "/"
    while current not in ("", "/"):
        if current in selinux["labels"]:
            return str(selinux["labels"][current])
        if current in BASE_DIRECTORIES:
            return expected_label(current, {})
        current = os.path.dirname(current)
    return "root_t"


UNLABELED = "unlabeled_t"
CONTAINERD_DEFAULT_ROOT = "/var/lib/containerd"
CONTAINERD_ROOT_TYPE = "container_var_lib_t"


def _recorded(state: dict[str, Any], path: str) -> str | None:
    """The label restorecon or a mount gave the path or the nearest directory above it, if any did."""
    labels = _selinux(state)["labels"]
    current = path.rstrip("/") or "/"
    while current not in ("", "/"):
        if current in labels:
            return str(labels[current])
        current = os.path.dirname(current)
    return None


def containerd_root_label(state: dict[str, Any], root: str) -> str:
    """What containerd's root carries: a recorded label (restorecon's, or a fresh mount's unlabeled_t), else the
    filetrans type containerd's own mkdir of its default root gets, else what it inherits."""
    recorded = _recorded(state, root)
    if recorded is not None:
        return recorded
    return CONTAINERD_ROOT_TYPE if root == CONTAINERD_DEFAULT_ROOT else label_of(state, root)


def mounted(state: dict[str, Any], target: str, device: str) -> None:
    """A filesystem mounted on target: its root carries what it was last relabelled to, else no label at all."""
    disk = state.setdefault("disks", {}).setdefault(device, {})
    _selinux(state)["labels"][target] = disk.setdefault("rootLabel", UNLABELED)


def containers_may_run(host: Host, config: str = "/etc/containerd/config.toml") -> str | None:
    """None when containers can start on this host; else why not (enforcing, containerd's root not
    container_var_lib_t: the containers cannot read their snapshots)."""
    if not enforcing(host):
        return None
    root = CONTAINERD_DEFAULT_ROOT
    if os.path.exists(config):
        for line in open(config).read().splitlines():  # noqa: SIM115 (a stub's one read)
            match = re.fullmatch(r'\s*root\s*=\s*"([^"]+)"\s*', line)
            if match:
                root = match.group(1)
                break
            if line.lstrip().startswith("["):
                break  # root is a top-level key: it comes before the first table
    label = containerd_root_label(_peek(host), root)
    if label == CONTAINERD_ROOT_TYPE:
        return None
    return (
        f"failed to create containerd task: OCI runtime create failed: permission denied (SELinux: {root} is {label},"
        f" not {CONTAINERD_ROOT_TYPE})"
    )


def _peek(host: Host) -> dict[str, Any]:
    """The host state without its lock: the daemons' start and reload run inside systemctl's hold of it (state
    writes replace the file whole, so a read never sees half of one)."""
    path = host.state_dir / "db.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _boolean_in(state: dict[str, Any], name: str) -> bool:
    return bool(_selinux(state)["booleans"].get(name, BOOLEAN_DEFAULTS.get(name, False)))


def enforcing(host: Host) -> bool:
    return host.settings.get("selinux") == "Enforcing"


def getsebool(host: Host, argv: list[str]) -> int:
    mode = _mode(host, "getsebool")
    if mode == "Disabled":
        raise fail("getsebool:  SELinux is disabled", 1)
    (name,) = argv
    if name not in BOOLEAN_DEFAULTS:
        raise fail(f"Error getting active value for {name}", 1)
    with host.state() as state:
        print(f"{name} --> {'on' if _boolean_in(state, name) else 'off'}")
    return 0


def setsebool(host: Host, argv: list[str]) -> int:
    mode = _mode(host, "setsebool")
    if mode == "Disabled":
        raise fail("setsebool:  SELinux is disabled.", 1)
    words = [a for a in argv if a != "-P"]
    if "-P" not in argv or len(words) != 2:
        raise fail(f"setsebool: the stub takes -P NAME 1|0 only, not {' '.join(argv)}", 2)
    name, value = words
    if name not in BOOLEAN_DEFAULTS:
        raise fail(f"Boolean {name} is not defined", 1)
    with host.state() as state:
        _selinux(state)["booleans"][name] = value in ("1", "on", "true")
    return 0


def restorecon(host: Host, argv: list[str]) -> int:
    mode = _mode(host, "restorecon")
    flags = "".join(a[1:] for a in argv if a.startswith("-"))
    paths = [a for a in argv if not a.startswith("-")]
    if set(flags) - set("nRv") or len(paths) != 1:
        raise fail(f"restorecon: the stub takes -n -R -v and one path, not {' '.join(argv)}", 2)
    if mode == "Disabled":
        return 0
    (root,) = paths
    if not os.path.exists(root):
        raise fail(f"restorecon: lstat({root}) failed: No such file or directory", 255)
    found = [root]
    if "R" in flags:
        for directory, dirs, files in os.walk(root):
            found += [os.path.join(directory, n) for n in sorted(dirs) + sorted(files)]
    with host.state() as state:
        selinux = _selinux(state)
        for path in found:
            now, wanted = label_of(state, path), expected_label(path, selinux["equivalences"])
            if now == wanted:
                continue
            if "n" in flags:
                print(f"Would relabel {path} from system_u:object_r:{now}:s0 to system_u:object_r:{wanted}:s0")
            else:
                selinux["labels"][path] = wanted
                if path in state.get("mounts", {}):
                    # The label is on the filesystem: the next mount of it finds it.
                    state["disks"][state["mounts"][path]]["rootLabel"] = wanted
                if "v" in flags:
                    print(f"Relabeled {path} from system_u:object_r:{now}:s0 to system_u:object_r:{wanted}:s0")
    return 0


def semanage(host: Host, argv: list[str]) -> int:
    _mode(host, "semanage")
    with host.state() as state:
        equivalences: dict[str, str] = _selinux(state)["equivalences"]
        if argv == ["fcontext", "-l", "-C"]:
            if equivalences:
                print("\nSELinux Local fcontext Equivalence \n")
                for path, target in equivalences.items():
                    print(f"{path} = {target}")
            return 0
        if len(argv) == 5 and argv[:3] == ["fcontext", "-a", "-e"]:
            target, path = argv[3], argv[4]
            if path in equivalences:
                raise fail(f"ValueError: Equivalence class for {path} already exists", 1)
            equivalences[path] = target
            return 0
    raise fail(f"semanage: unsupported by the stub: {' '.join(argv)}", 2)


def haproxy_config_as_allowed(host: Host, text: str) -> tuple[str, str | None]:
    """haproxy.cfg as haproxy_t experiences it: on an enforcing host without haproxy_connect_any, a `server` on a port
    it may not name_connect to is unreachable (its connects are denied: the server stays DOWN) and a `bind` on a port
    it may not name_bind fails. Returns (the config to run, why it cannot start or None)."""
    if not enforcing(host) or _boolean_in(_peek(host), "haproxy_connect_any"):
        return text, None
    lines = []
    for given in text.splitlines():
        line, words = given, given.split()
        if words[:1] == ["bind"] and len(words) > 1:
            port = int(words[1].rsplit(":", 1)[1])
            if port not in HAPROXY_BIND_PORTS:
                return text, f"cannot bind socket (Permission denied) [{words[1]}] (SELinux: haproxy_t name_bind)"
        if words[:1] == ["server"] and len(words) > 2 and ":" in words[2]:
            port = words[2].rsplit(":", 1)[1]
            if port.isdigit() and int(port) not in HAPROXY_CONNECT_PORTS:
                # A denied connect fails at once, as a refused one does: the stand-in is a port nothing listens on.
                line = line.replace(words[2], "127.0.0.1:1", 1)
        lines.append(line)
    return "\n".join(lines) + "\n", None


def keepalived_config_as_allowed(host: Host, text: str) -> str:
    """keepalived.conf as keepalived_t experiences it: on an enforcing host a check script it may not execute (not
    labelled keepalived_unconfined_script_exec_t) fails every run, as a denied exec does."""
    if not enforcing(host):
        return text
    state = _peek(host)
    out = []
    for line in text.splitlines():
        match = re.match(r'(\s*script\s+")([^" ]+)(".*)', line)
        denied = match is not None and label_of(state, match.group(2)) != SCRIPT_TYPE
        out.append(f"{match.group(1)}/bin/false{match.group(3)}" if match and denied else line)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main({"getsebool": getsebool, "setsebool": setsebool, "restorecon": restorecon, "semanage": semanage})
