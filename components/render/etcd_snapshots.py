"""Scheduled etcd snapshots: a systemd timer on every control plane running the etcd-snapshot step's script.

The snapshot itself is the `etcd-snapshot` step (also run before every upgrade): `etcdctl snapshot save`
inside the node's etcd static pod (its image ships etcdctl, and /var/lib/etcd is a hostPath, so the file lands
on the node), `snapshot status` to check it, retention by count, an optional copy. The timer runs that same
rendered script, so the scheduled and the pre-upgrade snapshot cannot drift apart.
"""

from __future__ import annotations

from ..config.spec import Spec
from .shell import NodeStep, render_script, rendered_step
from .upgrade import snapshot_settings

# Under /var/lib (the state mlcluster keeps on nodes), run through bash so a noexec /var does not matter.
SNAPSHOT_SCRIPT = "/var/lib/mlcluster/etcd-snapshot.sh"
UNIT = "mlcluster-etcd-snapshot"


RESTORE_SCRIPT = "/var/lib/mlcluster/etcd-restore.sh"
STATIC_POD_MANIFESTS = "/etc/kubernetes/manifests"
ETCD_PEER_PORT = 2380


def initial_cluster(spec: Spec) -> str:
    """etcd's --initial-cluster of the stacked members: kubeadm names each after its node and advertises its peer
    URL on the node's advertise address (components/render/kubeadm.py: localAPIEndpoint)."""
    hosts = {n.name: f"[{n.host}]" if ":" in n.host else n.host for n in spec.control_planes}
    return ",".join(f"{name}=https://{host}:{ETCD_PEER_PORT}" for name, host in hosts.items())


def restore_script(members: str, manifests: str = STATIC_POD_MANIFESTS) -> str:
    """The restore procedure as installed on the control planes: run by hand, with --snapshot (docs/cluster-care.md)."""
    return render_script("etcd-restore", {"INITIAL_CLUSTER": members, "MANIFESTS": manifests})


def snapshot_script(spec: Spec) -> str:
    return render_script("etcd-snapshot", {"TARGET_VERSION": "", **snapshot_settings(spec, "scheduled")})


def timer_step(spec: Spec) -> NodeStep:
    snapshots = spec.etcd_snapshots
    service = "\n".join(
        [
            "[Unit]",
            "Description=mlcluster: etcd snapshot",
            "[Service]",
            "Type=oneshot",
            f"ExecStart=/bin/bash {SNAPSHOT_SCRIPT}",
        ]
    )
    timer = "\n".join(
        [
            "[Unit]",
            "Description=mlcluster: scheduled etcd snapshot",
            "[Timer]",
            f"OnCalendar={snapshots.schedule}",
            "Persistent=true",
            "RandomizedDelaySec=300",
            "[Install]",
            "WantedBy=timers.target",
        ]
    )
    settings = {
        "SNAPSHOTS_ENABLED": str(snapshots.enabled).lower(),
        "SNAPSHOT_SCRIPT": SNAPSHOT_SCRIPT,
        "SNAPSHOT_SCRIPT_TEXT": snapshot_script(spec),
        "RESTORE_SCRIPT": RESTORE_SCRIPT,
        "RESTORE_SCRIPT_TEXT": restore_script(initial_cluster(spec)),
        "UNIT": UNIT,
        "SERVICE_UNIT": service,
        "TIMER_UNIT": timer,
    }
    title = (
        f"etcd snapshots on {snapshots.schedule}, {snapshots.retain} kept"
        if snapshots.enabled
        else "No etcd snapshot timer"
    )
    return rendered_step("etcd-snapshot-timer", title, settings)
