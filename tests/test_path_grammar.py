"""Paths are checked for what the step does with them: the etcd snapshot directories (created, chmod 0700 and
pruned as root), the local-path directory on every node, the NFS export and the checkpoint mount path."""

from __future__ import annotations

import copy
import posixpath
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.config import checks

from .test_config_validation import base
from .test_hostile_input import errors

# key path -> the classes of path it refuses (every key refuses the first group).
ANY_PATH_KEY = [
    ("etcdSnapshots", "directory"),
    ("etcdSnapshots", "copyTo"),
    ("storage", "localPath"),
    ("storage", "nfsPath"),
    ("workloads", "training", "checkpointPath"),
]
NODE_DIRECTORY_KEYS = [("etcdSnapshots", "directory"), ("etcdSnapshots", "copyTo"), ("storage", "localPath")]

NOT_A_PATH = {
    "relative": "var/lib/snapshots",
    "dot-dot": "/var/lib/mlcluster/../../etc",
    "dot": "/var/lib/./mlcluster",
    "double slash": "/var//lib/mlcluster",
    "leading double slash": "//var/lib/mlcluster",
    "over PATH_MAX": "/" + "/".join(["d" * 200] * 21),
    "component over NAME_MAX": "/var/lib/" + "x" * 256,
    "direction override": "/var/lib/\u202eshpans",
    "non-ASCII": "/var/lib/snäpshots",
    "newline": "/var/lib/snapshots\n/etc",
    "tab": "/var/lib/snap\tshots",
}
SYSTEM = {"root": "/", "etc": "/etc", "etc with slash": "/etc/", "var/lib": "/var/lib", "kubelet": "/var/lib/kubelet"}
INSIDE_ETCD = {"etcd data": "/var/lib/etcd", "under etcd": "/var/lib/etcd/snapshots"}


def _with(parts: tuple[str, ...], value: str) -> dict[str, Any]:
    values = copy.deepcopy(base())
    values["storage"] = {"enabled": True, "provisioner": "nfs", "nfsServer": "nfs.lab.example", "nfsPath": "/export"}
    target: Any = values
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value
    return values


def _refused(parts: tuple[str, ...], value: str) -> list[str]:
    key = "mlcluster:" + ".".join(parts) + ":"
    return [line for line in errors(_with(parts, value)) if line.startswith(key)]


@pytest.mark.parametrize("parts", ANY_PATH_KEY, ids=".".join)
@pytest.mark.parametrize("name", NOT_A_PATH)
def test_every_path_key_refuses_what_is_not_one_plain_absolute_path(parts: tuple[str, ...], name: str) -> None:
    assert _refused(parts, NOT_A_PATH[name]), name


@pytest.mark.parametrize("parts", NODE_DIRECTORY_KEYS, ids=".".join)
@pytest.mark.parametrize("value", [*SYSTEM.values(), *INSIDE_ETCD.values()])
def test_a_directory_a_step_takes_over_is_never_the_systems_or_etcds(parts: tuple[str, ...], value: str) -> None:
    [line] = _refused(parts, value)
    assert "system directory" in line or "etcd's data directory" in line, line


def test_the_checkpoint_mount_is_not_the_containers_root() -> None:
    [line] = _refused(("workloads", "training", "checkpointPath"), "/")
    assert "container's root" in line


@pytest.mark.parametrize(
    ("directory", "copy_to", "message"),
    [
        ("/var/lib/s", "/var/lib/s/", "is the snapshot directory itself"),
        ("/var/lib/s", "/var/lib/s/copies", "inside one another"),
        ("/mnt/nfs/etcd/local", "/mnt/nfs/etcd", "inside one another"),
    ],
)
def test_the_copy_target_is_a_directory_of_its_own(directory: str, copy_to: str, message: str) -> None:
    values = _with(("etcdSnapshots", "directory"), directory)
    values["etcdSnapshots"]["copyTo"] = copy_to
    assert any(line.startswith("mlcluster:etcdSnapshots.copyTo:") and message in line for line in errors(values))


def test_the_examples_paths_and_the_defaults_pass() -> None:
    for value in ("/var/lib/mlcluster/etcd-snapshots", "/mnt/etcd-backup", "/opt/local-path-provisioner", "/data/x/"):
        assert checks.node_directory(value) is None, value
    assert checks.mount_path("/checkpoints") is None


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(["/", ".", "a", "é", "\n", " ", "-", "\u202e"]), max_size=24))
def test_an_accepted_path_is_the_path_the_kernel_uses(value: str) -> None:
    if checks.absolute_path(value) is not None:
        return
    assert value.startswith("/") and not value.startswith("//") and value.isascii() and value.isprintable()
    assert posixpath.normpath(value) == checks.directory_key(value)
    assert "/./" not in value + "/" and "/../" not in value + "/"
