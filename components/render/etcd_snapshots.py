"""Scheduled etcd snapshots: a systemd timer on every control plane running the etcd-snapshot step's script.

The snapshot itself is the `etcd-snapshot` step (also run before every upgrade): `etcdctl snapshot save`
inside the node's etcd static pod (its image ships etcdctl, and /var/lib/etcd is a hostPath, so the file lands
on the node), `snapshot status` to check it, retention by count, an optional copy. The timer runs that same
rendered script, so the scheduled and the pre-upgrade snapshot cannot drift apart.
"""

from __future__ import annotations

from ..config.spec import Spec
from .shell import NodeStep, render_script
from .upgrade import snapshot_settings

# Under /var/lib (the state mlcluster keeps on nodes), run through bash so a noexec /var does not matter.
SNAPSHOT_SCRIPT = "/var/lib/mlcluster/etcd-snapshot.sh"
UNIT = "mlcluster-etcd-snapshot"


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
        "UNIT": UNIT,
        "SERVICE_UNIT": service,
        "TIMER_UNIT": timer,
    }
    title = (
        f"etcd snapshots on {snapshots.schedule}, {snapshots.retain} kept"
        if snapshots.enabled
        else "No etcd snapshot timer"
    )
    return NodeStep(
        name="etcd-snapshot-timer",
        title=title,
        script=render_script("etcd-snapshot-timer", settings),
        settings=settings,
    )
