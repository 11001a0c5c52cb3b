"""Monitoring settings: Prometheus + Grafana, the metrics adapter behind custom-metric HPAs, GPU fault handling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import checks
from .images import url
from .schema import Problems, Secret, join_path, setting

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
