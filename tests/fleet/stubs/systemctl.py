"""systemctl: unit state per host (units appear when their package is installed or their file is written to
/etc/systemd/system); the kubelet refuses to start when it is newer than an API server of its cluster."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from _stub import Host, fail, main, record_versions, sha256, version_tuple

REAL_UNITS = ("keepalived", "haproxy")
"""Units whose real program runs (stubs/daemons.py), imported only when one of them is asked for; so do unit files a
step wrote whose ExecStart is one of daemons.UNIT_FILE_PROGRAMS."""

if TYPE_CHECKING:
    from typing import Any

ACTIONS_WITH_UNITS = {"enable", "disable", "start", "stop", "restart", "reload", "is-active", "is-enabled", "status"}


def _unit(name: str) -> str:
    return name.removesuffix(".service")


def _kubelet_started(host: Host, state: dict[str, Any]) -> None:
    """The kubelet of a cluster member (re)starts: it refuses to run newer than the oldest kube-apiserver
    (the version-skew policy), else the Node reports the version it now runs."""
    try:
        import yaml

        config = yaml.safe_load(Path("/etc/kubernetes/kubelet.conf").read_text())
        endpoint = str(config["clusters"][0]["cluster"]["server"]).removeprefix("https://")
        name = str(config["users"][0]["name"]).removeprefix("system:node:")
    except (FileNotFoundError, KeyError, IndexError, TypeError):
        return  # not a member of a cluster the fleet knows (a sandboxed node's placeholder kubelet.conf)
    if not host.cluster_exists(endpoint):
        return
    kubelet = str(state.get("packages", {}).get("kubelet", "")).split("-")[0]
    with host.cluster(endpoint) as cluster:
        apiservers = [n["controlPlaneVersion"] for n in cluster["nodes"].values() if n.get("controlPlaneVersion")]
        oldest = min(apiservers, key=version_tuple)
        if version_tuple(kubelet)[:2] > version_tuple(oldest)[:2]:
            raise fail(
                f"Job for kubelet.service failed: kubelet v{kubelet} is newer than kube-apiserver v{oldest}"
                " (version skew policy: the kubelet must not be newer than kube-apiserver)"
            )
        node = cluster["nodes"].get(name)
        if node is not None and node.get("kubeletVersion") != kubelet:
            node["kubeletVersion"] = kubelet
            record_versions(cluster, f"kubelet restart {name}")


def _check_start(host: Host, state: dict[str, Any], unit: str) -> None:
    """Refuse to start what the real daemon would refuse to start with."""
    if unit == "kubelet":
        _kubelet_started(host, state)
    if unit != "containerd":
        return
    try:
        config = Path("/etc/containerd/config.toml").read_text()
    except FileNotFoundError:
        return
    host.record_extra["configSha256"] = sha256(config)
    match = re.search(r"^version\s*=\s*(\d+)", config, re.MULTILINE)
    config_version = int(match.group(1)) if match else 1
    major = int(str(host.settings.get("containerdVersion", "1.7.24")).split(".")[0])
    if major < 2 and config_version > 2:
        raise fail(
            f"Job for containerd.service failed: containerd {major}.x: unsupported config version {config_version}"
        )


def _real(unit: str) -> bool:
    import daemons

    return daemons.is_real(unit)


def _real_unit(host: Host, service: dict[str, Any], unit: str, action: str, now: bool) -> int:
    """keepalived and haproxy: the real programs run (stubs/daemons.py); `active` is whether the process is."""
    import daemons

    if action in ("is-active", "status"):
        return 0 if daemons.alive(unit) else 3
    if action == "is-enabled":
        return 0 if service["enabled"] else 1
    if action == "enable":
        service["enabled"] = True
    if action == "disable":
        service["enabled"] = False
    if action in ("start", "restart") or (action == "enable" and now):
        if action == "restart":
            daemons.stop(unit)
            service["restarts"] += 1
        elif not daemons.alive(unit):
            service["starts"] += 1
        daemons.start(host, unit)
    elif action in ("stop",) or (action == "disable" and now):
        daemons.stop(unit)
    elif action == "reload":
        daemons.reload(host, unit)
    service["active"] = daemons.alive(unit)
    return 0


def systemctl(host: Host, argv: list[str]) -> int:
    quiet = "--quiet" in argv or "-q" in argv
    now = "--now" in argv
    words = [a for a in argv if not a.startswith("-")]
    if not words:
        raise fail("systemctl: this stub needs a command")
    action, units = words[0], [_unit(u) for u in words[1:]]
    if action == "daemon-reload":
        with host.state() as state:
            state["daemonReloads"] = state.get("daemonReloads", 0) + 1
        return 0
    if action not in ACTIONS_WITH_UNITS or not units:
        raise fail(f"systemctl: unsupported by the stub: {' '.join(argv)}")
    rc = 0
    with host.state() as state:
        known = set(state.get("units", []))
        # Units an administrator (or a step) wrote.
        known |= {_unit(p.name) for p in Path("/etc/systemd/system").glob("*.*") if p.is_file()}
        services: dict[str, Any] = state.setdefault("services", {})
        for unit in units:
            service = services.setdefault(unit, {"enabled": False, "active": False, "starts": 0, "restarts": 0})
            if (
                unit in known
                and (unit in REAL_UNITS or Path(f"/etc/systemd/system/{unit}.service").exists())
                and _real(unit)
            ):
                status = _real_unit(host, service, unit, action, now)
                if action in ("is-active", "is-enabled", "status") and not quiet:
                    on = status == 0
                    print(
                        ("active" if on else "inactive")
                        if action != "is-enabled"
                        else ("enabled" if on else "disabled")
                    )
                rc = rc or status
                continue
            if action in ("is-active", "is-enabled", "status"):
                key = "active" if action in ("is-active", "status") else "enabled"
                on = service[key] and unit in known
                if not quiet:
                    print({"active": "active" if on else "inactive", "enabled": "enabled" if on else "disabled"}[key])
                rc = rc or (0 if on else 3 if key == "active" else 1)
                continue
            if unit not in known:
                raise fail(f"Failed to {action} unit: Unit {unit}.service not found.", 5)
            if action == "enable":
                service["enabled"] = True
                if now and not service["active"]:
                    _check_start(host, state, unit)
                    service["active"] = True
                    service["starts"] += 1
            elif action == "disable":
                service["enabled"] = False
                if now:
                    service["active"] = False
            elif action == "start":
                if not service["active"]:
                    _check_start(host, state, unit)
                    service["active"] = True
                    service["starts"] += 1
            elif action == "stop":
                service["active"] = False
            elif action in ("restart", "reload"):
                _check_start(host, state, unit)
                service["active"] = True
                service["restarts"] += 1
    return rc


if __name__ == "__main__":
    main({"systemctl": systemctl})
