"""What a restart does to a fleet host's runtime state, run inside the host once its sshd is back
(`Fleet.reboot`): what lived only in memory is gone, and what the host's files ask for at boot comes back.

- kernel modules: none loaded, then those listed in /etc/modules-load.d/*.conf (systemd-modules-load);
- sysctl: the kernel's defaults, then /etc/sysctl.d/*.conf (systemd-sysctl);
- swap: on when /etc/fstab has an active swap line (swapon -a at boot);
- services: active exactly when enabled (a restarted kubelet reports the version it now runs).
"""

from __future__ import annotations

import glob
import shutil
from pathlib import Path

from _stub import Host, StubExit
from kernel import DEFAULTS, KNOWN_MODULES
from systemctl import REAL_UNITS, _check_start


def _lines(pattern: str) -> list[str]:
    found = []
    for path in sorted(p for p in glob.glob(pattern) if Path(p).is_file()):  # systemd skips dangling links
        for raw in Path(path).read_text().splitlines():
            line = raw.strip()
            if line and not line.startswith(("#", ";")):
                found.append(line)
    return found


def boot(host: Host) -> None:
    for module in Path("/sys/module").iterdir():
        shutil.rmtree(module, ignore_errors=True)
    for name in _lines("/etc/modules-load.d/*.conf"):
        if name in KNOWN_MODULES:
            Path(f"/sys/module/{name}").mkdir(exist_ok=True)
    values = {}  # the kernel's defaults (kernel.DEFAULTS) until a file sets a key
    bridge = Path("/sys/module/br_netfilter").is_dir()
    for line in _lines("/etc/sysctl.d/*.conf"):
        key, _, value = line.partition("=")
        if key.strip() in DEFAULTS or (bridge and key.strip().startswith("net.bridge.")):
            values[key.strip()] = value.strip()
    with host.state() as state:
        state["sysctl"] = values
        state["swap"] = any(
            len(fields) >= 3 and fields[2] == "swap" for fields in (line.split() for line in _lines("/etc/fstab"))
        )
        for unit, service in sorted(state.get("services", {}).items(), key=lambda item: item[0] != "containerd"):
            service["active"] = False
            if unit in REAL_UNITS:
                continue  # started below, once the state is written (their start reads nothing of it)
            if service.get("enabled"):
                try:
                    _check_start(host, state, unit)
                except StubExit:  # a unit that fails to start stays inactive, as systemd leaves it
                    continue
                service["active"] = True
                service["starts"] = service.get("starts", 0) + 1

    _start_processes(host)


def _start_processes(host: Host) -> None:
    """Enabled real services start; the kubelet starts the API server's static pod when its manifest is there."""
    import daemons

    with host.state() as state:
        services = state.get("services", {})
        enabled = [u for u in REAL_UNITS if services.get(u, {}).get("enabled")]
        kubelet = bool(services.get("kubelet", {}).get("active"))
    for unit in enabled:
        try:
            daemons.start(host, unit)
        except StubExit:
            continue
        with host.state() as state:
            state["services"][unit].update(active=True, starts=state["services"][unit].get("starts", 0) + 1)
    if kubelet and daemons.APISERVER_MANIFEST.exists():
        daemons.start_apiserver(host)


if __name__ == "__main__":
    boot(Host())
