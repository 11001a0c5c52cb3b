"""firewall-cmd, ufw, getenforce: a host's firewall and SELinux, as their tools report and change them.

Host settings: `firewalld` ("running" | "stopped"; unset: not installed), `ufw` ("active" | "inactive";
unset: not installed), `selinux` ("Enforcing" | "Permissive" | "Disabled"; unset: no SELinux tools).
firewall-cmd keeps permanent and runtime ports apart (`--reload` makes the permanent set the runtime one)
and refuses everything but `--state` while firewalld is stopped, as the real client does. Opened ports land
in the host state (`firewalld.permanent`, `firewalld.runtime`, `ufw.rules`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from _stub import Host, fail, main

if TYPE_CHECKING:
    from typing import Any

_FIREWALLD_PORT = re.compile(r"[0-9]{1,5}(-[0-9]{1,5})?/(tcp|udp|sctp|dccp)")
_UFW_RULE = re.compile(r"[0-9]{1,5}(:[0-9]{1,5})?/(tcp|udp)|[0-9]{1,5}")
NOT_RUNNING = 252
INVALID_PORT = 14


def _not_installed(tool: str) -> Exception:
    return fail(f"bash: {tool}: command not found", 127)


def _valid_range(text: str) -> bool:
    numbers = [int(n) for n in re.findall(r"[0-9]+", text.split("/", maxsplit=1)[0])]
    return all(1 <= n <= 65535 for n in numbers) and numbers == sorted(numbers)


def firewall_cmd(host: Host, argv: list[str]) -> int:
    setting = host.settings.get("firewalld")
    if setting is None:
        raise _not_installed("firewall-cmd")
    running = setting == "running"
    if argv == ["--state"]:
        print("running" if running else "not running")
        return 0 if running else NOT_RUNNING
    if not running:
        raise fail("FirewallD is not running", NOT_RUNNING)
    permanent = "--permanent" in argv
    actions = [a for a in argv if a != "--permanent"]
    with host.state() as state:
        firewalld: dict[str, Any] = state.setdefault("firewalld", {"permanent": [], "runtime": [], "reloads": 0})
        ports: list[str] = firewalld["permanent" if permanent else "runtime"]
        for action in actions:
            if action == "--reload":
                firewalld["runtime"] = list(firewalld["permanent"])
                firewalld["reloads"] += 1
                print("success")
                continue
            name, _, port = action.partition("=")
            if name not in ("--add-port", "--query-port") or not port:
                raise fail(f"firewall-cmd: unsupported by the stub: {' '.join(argv)}", 2)
            if not _FIREWALLD_PORT.fullmatch(port) or not _valid_range(port):
                raise fail(f"Error: INVALID_PORT: '{port}'", INVALID_PORT)
            if name == "--query-port":
                print("yes" if port in ports else "no")
                return 0 if port in ports else 1
            if port in ports:
                print(f"Warning: ALREADY_ENABLED: {port}")
            else:
                ports.append(port)
            print("success")
    return 0


def ufw(host: Host, argv: list[str]) -> int:
    setting = host.settings.get("ufw")
    if setting is None:
        raise _not_installed("ufw")
    with host.state() as state:
        rules: list[str] = state.setdefault("ufw", {"rules": []})["rules"]
        if argv == ["status"]:
            print(f"Status: {setting}")
            if setting == "active":
                print("\nTo                         Action      From\n--                         ------      ----")
                for rule in rules:
                    print(f"{rule:<27}ALLOW       Anywhere")
            return 0
        if argv == ["show", "added"]:
            print("Added user rules (see 'ufw status' for running firewall):")
            print("\n".join(f"ufw allow {rule}" for rule in rules) if rules else "(None)")
            return 0
        if len(argv) == 2 and argv[0] == "allow":
            rule = argv[1]
            if not _UFW_RULE.fullmatch(rule) or not _valid_range(rule):
                raise fail(f"ERROR: Bad port '{rule}'")
            if rule in rules:
                print("Skipping adding existing rule")
            else:
                rules.append(rule)
                print("Rule added")
            return 0
    raise fail(f"ufw: unsupported by the stub: {' '.join(argv)}", 2)


def getenforce(host: Host, argv: list[str]) -> int:
    mode = host.settings.get("selinux")
    if mode is None:
        raise _not_installed("getenforce")
    print(mode)
    return 0


if __name__ == "__main__":
    main({"firewall-cmd": firewall_cmd, "ufw": ufw, "getenforce": getenforce})
