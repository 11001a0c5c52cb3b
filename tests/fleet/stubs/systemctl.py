"""systemctl: unit state per host (units appear when their package is installed)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from _stub import Host, fail, main, sha256

ACTIONS_WITH_UNITS = {"enable", "disable", "start", "stop", "restart", "reload", "is-active", "is-enabled", "status"}


def _unit(name: str) -> str:
    return name.removesuffix(".service")


def _check_start(host: Host, unit: str) -> None:
    """Refuse to start what the real daemon would refuse to start with."""
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
        services: dict[str, Any] = state.setdefault("services", {})
        for unit in units:
            service = services.setdefault(unit, {"enabled": False, "active": False, "starts": 0, "restarts": 0})
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
                    _check_start(host, unit)
                    service["active"] = True
                    service["starts"] += 1
            elif action == "disable":
                service["enabled"] = False
                if now:
                    service["active"] = False
            elif action == "start":
                if not service["active"]:
                    _check_start(host, unit)
                    service["active"] = True
                    service["starts"] += 1
            elif action == "stop":
                service["active"] = False
            elif action in ("restart", "reload"):
                _check_start(host, unit)
                service["active"] = True
                service["restarts"] += 1
    return rc


if __name__ == "__main__":
    main({"systemctl": systemctl})
