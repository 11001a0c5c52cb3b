"""crictl (cri-tools, installed with kubeadm): `ps` finds the etcd static pod's container, `exec` runs etcdctl
`snapshot save` and etcdutl `snapshot status` in it.

A snapshot is a file holding the cluster's state (the fleet "API server" directory) at that moment, so a restore
test can tell which state it brought back; `status` refuses anything that is not such a file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml
from _stub import Host, fail, main, sha256

ETCD_MANIFEST = Path("/etc/kubernetes/manifests/etcd.yaml")
CONTAINER = "3f1c0e7a9d2b"
TLS_FLAGS = ("--cacert=", "--cert=", "--key=")


def _endpoint() -> str:
    config = yaml.safe_load(Path("/etc/kubernetes/admin.conf").read_text())
    return str(config["clusters"][0]["cluster"]["server"]).removeprefix("https://")


def _etcdctl(host: Host, argv: list[str]) -> int:
    words = [a for a in argv if not a.startswith("-")]
    if words[:2] != ["snapshot", "save"] or len(words) != 3:
        raise fail(f"etcdctl: the stub supports snapshot save only, not {' '.join(argv)}")
    if not all(any(a.startswith(flag) for a in argv) for flag in TLS_FLAGS):
        raise fail(
            '{"level":"warn","msg":"retrying of unary invoker failed","error":"context deadline exceeded"}\n'
            "Error: context deadline exceeded (etcd requires client certificates: --cacert, --cert, --key)"
        )
    with host.cluster(_endpoint()) as cluster:
        content = json.dumps({"etcdSnapshot": True, "taken": time.time(), "cluster": cluster}, sort_keys=True)
    path = Path(words[2])
    path.write_text(content)
    with host.state() as state:
        state.setdefault("snapshots", []).append({"path": str(path), "sha256": sha256(content)})
    print(f"Snapshot saved at {path}")
    return 0


def _etcdutl(argv: list[str]) -> int:
    words = [a for a in argv if not a.startswith("-") and a not in ("simple", "json", "table")]
    if words[:2] != ["snapshot", "status"] or len(words) != 3:
        raise fail(f"etcdutl: the stub supports snapshot status only, not {' '.join(argv)}")
    try:
        data = json.loads(Path(words[2]).read_text())
    except (OSError, ValueError):
        raise fail(f"Error: snapshot file {words[2]} is not a valid snapshot (invalid database)") from None
    if not data.get("etcdSnapshot"):
        raise fail(f"Error: snapshot file {words[2]} is not a valid snapshot (invalid database)")
    text = Path(words[2]).read_text()
    print(f"{sha256(text)[:8]}, {len(data['cluster'].get('history', []))}, {len(data['cluster'])}, {len(text)} B")
    return 0


def crictl(host: Host, argv: list[str]) -> int:
    if argv[:1] == ["ps"]:
        name = (argv[argv.index("--name") + 1] if "--name" in argv else "").strip("^$")
        # A static pod runs while the kubelet finds its manifest (the certificates step parks them to restart).
        if name and (ETCD_MANIFEST.parent / f"{name}.yaml").exists():
            print(CONTAINER if name == "etcd" else sha256(name)[:12])
        return 0
    if argv[:1] == ["exec"] and len(argv) > 2:
        if argv[1] != CONTAINER or not ETCD_MANIFEST.exists():
            raise fail(f'rpc error: code = NotFound desc = container "{argv[1]}" not found')
        tool, rest = argv[2], argv[3:]
        if tool == "etcdctl":
            return _etcdctl(host, rest)
        if tool == "etcdutl":
            return _etcdutl(rest)
        raise fail(f'OCI runtime exec failed: exec: "{tool}": executable file not found in $PATH')
    raise fail(f"crictl: the stub does not know {' '.join(argv)}")


if __name__ == "__main__":
    main({"crictl": crictl})
