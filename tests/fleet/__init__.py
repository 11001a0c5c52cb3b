"""The SSH fleet: real sshd test hosts, recording stubs, and an engine that runs the program against them.

Use it (tests under tests/fleet/ get the fixtures from its conftest.py)::

    @pytest.mark.fleet
    def test_something(fleet, fleet_engine):
        hosts = fleet(HostSpec("cp-1"), HostSpec("w-1", os="rocky-9", user="deploy", containerd="2.1.4"))
        values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane"), hosts["w-1"].node()])
        run = fleet_engine.up(values, secret)          # a real run: what changed runs over SSH, outputs flow
        run.raise_error()
        assert step_output(run, "w-1", "containerd") ...   # steps.py: one step's lines inside w-1-prepare
        assert run.step("w-1-kubeadm-join").rc == 0     # StepRun: host, step, rc, stdout (None if secret), times
        assert hosts["w-1"].calls("systemctl") ...      # stub calls in order: tool, argv, t0, t1, rc, hashes
        hosts["w-1"].sessions()                         # SSH sessions the host served, per mlcluster step
        hosts["w-1"].state()                            # packages, held, services, sysctl, swap, units
        hosts["w-1"].set(latency=0.2, fail={"kubeadm join": "boom"})   # behaviour from now on
        hosts["w-1"].run("cat /etc/containerd/config.toml")           # inside the host, as root, no SSH

A host (`hosts.HostSpec`) is: a network namespace whose only address is on the fleet's private /24 in
198.18.0.0/15 (a bridge in the machine's namespace holds .1; nothing is routed anywhere else); a private
mount namespace in which /etc, /var and /root are overlays (writes stay with the host, the machine's own
files are untouched), /run and /home are private, /sys/module is a per-host directory (modprobe's stub
creates entries there), /usr/local/sbin holds the OS tool stubs and /usr/local/bin the binaries of
installed packages (kubeadm, kubectl, containerd appear only after their package is installed; the
machine's own /usr/bin copies are masked); a fake /etc/os-release (`os=`: debian-12/13, ubuntu-22.04/24.04,
rocky/almalinux/rhel-9/10); and its own sshd (per-run ed25519 host key, pinned by the tests; per-run
client key; `user=` other than root gets passwordless sudo; `only_via=` accepts sessions only from that
bastion host). sshd's ForceCommand (`stubs/session.sh`) records every session with the mlcluster step it
runs, then runs the command unchanged; PATH is forced by sshd (SetEnv) and sudo's secure_path already
starts with /usr/local/sbin, so `bash -c` non-login sessions, root or sudo, find the stubs first.

Stubs (`stubs/*.py`, run by the test's Python) behave like the real tools at their boundary and validate
their input: kubeadm (init/join configs against the upstream v1beta4/kubelet schemas, preflight checks,
real output formats, tokens/CA hash/certificate key checked on join, `certs check-expiration`/`renew all`
against certificates a year from the fleet clock; kubectl refuses an expired admin client certificate),
kubectl, systemctl, apt-get/apt-mark/dpkg-query, dnf/rpm, modprobe, sysctl, swapon/swapoff,
containerd --version, curl/gpg. A shared directory per cluster stands in for the API server. Add a stub: a
function in a stubs file, its name in `_stub.STUB_FILES` (and `OS_TOOLS` if it is on PATH from the start,
or a package's `BINARIES`).

`engine.FleetEngine` is the executing mock engine. It follows Pulumi's deployment rules (its docstring
lists them, tests/fleet/test_engine.py checks each on a toy program): a repeated `up` runs only what
changed (an unchanged program opens no SSH session), a failed create is not recorded, the first failure
stops new steps (`FleetEngine(continue_on_error=True)` is `--continue-on-error`), removed resources are
deleted with their recorded inputs, `preview()` runs nothing and marks changed outputs unknown, and errors
read like pulumi-command's. To re-run every step (the idempotency check of "state lost"), use a fresh
engine. `Fleet.advance_clock(seconds)` moves the stubs' clock (token, certificate-key and certificate expiry;
`engine.clock = fleet.now` gives the program the same clock);
`FleetHost.vanish()` kills a host's sshd and marks its Node NotReady.
What a stub call costs: each is a new Python interpreter (a fleet test makes hundreds; the 1+3 upgrade test 570),
about 9 ms to start and as much again for `json`/`re`/`pathlib` that every stub needs. Modules only some calls need
(jsonschema for kubeadm's config checks, PyYAML for the kubelet's config, hashlib, glob) are imported inside those
calls: kubeadm's stub went from ~100 ms to ~50 ms a call, systemctl's from ~40 ms to ~28 ms.

Fleet tests are marked `fleet`; they need root, `ip netns`, `unshare`, sshd and sudo,
and FAIL (FleetUnavailable) when the machine lacks them. MLCLUSTER_FLEET_KEEP=1 keeps the fleet's
directory (logs, host state) for a post-mortem.
"""

from .engine import FleetEngine, FleetRun, RemoteCommandError, StepRun
from .hosts import Fleet, FleetHost, FleetUnavailable, HostSpec

__all__ = [
    "Fleet",
    "FleetEngine",
    "FleetHost",
    "FleetRun",
    "FleetUnavailable",
    "HostSpec",
    "RemoteCommandError",
    "StepRun",
]
