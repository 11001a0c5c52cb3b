"""Monitoring settings: Prometheus + Grafana, the metrics adapter behind custom-metric HPAs, GPU fault handling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from . import checks
from .images import url
from .schema import Problems, Secret, join_path, setting
from .serving import InferenceDeploymentSpec, queue_endpoints

if TYPE_CHECKING:
    from .spec import Spec

FaultMode = Literal["off", "observe", "cordon", "drain"]


@dataclass(frozen=True)
class FaultHandlingSpec:
    mode: FaultMode | None = setting(
        None,
        doc="What happens to a GPU node whose health checks fail (NVSentinel, docs/monitoring.md). `observe`: a"
        " node condition and an event only; `cordon`: also cordon it (unschedulable) so new GPU work goes elsewhere;"
        " `drain`: also evict its pods; `off`: nothing installed. Default: cordon on kubeadm clusters, off on"
        " existing ones (managed providers repair nodes themselves).",
    )
    version: str = setting("v1.19.0", doc="NVSentinel chart version.", check=checks.pinned_chart_version)
    namespace: str = setting("nvsentinel", doc="Namespace of the NVSentinel release.", check=checks.k8s_name)


@dataclass(frozen=True)
class RemoteWriteSpec:
    url: str = setting(doc="Remote-write endpoint (Mimir, Thanos Receive, a cloud's managed Prometheus).", check=url)
    username: str | None = setting(None, doc="Basic-auth user (with password).", check=checks.basic_auth_user)
    password: Secret | None = setting(None, secret=True, doc="Basic-auth password (secret).")

    def validate(self, path: str, problems: Problems) -> None:
        if (self.username is None) != (self.password is None):
            missing = "password" if self.password is None else "username"
            problems.error(join_path(path, missing), "is required with the other basic-auth field (give both or none)")


@dataclass(frozen=True)
class MonitoringSpec:
    enabled: bool | None = setting(
        None,
        doc="Install kube-prometheus-stack (Prometheus, Alertmanager, Grafana), GPU/Kueue/serving dashboards and"
        " alerts, and prometheus-adapter. Default: yes on kubeadm clusters, no on existing ones (the provider"
        " usually has its own).",
    )
    version: str = setting("88.5.3", doc="kube-prometheus-stack chart version.", check=checks.pinned_chart_version)
    namespace: str = setting("monitoring", doc="Namespace of the monitoring releases.", check=checks.k8s_name)
    retention: str = setting("15d", doc="How long Prometheus keeps samples.", check=checks.prometheus_duration)
    storage_size: str = setting("100Gi", doc="Prometheus volume, on the stack's StorageClass.", check=checks.size)
    grafana_admin_password: Secret | None = setting(
        None,
        secret=True,
        doc="Grafana admin password (secret; default: the chart generates one into the grafana Secret).",
    )
    adapter_version: str = setting(
        "5.3.0",
        doc="prometheus-adapter chart version: serves kserve.deployments' pods/external HPA metrics.",
        check=checks.pinned_chart_version,
    )
    remote_write: RemoteWriteSpec | None = setting(
        None, doc="Also send samples to a long-term store; its credentials are stack secrets."
    )
    pending_alert_minutes: int = setting(
        30, doc="Alert when Kueue workloads wait longer than this for admission.", check=checks.between(1, 10080)
    )
    fault_handling: FaultHandlingSpec = setting(
        default_factory=FaultHandlingSpec, doc="GPU fault handling: cordon and drain GPU nodes that fail."
    )


def monitoring_wanted(spec: Spec) -> bool:
    if spec.monitoring.enabled is not None:
        return spec.monitoring.enabled
    return spec.cluster.mode == "kubeadm"


def fault_mode(spec: Spec) -> FaultMode:
    mode = spec.monitoring.fault_handling.mode
    if mode is not None:
        return mode
    if spec.cluster.mode != "kubeadm" or not spec.gpu_operator.enabled:
        return "off"
    # Quarantine's datastore takes its certificates from cert-manager, which mlcluster installs with KServe.
    return "cordon" if spec.kserve.enabled else "observe"


def custom_metric_deployments(spec: Spec) -> list[InferenceDeploymentSpec]:
    """The kserve deployments whose HPA scales on a pods or external metric (a metrics adapter serves it)."""
    if not spec.kserve.enabled:
        return []
    return [d for d in spec.kserve.deployments if d.autoscaling.metric in ("pods", "external")]


def validate_monitoring(spec: Spec, problems: Problems) -> None:
    """Rules between monitoring and the rest of the stack: storage, the GPU Operator, custom-metric HPAs."""
    path = "monitoring"
    if monitoring_wanted(spec):
        if not spec.storage.enabled and not spec.cluster.defaults.default_storage_class:
            # A default class installed outside mlcluster serves the claim; without one it stays Pending.
            problems.warn(
                join_path(path, "storageSize"),
                "Prometheus' volume claim names no StorageClass (storage.enabled is false): it binds only if the"
                " cluster has a default class installed some other way; set storage.enabled: true, or"
                " monitoring.enabled: false",
            )
        if spec.gpu_operator.enabled and not spec.gpu_operator.dcgm_exporter:
            problems.warn(
                "gpuOperator.dcgmExporter",
                "is false: the GPU dashboard and the GPU fault alerts get no data",
            )
    else:
        for deployment in custom_metric_deployments(spec):
            i = spec.kserve.deployments.index(deployment)
            problems.warn(
                f"kserve.deployments[{i}].autoscaling.metric",
                f"scales on {deployment.autoscaling.metric_name}, which a metrics adapter must serve: mlcluster"
                " installs prometheus-adapter with monitoring.enabled: true; without it the HPA reports no metric"
                " unless you run an adapter yourself",
            )
    if monitoring_wanted(spec):
        for deployment in custom_metric_deployments(spec):
            # prometheus-adapter serves it from a Prometheus series of the same name (a selector and a regex).
            problem = checks.prometheus_metric_name(str(deployment.autoscaling.metric_name))
            if problem is not None:
                i = spec.kserve.deployments.index(deployment)
                problems.error(
                    f"kserve.deployments[{i}].autoscaling.metricName",
                    f'"{deployment.autoscaling.metric_name}" {problem}: prometheus-adapter (monitoring) serves the HPA'
                    " the Prometheus series of that name",
                )
    _validate_queue_endpoints(spec, problems)
    mode = spec.monitoring.fault_handling.mode
    if mode not in (None, "off") and not spec.gpu_operator.enabled:
        problems.error(
            join_path(path, "faultHandling.mode"),
            f"{mode} reads GPU health from the GPU Operator's DCGM: set gpuOperator.enabled: true, or mode: off",
        )
    elif mode in ("cordon", "drain") and not spec.kserve.enabled:
        problems.error(
            join_path(path, "faultHandling.mode"),
            f"{mode} needs cert-manager (NVSentinel's quarantine datastore takes its certificates from it), which"
            " mlcluster installs with KServe: set kserve.enabled: true, or mode: observe",
        )


def _validate_queue_endpoints(spec: Spec, problems: Problems) -> None:
    """KEDA reads an endpoint's queue from this stack's Prometheus, and takes the external metrics API for itself."""
    queued = queue_endpoints(spec.kserve)
    for endpoint in queued if not monitoring_wanted(spec) else []:
        i = spec.kserve.endpoints.index(endpoint)
        problems.error(
            f"kserve.endpoints[{i}].autoscaling.metric",
            f"{endpoint.autoscaling.metric} scales through KEDA on a Prometheus query, and Prometheus comes with"
            " monitoring: set monitoring.enabled: true, or scale on cpu or memory",
        )
    if not queued or not monitoring_wanted(spec):
        return
    # Both KEDA and prometheus-adapter register v1beta1.external.metrics.k8s.io; a cluster has one of them.
    for deployment in custom_metric_deployments(spec):
        if deployment.autoscaling.metric == "external":
            i = spec.kserve.deployments.index(deployment)
            first = spec.kserve.endpoints.index(queued[0])
            problems.error(
                f"kserve.deployments[{i}].autoscaling.metric",
                f"external needs prometheus-adapter to serve the external metrics API, which KEDA serves for"
                f" kserve.endpoints[{first}] (metric {queued[0].autoscaling.metric}): the API has one server per"
                " cluster; scale this deployment on metric pods, or the endpoint on cpu or memory",
            )
