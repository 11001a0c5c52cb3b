"""Scheduled etcd snapshots: a systemd timer on every control plane running the etcd-snapshot step's script.

The snapshot itself is the `etcd-snapshot` step (also run before every upgrade): `etcdctl snapshot save`
inside the node's etcd static pod (its image ships etcdctl, and /var/lib/etcd is a hostPath, so the file lands
on the node), `snapshot status` to check it, retention by count, an optional copy. The timer runs that same
rendered script, so the scheduled and the pre-upgrade snapshot cannot drift apart.
"""

from __future__ import annotations

from ..config.care import EtcdSnapshotSpec
from ..config.nodes import NodeSpec
from ..config.spec import Spec
from .shell import NodeStep, render_script, rendered_step
from .upgrade import snapshot_settings

# Under /var/lib (the state mlcluster keeps on nodes), run through bash so a noexec /var does not matter.
SNAPSHOT_SCRIPT = "/var/lib/mlcluster/etcd-snapshot.sh"
UNIT = "mlcluster-etcd-snapshot"


RESTORE_SCRIPT = "/var/lib/mlcluster/etcd-restore.sh"
STATIC_POD_MANIFESTS = "/etc/kubernetes/manifests"
ETCD_PEER_PORT = 2380


def initial_cluster(control_planes: tuple[NodeSpec, ...]) -> str:
    """etcd's --initial-cluster of the stacked members: kubeadm names each after its node and advertises its peer
    URL on the node's advertise address (components/render/kubeadm.py: localAPIEndpoint)."""
    hosts = {n.name: f"[{n.host}]" if ":" in n.host else n.host for n in control_planes}
    return ",".join(f"{name}=https://{host}:{ETCD_PEER_PORT}" for name, host in hosts.items())


def restore_script(members: str, manifests: str = STATIC_POD_MANIFESTS) -> str:
    """The restore procedure as installed on the control planes: run by hand, with --snapshot (docs/cluster-care.md)."""
    return render_script("etcd-restore", {"INITIAL_CLUSTER": members, "MANIFESTS": manifests})


def snapshot_script(etcd_snapshots: EtcdSnapshotSpec) -> str:
    return render_script("etcd-snapshot", {"TARGET_VERSION": "", **snapshot_settings(etcd_snapshots, "scheduled")})


def timer_step(etcd_snapshots: EtcdSnapshotSpec, control_planes: tuple[NodeSpec, ...]) -> NodeStep:
    snapshots = etcd_snapshots
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
        "SNAPSHOT_SCRIPT_TEXT": snapshot_script(etcd_snapshots),
        "RESTORE_SCRIPT": RESTORE_SCRIPT,
        "RESTORE_SCRIPT_TEXT": restore_script(initial_cluster(control_planes)),
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


RESTORE_ROLLOUT_STEP = "restore-rollout"
RESTORE_ROLLOUT_MARKER = "/var/lib/mlcluster/rolled-after-restore"
RESTORE_ROLLOUT_TIMEOUT = "5m"
CALICO_OPERATED_NAMESPACES = ("calico-system", "calico-apiserver")
"""Where the tigera-operator runs Calico's own controllers and node agents."""


def restore_rollout_namespaces(spec: Spec) -> list[str]:
    """Where the cluster's controllers run, in the order the program installs them: kube-system (CoreDNS,
    kube-proxy, metrics-server), the CNI, then each platform layer's releases. What `etcdSnapshots.restored` rolls
    after every kubelet restarted (tests/test_etcd_restore.py checks every release the program installs is here)."""
    from ..config.derived import fault_mode, monitoring_wanted
    from .cni import cni_release
    from .gpu_operator import DRA_NAMESPACE
    from .images import spegel_release
    from .inference_gateway import envoy_gateway_release
    from .monitoring import kube_prometheus_stack_release, nvsentinel_release, prometheus_adapter_release
    from .network import network_operator_release
    from .serving import (
        KNATIVE_SERVING_NAMESPACE,
        cert_manager_release,
        keda_release,
        knative_operator_release,
        kserve_releases,
        metrics_server_release,
    )
    from .storage import storage_release
    from .training import kubeflow_trainer_release

    releases: list[object] = []
    namespaces = ["kube-system"]
    if spec.cluster.defaults.installs_cni and spec.cluster.cni != "none":
        releases.append(cni_release(spec.cluster))
        namespaces += [cni_release(spec.cluster).namespace, *CALICO_OPERATED_NAMESPACES]
    if spec.images.spegel.enabled:
        releases.append(spegel_release(spec.images, spec.nodes))
    if spec.storage.enabled:
        releases.append(storage_release(spec))
    if monitoring_wanted(spec):
        releases += [kube_prometheus_stack_release(spec), prometheus_adapter_release(spec)]
    if spec.kserve.enabled:
        knative = knative_operator_release(spec)
        releases += [cert_manager_release(spec), metrics_server_release(spec), knative, keda_release(spec)]
        releases += [*kserve_releases(spec), envoy_gateway_release(spec)]
    namespaces += [r.namespace for r in releases if r is not None]  # type: ignore[attr-defined]
    if spec.kserve.enabled and knative_operator_release(spec) is not None:
        namespaces.append(KNATIVE_SERVING_NAMESPACE)
    if spec.gpu_operator.enabled:
        namespaces.append(spec.gpu_operator.namespace)
        if spec.gpu_operator.dra:
            namespaces.append(DRA_NAMESPACE)
        if fault_mode(spec) != "off":
            namespaces.append(nvsentinel_release(spec).namespace)
    if spec.network.rdma.enabled:
        namespaces.append(network_operator_release(spec).namespace)
    if spec.kueue.enabled:
        namespaces.append(spec.kueue.namespace)
    if spec.kubeflow.enabled:
        namespaces.append(kubeflow_trainer_release(spec).namespace)
    return list(dict.fromkeys(namespaces))


def restore_rollout_step(spec: Spec) -> NodeStep:
    restored = spec.etcd_snapshots.restored
    assert restored, "only after a restore"
    return rendered_step(
        RESTORE_ROLLOUT_STEP,
        f"Roll the controllers, namespace by namespace, after the etcd restore {restored}",
        {
            "RESTORED": restored,
            "RESTORED_MARKER": RESTORE_ROLLOUT_MARKER,
            "NAMESPACES": " ".join(restore_rollout_namespaces(spec)),
            "ROLLOUT_TIMEOUT": RESTORE_ROLLOUT_TIMEOUT,
        },
    )
