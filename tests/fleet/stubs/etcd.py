"""crictl (cri-tools, installed with kubeadm): `ps` finds the etcd static pod's container, `exec` runs etcdctl
(`snapshot save`, `member list`, `member remove`) in it. The container has the binaries of the image kubeadm runs
(IMAGE_BINARIES): no etcdutl.

Membership is the cluster's `etcdMembers` (kubeadm's stub adds a member at init and at a control plane's join, and
its `reset` removes the node's own, as kubeadm's remove-etcd-member phase does). `member remove` refuses what etcd
refuses: without a quorum of started members the request times out, and a removal that would leave fewer started
members than the remaining cluster's quorum fails (etcdserver's "not enough started members").

A snapshot is a file holding the cluster's state (the fleet "API server" directory) at that moment, so a restore
test can tell which state it brought back, framed as etcd frames one: whole 512-byte blocks, then the sha256 of
those bytes (what the server appends to the stream and etcdctl's save requires).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import yaml
from _stub import Host, fail, main, sha256

ETCD_MANIFEST = Path("/etc/kubernetes/manifests/etcd.yaml")
CONTAINER = "3f1c0e7a9d2b"
USER_CONTAINER = "9a7e5c3b1d0f"
"""A user's container named like a static pod's (in namespace default), on hosts whose `userContainers` name it."""
IMAGE_BINARIES = ("etcd", "etcdctl")
"""What the etcd image holds on its PATH besides the shell: the images kubernetes builds (cluster/images/etcd: its
Makefile installs etcd and etcdctl of each bundled version, its Dockerfile copies `etcd* etcdctl*`) have no etcdutl;
the etcd project's own images, which the Kubernetes image registry serves as its etcd image for tags promoted
since late 2025, add etcdutl.
The stub is the image without it: a script needing etcdutl in the container fails here as on those clusters."""
TLS_FLAGS = ("--cacert=", "--cert=", "--key=")


def _endpoint() -> str:
    config = yaml.safe_load(Path("/etc/kubernetes/admin.conf").read_text())
    return str(config["clusters"][0]["cluster"]["server"]).removeprefix("https://")


TIMED_OUT = '{"level":"warn","msg":"retrying of unary invoker failed","error":"context deadline exceeded"}\n'


def _members(host: Host, argv: list[str], words: list[str]) -> int:
    with host.cluster(_endpoint()) as cluster:
        members = cluster.setdefault("etcdMembers", {})
        started = [n for n, m in members.items() if m.get("started", True)]
        if len(started) < len(members) // 2 + 1:
            raise fail(TIMED_OUT + "Error: context deadline exceeded")
        if words[1] == "list":
            if "simple" not in argv:
                raise fail("etcdctl: the stub writes member list -w simple only")
            for name, member in sorted(members.items()):
                state = "started" if member.get("started", True) else "unstarted"
                print(f"{member['id']}, {state}, {name}, https://{name}:2380, https://{name}:2379, false")
            return 0
        if words[1] != "remove" or len(words) != 3:
            raise fail(f"etcdctl: the stub does not know member {' '.join(words[1:])}")
        named = [n for n, m in members.items() if m["id"] == words[2]]
        if not named:
            raise fail(f"Error: etcdserver: member not found (member {words[2]})")
        rest = len(members) - 1
        if len([n for n in started if n != named[0]]) < rest // 2 + 1:
            raise fail("Error: etcdserver: re-configuration failed due to not enough started members")
        del members[named[0]]
    print(f"Member {words[2]} removed from cluster {sha256(_endpoint())[:16]}")
    return 0


def _health(host: Host, argv: list[str]) -> int:
    """`endpoint health` of this node's own member (--endpoints 127.0.0.1): healthy once its pod is ready."""
    endpoints = [a.split("=", 1)[1] for a in argv if a.startswith("--endpoints=")]
    if endpoints != ["https://127.0.0.1:2379"]:
        raise fail(f"etcdctl: the stub answers endpoint health for this node's member only, not {endpoints}")
    if host.static_pod_ready("etcd"):
        print("https://127.0.0.1:2379 is healthy: successfully committed proposal: took = 2.3ms")
        return 0
    raise fail(
        '{"level":"warn","msg":"health check failed","error":"context deadline exceeded"}\n'
        "https://127.0.0.1:2379 is unhealthy: failed to commit proposal: context deadline exceeded\n"
        "Error: unhealthy cluster"
    )


def _etcdctl(host: Host, argv: list[str]) -> int:
    words = [a for a in argv if not a.startswith("-") and a not in ("simple", "json", "table")]
    if not all(any(a.startswith(flag) for a in argv) for flag in TLS_FLAGS):
        raise fail(
            TIMED_OUT + "Error: context deadline exceeded (etcd requires client certificates: --cacert, --cert, --key)"
        )
    if words[:1] == ["member"] and len(words) > 1:
        return _members(host, argv, words)
    if words == ["endpoint", "health"]:
        return _health(host, argv)
    if words[:2] != ["snapshot", "save"] or len(words) != 3:
        raise fail(f"etcdctl: the stub supports snapshot save and member list/remove only, not {' '.join(argv)}")
    with host.cluster(_endpoint()) as cluster:
        content = json.dumps({"etcdSnapshot": True, "taken": time.time(), "cluster": cluster}, sort_keys=True)
    path = Path(words[2])
    body = content.encode().ljust(-(-len(content) // 512) * 512, b" ")
    framed = body + hashlib.sha256(body).digest()
    if host.settings.get("damagedSnapshots"):
        # A bit flipped on its way to the disk (the test's fault): the hash no longer matches.
        framed = framed[:100] + bytes([framed[100] ^ 1]) + framed[101:]
    # etcdctl writes <path>.part and renames it once the whole stream and its hash arrived.
    partial = path.with_name(path.name + ".part")
    partial.write_bytes(framed)
    partial.rename(path)
    with host.state() as state:
        state.setdefault("snapshots", []).append({"path": str(path), "sha256": sha256(framed)})
    print(f"Snapshot saved at {path}")
    return 0


def crictl(host: Host, argv: list[str]) -> int:
    if argv[:1] == ["ps"]:
        name = (argv[argv.index("--name") + 1] if "--name" in argv else "").strip("^$")
        # Static pods' containers carry their pod's namespace as a label; a user's containers (the host's
        # `userContainers`, e.g. an application's own etcd in its namespace) carry theirs.
        labels = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
        kube_system = all(label == "io.kubernetes.pod.namespace=kube-system" for label in labels)
        users = not labels or all(label == "io.kubernetes.pod.namespace=default" for label in labels)
        # A static pod runs while the kubelet finds its manifest (the certificates step parks them to restart).
        if kube_system and name and (ETCD_MANIFEST.parent / f"{name}.yaml").exists():
            print(CONTAINER if name == "etcd" else sha256(name)[:12])
        if users and name in (host.settings.get("userContainers") or []):
            print(USER_CONTAINER)
        return 0
    if argv[:1] == ["exec"] and len(argv) > 2:
        if argv[1] == USER_CONTAINER:
            raise fail(f"the user's container {USER_CONTAINER} is not etcd: {' '.join(argv[2:4])} failed in it")
        if argv[1] != CONTAINER or not ETCD_MANIFEST.exists():
            raise fail(f'rpc error: code = NotFound desc = container "{argv[1]}" not found')
        tool, rest = argv[2], argv[3:]
        if tool == "etcdctl":
            return _etcdctl(host, rest)
        if tool in IMAGE_BINARIES:
            raise fail(f"{tool}: the stub runs etcdctl only in the etcd container")
        raise fail(f'OCI runtime exec failed: exec: "{tool}": executable file not found in $PATH')
    raise fail(f"crictl: the stub does not know {' '.join(argv)}")


if __name__ == "__main__":
    main({"crictl": crictl})
