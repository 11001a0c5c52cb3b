"""Real programs the fleet runs as a host's services, and the API server's stand-in.

- keepalived and haproxy (Debian's packages, installed on the test machine by `.ci/os-packages fleet` and copied
  into the fleet at its start): a host that installed their package runs the real binaries as systemd would, in the
  host's network namespace. `systemctl start` runs the unit's pre-start check where the unit has one (haproxy's
  `-c`), `reload` sends the signal the unit's ExecReload sends, `stop` sends SIGTERM (keepalived then gives the VIP
  up with a priority-0 advert, as on a real host). A power cut kills them with everything else.
- the API server stand-in: what the kubelet runs from /etc/kubernetes/manifests/kube-apiserver.yaml, as far as the
  network sees it: TLS on 6443, `/readyz` `/livez` `/healthz` for anyone (kubeadm's system:public-info-viewer),
  kube-public/cluster-info from the cluster's state once init stored it, 403 for anything else (no credentials
  here). Started when kubeadm's control-plane phase has run and at boot while the manifest is there; kubeadm reset
  stops it.

`python daemons.py resume` (run inside a host after `Fleet.restore`) starts what was running at the snapshot.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from _stub import Host, fail

PIDS = Path("/run/mlcluster-fleet")
LOGS = Path("/var/log/mlcluster-fleet")
APISERVER_MANIFEST = Path("/etc/kubernetes/manifests/kube-apiserver.yaml")
APISERVER_PORT = 6443
REAL_UNITS = {
    "keepalived": ["keepalived", "--dont-fork", "--log-console", "--vrrp", "-f", "/etc/keepalived/keepalived.conf"],
    "haproxy": ["haproxy", "-W", "-db", "-f", "/etc/haproxy/haproxy.cfg"],
}
"""The unit's main process as its Debian unit starts it, in the foreground (systemd's Type=notify/simple)."""
UNIT_FILE_PROGRAMS = ("/usr/bin/docker-registry", "/usr/bin/python3")
"""Programs a unit file a step writes (/etc/systemd/system/<unit>.service) runs for real, as systemd runs its
ExecStart: the air-gap seed's registry (Debian's docker-registry 2.8.2, the CNCF distribution registry) and file
server (python3's http.server), both the test machine's own binaries."""
PRE_START = {"haproxy": ["haproxy", "-c", "-q", "-f", "/etc/haproxy/haproxy.cfg"]}
RELOAD_SIGNAL = {"keepalived": signal.SIGHUP, "haproxy": signal.SIGUSR2}
START_SECONDS = 0.5
"""How long a started daemon must stay up to count as started (a bad config makes both exit at once)."""


def _pid(name: str) -> int | None:
    path = PIDS / f"{name}.pid"
    try:
        pid = int(path.read_text())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
        return None
    return pid


def alive(name: str) -> bool:
    return _pid(name) is not None


def _spawn(name: str, argv: list[str]) -> int:
    PIDS.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    with open(LOGS / f"{name}.log", "ab") as log:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True
        )
    (PIDS / f"{name}.pid").write_text(str(process.pid))
    return process.pid


def _log_tail(name: str) -> str:
    try:
        return " | ".join((LOGS / f"{name}.log").read_text().splitlines()[-5:])
    except FileNotFoundError:
        return ""


def _as_policy_allows(host: Host, unit: str) -> list[str]:
    """The unit's argv, its config seen through the host's SELinux policy (stubs/selinux.py): on an enforcing host
    the daemon runs a copy of its config in which what the policy denies it fails as the denial would."""
    import selinux

    argv = list(REAL_UNITS[unit][1:])
    if not selinux.enforcing(host):
        return argv
    config = Path(argv[argv.index("-f") + 1])
    text = config.read_text()
    if unit == "haproxy":
        text, refused = selinux.haproxy_config_as_allowed(host, text)
        if refused is not None:
            raise fail(f"Job for haproxy.service failed because the main process exited: [ALERT] {refused}")
    else:
        text = selinux.keepalived_config_as_allowed(host, text)
    seen = PIDS / f"{unit}.selinux.cfg"
    PIDS.mkdir(parents=True, exist_ok=True)
    seen.write_text(text)
    argv[argv.index("-f") + 1] = str(seen)
    return argv


def unit_file_argv(unit: str) -> list[str] | None:
    """The ExecStart of a unit file a step wrote, when it runs one of UNIT_FILE_PROGRAMS."""
    import shlex

    try:
        text = Path(f"/etc/systemd/system/{unit}.service").read_text()
    except FileNotFoundError:
        return None
    lines = [line.split("=", 1)[1] for line in text.splitlines() if line.startswith("ExecStart=")]
    if len(lines) != 1:
        return None
    argv = shlex.split(lines[0])
    return argv if argv and argv[0] in UNIT_FILE_PROGRAMS else None


def is_real(unit: str) -> bool:
    return unit in REAL_UNITS or unit_file_argv(unit) is not None


def start(host: Host, unit: str) -> None:
    if alive(unit):
        return
    from_file = unit_file_argv(unit) if unit not in REAL_UNITS else None
    if from_file is not None:
        if not Path(from_file[0]).exists():
            raise fail(f"Job for {unit}.service failed: {from_file[0]}: No such file or directory", 1)
        _spawn(unit, from_file)
        time.sleep(START_SECONDS)
        if not alive(unit):
            raise fail(f"Job for {unit}.service failed because the main process exited: {_log_tail(unit)}")
        return
    binary = host.bin_dir / REAL_UNITS[unit][0]
    if not binary.exists():
        raise fail(f"Job for {unit}.service failed: /usr/sbin/{unit}: No such file or directory", 1)
    if unit in PRE_START:
        check = subprocess.run([str(binary), *PRE_START[unit][1:]], capture_output=True, text=True, check=False)
        if check.returncode != 0:
            raise fail(
                f"Job for {unit}.service failed because the control process exited with error code.\n"
                f"{(check.stdout + check.stderr).strip()}"
            )
    _spawn(unit, [str(binary), *_as_policy_allows(host, unit)])
    time.sleep(START_SECONDS)
    if not alive(unit):
        raise fail(f"Job for {unit}.service failed because the main process exited: {_log_tail(unit)}")


def stop(unit: str, sig: signal.Signals = signal.SIGTERM) -> None:
    pid = _pid(unit)
    if pid is None:
        return
    os.killpg(pid, sig)
    deadline = time.monotonic() + 10
    while alive(unit) and time.monotonic() < deadline:
        time.sleep(0.02)
    (PIDS / f"{unit}.pid").unlink(missing_ok=True)


def reload(host: Host, unit: str) -> None:
    pid = _pid(unit)
    if pid is None:
        raise fail(f"{unit}.service is not active, cannot reload.", 1)
    if unit in PRE_START:
        binary = host.bin_dir / REAL_UNITS[unit][0]
        check = subprocess.run([str(binary), *PRE_START[unit][1:]], capture_output=True, text=True, check=False)
        if check.returncode != 0:
            raise fail(f"Job for {unit}.service failed: {(check.stdout + check.stderr).strip()}")
    _as_policy_allows(host, unit)  # the copy an enforcing host's daemon re-reads
    os.kill(pid, RELOAD_SIGNAL[unit])


def start_apiserver(host: Host) -> None:
    """The kubelet runs the API server's static pod: a TLS listener on 6443 within a few seconds."""
    if alive("kube-apiserver"):
        return
    _spawn("kube-apiserver", [host.python, "-s", str(Path(host.stubs) / "apiserver.py")])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", APISERVER_PORT), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise fail(f"the API server did not listen on {APISERVER_PORT}: {_log_tail('kube-apiserver')}")


def resume(host: Host) -> None:
    """After a restore: what ran at the snapshot runs again (a hibernated host wakes with its processes)."""
    with host.state() as state:
        services = dict(state.get("services", {}))
    for unit in [*REAL_UNITS, *(u for u in services if u not in REAL_UNITS and unit_file_argv(u))]:
        if services.get(unit, {}).get("active"):
            try:
                start(host, unit)
            except Exception as error:
                print(f"{unit}: {error}", file=sys.stderr)
    if APISERVER_MANIFEST.exists() and services.get("kubelet", {}).get("enabled"):
        start_apiserver(host)


if __name__ == "__main__":
    if sys.argv[1:] != ["resume"]:
        raise SystemExit("usage: daemons.py resume")
    resume(Host())
    print(json.dumps({"resumed": True}))
