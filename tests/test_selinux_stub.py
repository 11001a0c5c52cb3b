"""The fleet's SELinux model (tests/fleet/stubs/selinux.py) held to the policy source it cites: what haproxy_t may
connect to and bind, where keepalived_t may run a check, the labels containerd's root gets. Each case fails if the
stub is made kinder than fedora-selinux/selinux-policy v41.24 or container-selinux v2.250.0."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

STUBS = Path(__file__).resolve().parent / "fleet" / "stubs"


def _module() -> ModuleType:
    sys.path.insert(0, str(STUBS))
    try:
        spec = importlib.util.spec_from_file_location("fleet_selinux_stub", STUBS / "selinux.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(STUBS))


SELINUX = _module()
HAPROXY_CFG = "frontend api\n    bind *:{bind}\nbackend servers\n    server cp-1 10.0.0.1:{port} check\n"


def _host(tmp_path: Path, mode: str | None, state: dict[str, Any] | None = None) -> Any:
    (tmp_path / "db.json").write_text(json.dumps(state or {}))
    return SimpleNamespace(settings={} if mode is None else {"selinux": mode}, state_dir=tmp_path)


def test_the_port_sets_are_the_policys() -> None:
    # corenetwork.te.in: 6443 is in no port type (unreserved_port_t); 8443 is http_port_t.
    assert 6443 not in SELINUX.HAPROXY_CONNECT_PORTS and 6443 not in SELINUX.HAPROXY_BIND_PORTS
    assert 8443 in SELINUX.HAPROXY_CONNECT_PORTS and 8443 in SELINUX.HAPROXY_BIND_PORTS
    # rhcs.te: connect also to commplex_link (4331, 5001), fmpro_internal (5003), rtp_media (5004-5005), which it
    # may not bind.
    assert {4331, 5001, 5003, 5004, 5005} <= SELINUX.HAPROXY_CONNECT_PORTS
    assert not {4331, 5001, 5003, 5004, 5005} & SELINUX.HAPROXY_BIND_PORTS


@pytest.mark.parametrize(
    ("mode", "boolean", "denied"),
    [("Enforcing", False, True), ("Enforcing", True, False), ("Permissive", False, False), (None, False, False)],
)
def test_haproxy_reaches_6443_only_with_the_boolean_on_an_enforcing_host(
    tmp_path: Path, mode: str | None, boolean: bool, denied: bool
) -> None:
    state = {"selinux": {"booleans": {"haproxy_connect_any": boolean}, "labels": {}, "equivalences": {}}}
    host = _host(tmp_path, mode, state)
    seen, refused = SELINUX.haproxy_config_as_allowed(host, HAPROXY_CFG.format(bind=8443, port=6443))
    assert refused is None
    assert ("127.0.0.1:1" in seen) == denied and ("10.0.0.1:6443" in seen) != denied


def test_haproxy_may_not_bind_an_unlabelled_port_without_the_boolean(tmp_path: Path) -> None:
    host = _host(tmp_path, "Enforcing")
    _, refused = SELINUX.haproxy_config_as_allowed(host, HAPROXY_CFG.format(bind=6443, port=6443))
    assert refused is not None and "Permission denied" in refused


@pytest.mark.parametrize(
    ("script", "labels", "runs"),
    [
        ("/etc/keepalived/mlcluster-check-api.sh", {}, False),  # etc_t: read, never executed
        ("/usr/libexec/keepalived/mlcluster-check-api.sh", {}, False),  # made by mkdir -p: bin_t, not relabelled
        (
            "/usr/libexec/keepalived/mlcluster-check-api.sh",
            {"/usr/libexec/keepalived": "keepalived_unconfined_script_exec_t"},
            True,
        ),
    ],
)
def test_keepalived_runs_only_a_check_labelled_for_it(
    tmp_path: Path, script: str, labels: dict[str, str], runs: bool
) -> None:
    state = {"selinux": {"booleans": {}, "labels": labels, "equivalences": {}}}
    conf = f'vrrp_script api {{\n    script "{script}"\n}}\n'
    seen = SELINUX.keepalived_config_as_allowed(_host(tmp_path, "Enforcing", state), conf)
    assert (f'script "{script}"' in seen) == runs and ('script "/bin/false"' in seen) != runs


@pytest.mark.parametrize(
    ("path", "equivalences", "label"),
    [
        ("/var/lib/containerd", {}, "container_var_lib_t"),
        ("/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/12/fs", {}, "container_file_t"),
        ("/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/abc", {}, "container_ro_file_t"),
        ("/mnt/images/io.containerd.content.v1.content", {"/mnt/images": "/var/lib/containerd"}, "container_var_lib_t"),
        ("/mnt/images", {}, "default_t"),
        ("/usr/libexec/keepalived/x.sh", {}, "keepalived_unconfined_script_exec_t"),
    ],
)
def test_file_contexts(path: str, equivalences: dict[str, str], label: str) -> None:
    assert SELINUX.expected_label(path, equivalences) == label


@pytest.mark.parametrize(
    ("mode", "root", "labels", "equivalences", "runs"),
    [
        # containerd made its default root itself: container.if L563's filetrans gives it container_var_lib_t.
        ("Enforcing", None, {}, {}, True),
        # A new filesystem mounted there: no label until restorecon (the kernel's unlabeled SID).
        ("Enforcing", None, {"/var/lib/containerd": "unlabeled_t"}, {}, False),
        ("Enforcing", None, {"/var/lib/containerd": "container_var_lib_t"}, {}, True),
        ("Permissive", None, {"/var/lib/containerd": "unlabeled_t"}, {}, True),
        # A root elsewhere: the equivalence alone labels nothing, restorecon does.
        ("Enforcing", "/mnt/images", {}, {"/mnt/images": "/var/lib/containerd"}, False),
        ("Enforcing", "/mnt/images", {"/mnt/images": "container_var_lib_t"}, {}, True),
        ("Enforcing", "/mnt/images", {"/mnt/images": "unlabeled_t"}, {}, False),
    ],
)
def test_containers_start_only_from_a_root_labelled_container_var_lib_t(  # noqa: PLR0917
    tmp_path: Path, mode: str, root: str | None, labels: dict[str, str], equivalences: dict[str, str], runs: bool
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'version = 3\nroot = "{root}"\n\n[plugins]\n' if root else "version = 3\n")
    state = {"selinux": {"booleans": {}, "labels": labels, "equivalences": equivalences}}
    refused = SELINUX.containers_may_run(_host(tmp_path, mode, state), str(config))
    assert (refused is None) == runs, refused
    if refused is not None:
        assert "permission denied" in refused and "container_var_lib_t" in refused


def test_a_mount_hides_the_label_until_the_filesystem_is_relabelled() -> None:
    state: dict[str, Any] = {}
    SELINUX.mounted(state, "/var/lib/containerd", "/dev/vdb")
    assert SELINUX.containerd_root_label(state, "/var/lib/containerd") == "unlabeled_t"
    state["selinux"]["labels"]["/var/lib/containerd"] = "container_var_lib_t"
    state["disks"]["/dev/vdb"]["rootLabel"] = "container_var_lib_t"  # what restorecon records for a mount point
    SELINUX.mounted(state, "/var/lib/containerd", "/dev/vdb")
    assert SELINUX.containerd_root_label(state, "/var/lib/containerd") == "container_var_lib_t"
