"""Chart releases of the platform layers, as pure data (values checked against the pinned upstream)."""

from __future__ import annotations

from ..config.spec import Spec
from .helm import ChartRelease

CALICO_VERSION = "v3.30.3"


def cni_release(spec: Spec) -> ChartRelease:
    return ChartRelease(
        name="tigera-operator",
        chart="tigera-operator",
        repository="https://docs.tigera.io/calico/charts",
        version=CALICO_VERSION,
        namespace="tigera-operator",
        values={
            "installation": {
                "calicoNetwork": {
                    "ipPools": [
                        {"cidr": spec.cluster.pod_cidr, "encapsulation": "VXLANCrossSubnet", "natOutgoing": "Enabled"}
                    ]
                }
            }
        },
    )


def gpu_operator_release(spec: Spec) -> ChartRelease:
    gpu = spec.gpu_operator
    values: dict[str, object] = {
        "driver": {"enabled": gpu.driver != "preinstalled"},
        "toolkit": {"enabled": True},
        "mig": {"strategy": gpu.mig_strategy},
        "dcgmExporter": {"enabled": gpu.dcgm_exporter},
    }
    return ChartRelease(
        name="gpu-operator",
        chart="gpu-operator",
        repository="https://helm.ngc.nvidia.com/nvidia",
        version=gpu.version,
        namespace=gpu.namespace,
        values=values,
        timeout_seconds=gpu.timeout_minutes * 60,
        upstream_chart="gpu-operator",
    )


def kueue_release(spec: Spec) -> ChartRelease:
    return ChartRelease(
        name="kueue",
        chart="oci://registry.k8s.io/kueue/charts/kueue",
        version=spec.kueue.version,
        namespace=spec.kueue.namespace,
        values={},
        upstream_chart="kueue",
    )


def cert_manager_release(spec: Spec) -> ChartRelease:
    return ChartRelease(
        name="cert-manager",
        chart="oci://quay.io/jetstack/charts/cert-manager",
        version=spec.kserve.cert_manager_version,
        namespace="cert-manager",
        values={"crds": {"enabled": True}},
        upstream_chart="cert-manager",
    )


def kserve_releases(spec: Spec) -> list[ChartRelease]:
    kserve = spec.kserve
    return [
        ChartRelease(
            name="kserve-crd",
            chart="oci://ghcr.io/kserve/charts/kserve-crd",
            version=kserve.version,
            namespace=kserve.namespace,
            upstream_chart="kserve-crd",
        ),
        ChartRelease(
            name="kserve-resources",
            chart="oci://ghcr.io/kserve/charts/kserve-resources",
            version=kserve.version,
            namespace=kserve.namespace,
            values={"kserve": {"controller": {"deploymentMode": kserve.deployment_mode}}},
            upstream_chart="kserve-resources",
        ),
    ]


def kubeflow_trainer_release(spec: Spec) -> ChartRelease:
    return ChartRelease(
        name="kubeflow-trainer",
        chart="oci://ghcr.io/kubeflow/charts/kubeflow-trainer",
        version=spec.kubeflow.version,
        namespace=spec.kubeflow.namespace,
        values={},
        upstream_chart="kubeflow-trainer",
    )


def storage_release(spec: Spec) -> ChartRelease:
    storage = spec.storage
    if storage.provisioner == "nfs":
        return ChartRelease(
            name="nfs-subdir-external-provisioner",
            chart="nfs-subdir-external-provisioner",
            repository="https://kubernetes-sigs.github.io/nfs-subdir-external-provisioner/",
            version=storage.version or "4.0.18",
            namespace=storage.namespace,
            values={
                "nfs": {"server": storage.nfs_server, "path": storage.nfs_path or "/"},
                "storageClass": {"defaultClass": True},
            },
            upstream_chart="nfs-subdir-external-provisioner",
        )
    return ChartRelease(
        name="local-path-provisioner",
        chart="oci://ghcr.io/rancher/local-path-provisioner/charts/local-path-provisioner",
        version=storage.version or "0.0.37",
        namespace=storage.namespace,
        values={"storageClass": {"defaultClass": True}},
        upstream_chart="local-path-provisioner",
    )
