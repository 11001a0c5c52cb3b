"""Monitoring as pure data: kube-prometheus-stack, the DCGM counters, alert rules, dashboards, the
prometheus-adapter rules behind custom-metric HPAs, the monitors that scrape the Trainer and the inference servers, and
NVSentinel for GPU fault handling.

Every metric an alert or a dashboard reads is in METRIC_SOURCES with the exporter that defines it, so a test
can hold each one to that exporter's pinned list (docs/monitoring.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..config.derived import custom_metric_deployments, fault_mode, monitoring_wanted, platform_tolerations
from ..config.kubelet import KubeletSpec, effective_kubelet
from ..config.monitoring import MonitoringSpec
from ..config.nodes import NodeSpec
from ..config.serving import InferenceDeploymentSpec, KserveSpec
from ..config.spec import Spec
from ..config.storage import StorageSpec
from .endpoints import deployment_labels
from .helm import ChartRelease, tolerating
from .images import containerd_root

PROMETHEUS_COMMUNITY_REPOSITORY = "https://prometheus-community.github.io/helm-charts"
KPS_RELEASE = "kube-prometheus-stack"
PROMETHEUS_SERVICE = f"{KPS_RELEASE}-prometheus"
"""The chart's fullname is the release name when it contains the chart name; Prometheus' Service adds -prometheus."""
ADAPTER_RELEASE = "prometheus-adapter"
NVSENTINEL_RELEASE = "nvsentinel"
GRAFANA_ADMIN_SECRET = "grafana-admin"
REMOTE_WRITE_SECRET = "prometheus-remote-write"
DASHBOARD_LABEL = "grafana_dashboard"
"""The label kube-prometheus-stack's Grafana sidecar loads dashboards ConfigMaps by (value "1")."""
DCGM_METRICS_CONFIG = "mlcluster-dcgm-metrics"
ALERTS_RULE = "mlcluster-alerts"
NODE_LABEL = "node"
"""node-exporter series carry the Kubernetes node name under this label (relabelled from the scrape target)."""
ADAPTER_METRICS_QUERY = "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"

DCGM_DEFAULT_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus (bytes per second)."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus (bytes per second)."),
)
"""The exporter's default-counters.csv (enabled lines): a custom list replaces it, so it starts from all of them."""

DCGM_FAULT_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in ns)."),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in ns)."),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink flow-control CRC errors."),
)
"""Fields the default list leaves commented out that the fault alerts need (ECC, throttling, NVLink)."""

METRIC_SOURCES: dict[str, str] = {
    **{name: "dcgm-exporter" for name, _, _ in (*DCGM_DEFAULT_COUNTERS, *DCGM_FAULT_COUNTERS)},
    "kube_node_status_condition": "kube-state-metrics",
    "kube_node_status_capacity": "kube-state-metrics",
    "kube_deployment_status_replicas_available": "kube-state-metrics",
    "kube_horizontalpodautoscaler_status_current_replicas": "kube-state-metrics",
    "kube_horizontalpodautoscaler_status_desired_replicas": "kube-state-metrics",
    "kube_horizontalpodautoscaler_spec_max_replicas": "kube-state-metrics",
    "node_filesystem_avail_bytes": "node-exporter",
    "node_filesystem_size_bytes": "node-exporter",
    "kueue_pending_workloads": "kueue",
    "kueue_admitted_workloads_total": "kueue",
    "kueue_admitted_active_workloads": "kueue",
    "kueue_cluster_queue_resource_usage": "kueue",
    "kueue_cluster_queue_nominal_quota": "kueue",
}
"""Every metric the alerts and dashboards read, and the exporter that defines it."""


def dcgm_counters_csv() -> str:
    lines = ["# DCGM FIELD, Prometheus metric type, help message (mlcluster: the defaults + fault counters)"]
    lines += [f"{name}, {kind}, {text}" for name, kind, text in (*DCGM_DEFAULT_COUNTERS, *DCGM_FAULT_COUNTERS)]
    return "\n".join(lines) + "\n"


def dcgm_scraped(spec: Spec) -> bool:
    """Prometheus scrapes the DCGM exporter, through the ServiceMonitor the GPU Operator creates."""
    return monitoring_wanted(spec) and spec.gpu_operator.enabled and spec.gpu_operator.dcgm_exporter


def storage_class(storage: StorageSpec) -> str | None:
    """The stack's StorageClass; None: the cluster's default class."""
    return storage.storage_class if storage.enabled else None


KPS_TOLERATION_PATHS = (
    "prometheusOperator.tolerations",
    "prometheusOperator.admissionWebhooks.deployment.tolerations",
    "prometheusOperator.admissionWebhooks.patch.tolerations",
    "prometheus.prometheusSpec.tolerations",
    "alertmanager.alertmanagerSpec.tolerations",
    "grafana.tolerations",
    "kube-state-metrics.tolerations",
    "crds.upgradeJob.tolerations",
)
"""Every controller of kube-prometheus-stack (node-exporter is a DaemonSet that tolerates every taint already)."""


def kube_prometheus_stack_release(spec: Spec) -> ChartRelease:
    monitoring = spec.monitoring
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": monitoring.storage_size}},
    }
    if storage_class(spec.storage) is not None:
        claim["storageClassName"] = storage_class(spec.storage)
    grafana: dict[str, Any] = {"sidecar": {"dashboards": {"enabled": True, "label": DASHBOARD_LABEL}}}
    if monitoring.grafana_admin_password is not None:
        # The password stays in a Secret (components/platform/monitoring.py); the values only name it.
        grafana["admin"] = {
            "existingSecret": GRAFANA_ADMIN_SECRET,
            "userKey": "admin-user",
            "passwordKey": "admin-password",
        }
    prometheus_spec: dict[str, Any] = {
        "retention": monitoring.retention,
        "storageSpec": {"volumeClaimTemplate": {"spec": claim}},
        # Select every ServiceMonitor/PodMonitor/PrometheusRule, not only this release's: the GPU
        # Operator's, Kueue's and mlcluster's own carry no release label.
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
        "ruleSelectorNilUsesHelmValues": False,
    }
    remote = monitoring.remote_write
    if remote is not None:
        target: dict[str, Any] = {"url": remote.url}
        if remote.username is not None:
            # The credentials stay in a Secret (components/platform/monitoring.py); the values only name it.
            target["basicAuth"] = {key: {"name": REMOTE_WRITE_SECRET, "key": key} for key in ("username", "password")}
        prometheus_spec["remoteWrite"] = [target]
    values: dict[str, Any] = {
        "prometheus": {"prometheusSpec": prometheus_spec},
        "grafana": grafana,
        # The node name on node-exporter series (by default only `instance`, the node's IP:port), so alerts
        # can name the node and pick each node's image disk.
        "prometheus-node-exporter": {
            "prometheus": {
                "monitor": {
                    "relabelings": [
                        {
                            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                            "targetLabel": NODE_LABEL,
                            "action": "replace",
                        }
                    ]
                }
            }
        },
    }
    return ChartRelease(
        name=KPS_RELEASE,
        chart="kube-prometheus-stack",
        repository=PROMETHEUS_COMMUNITY_REPOSITORY,
        version=monitoring.version,
        namespace=monitoring.namespace,
        values=tolerating(values, KPS_TOLERATION_PATHS, platform_tolerations(spec)),
        upstream_chart="kube-prometheus-stack",
    )


def prometheus_url(monitoring: MonitoringSpec) -> str:
    """The stack's Prometheus, as KEDA's prometheus trigger (an endpoint's queue query) reaches it."""
    return f"http://{PROMETHEUS_SERVICE}.{monitoring.namespace}.svc:9090"


def adapter_rule(deployment: InferenceDeploymentSpec) -> dict[str, Any]:
    """The prometheus-adapter rule that serves this deployment's HPA metric under the name the HPA asks for."""
    name = str(deployment.autoscaling.metric_name)
    if deployment.autoscaling.metric == "pods":
        # Per-pod series, labelled with namespace and pod by the PodMonitor's scrape (scrape_monitors below).
        series = f'{{__name__="{name}",namespace!="",pod!=""}}'
        resources: dict[str, Any] = {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}}
    else:
        # A queue's length lives wherever its exporter runs: not filtered by the HPA's namespace.
        series = f'{{__name__="{name}"}}'
        resources = {"namespaced": False}
    return {
        "seriesQuery": series,
        "resources": resources,
        "name": {"matches": f"^{name}$", "as": name},
        "metricsQuery": ADAPTER_METRICS_QUERY,
    }


def adapter_rules(spec: Spec) -> dict[str, list[dict[str, Any]]]:
    rules: dict[str, list[dict[str, Any]]] = {"custom": [], "external": []}
    seen: set[tuple[str, str]] = set()
    for deployment in custom_metric_deployments(spec):
        kind = "custom" if deployment.autoscaling.metric == "pods" else "external"
        key = (kind, str(deployment.autoscaling.metric_name))
        if key not in seen:
            seen.add(key)
            rules[kind].append(adapter_rule(deployment))
    return rules


def prometheus_adapter_release(spec: Spec) -> ChartRelease:
    rules = adapter_rules(spec)
    values: dict[str, Any] = {
        "prometheus": {"url": f"http://{PROMETHEUS_SERVICE}.{spec.monitoring.namespace}.svc", "port": 9090},
        # Only what the stack's HPAs ask for; metrics-server keeps serving cpu/memory (resource metrics).
        "rules": {"default": False, "custom": rules["custom"], "external": rules["external"]},
    }
    return ChartRelease(
        name=ADAPTER_RELEASE,
        chart="prometheus-adapter",
        repository=PROMETHEUS_COMMUNITY_REPOSITORY,
        version=spec.monitoring.adapter_version,
        namespace=spec.monitoring.namespace,
        values=tolerating(values, ["tolerations"], platform_tolerations(spec)),
        upstream_chart="prometheus-adapter",
    )


def _monitor(
    kind: str, name: str, monitoring: MonitoringSpec, watched: list[str], body: dict[str, Any]
) -> dict[str, Any]:
    """Monitors live in the monitoring namespace and select their targets' namespaces, so they need not wait
    for the layers that create those namespaces."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": monitoring.namespace},
        "spec": {"namespaceSelector": {"matchNames": watched}, **body},
    }


TRAINER_MANAGER_LABELS = {"app.kubernetes.io/part-of": "kubeflow", "app.kubernetes.io/component": "manager"}
"""The Trainer chart's manager selector labels (templates/manager/_helpers.tpl), release-independent part."""
KSERVE_ISVC_LABEL = "serving.kserve.io/inferenceservice"
KSERVE_METRICS_PORT = 8080
"""KServe's model servers serve /metrics on their HTTP port (the annotation KServe's scraping option writes)."""


def scrape_monitors(spec: Spec) -> list[dict[str, Any]]:
    """ServiceMonitors/PodMonitors for what the charts do not scrape themselves (Kueue's chart does, by values)."""
    monitors = [
        _monitor(
            "PodMonitor",
            f"{d.namespace}-{d.name}",
            spec.monitoring,
            [d.namespace],
            {
                "selector": {"matchLabels": deployment_labels(d)},
                "podMetricsEndpoints": [{"port": "http", "path": "/metrics"}],
            },
        )
        for d in custom_metric_deployments(spec)
        if d.autoscaling.metric == "pods"
    ]
    if spec.kubeflow.enabled:
        # The manager serves metrics over HTTPS behind Kubernetes authn/authz (controller-runtime's filter).
        monitors.append(
            _monitor(
                "ServiceMonitor",
                "kubeflow-trainer",
                spec.monitoring,
                [spec.kubeflow.namespace],
                {
                    "selector": {"matchLabels": TRAINER_MANAGER_LABELS},
                    "endpoints": [
                        {
                            "port": "monitoring-port",
                            "scheme": "https",
                            "path": "/metrics",
                            "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                            "tlsConfig": {"insecureSkipVerify": True},
                        }
                    ],
                },
            )
        )
    namespaces = sorted({e.namespace for e in spec.kserve.endpoints}) if spec.kserve.enabled else []
    if namespaces:
        monitors.append(
            _monitor(
                "PodMonitor",
                "kserve-inference-services",
                spec.monitoring,
                namespaces,
                {
                    "selector": {"matchExpressions": [{"key": KSERVE_ISVC_LABEL, "operator": "Exists"}]},
                    "podMetricsEndpoints": [{"portNumber": KSERVE_METRICS_PORT, "path": "/metrics"}],
                },
            )
        )
    return monitors


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    wait: str
    severity: str
    summary: str


def _image_disk_expr(nodes: tuple[NodeSpec, ...], kubelet: KubeletSpec) -> str:
    """Image filesystem use above the node's kubelet image-GC high threshold, per (mount point, threshold)."""
    groups: dict[tuple[str, int], list[str]] = {}
    for node in nodes:
        root = containerd_root(node) if node.image_disk is not None else "/"
        high = effective_kubelet(kubelet, node.kubelet).image_gc_high_threshold_percent
        groups.setdefault((root, high), []).append(node.name)
    if not groups:
        groups[("/", kubelet.image_gc_high_threshold_percent)] = []
    clauses = []
    for (mount, high), names in sorted(groups.items()):
        selector = f'mountpoint="{mount}"' + (f',{NODE_LABEL}=~"{"|".join(sorted(names))}"' if names else "")
        used = f"1 - node_filesystem_avail_bytes{{{selector}}} / node_filesystem_size_bytes{{{selector}}}"
        clauses.append(f"(100 * ({used}) > {high})")
    return " or ".join(clauses)


def alerts(monitoring: MonitoringSpec, nodes: tuple[NodeSpec, ...], kubelet: KubeletSpec) -> list[Alert]:
    pending = monitoring.pending_alert_minutes
    return [
        Alert(
            "GpuXidError",
            "max by (Hostname, gpu) (max_over_time(DCGM_FI_DEV_XID_ERRORS[10m])) > 0",
            "0m",
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $value }}",
        ),
        Alert(
            "GpuEccDoubleBitErrors",
            "max by (Hostname, gpu) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m])) > 0",
            "0m",
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} has uncorrectable (double-bit) ECC errors",
        ),
        Alert(
            "GpuRowRemapFailure",
            "max by (Hostname, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0",
            "0m",
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} failed to remap a memory row: replace it",
        ),
        Alert(
            "GpuThermalThrottling",
            "max by (Hostname, gpu) (rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m])) > 0",
            "10m",
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is throttled for temperature",
        ),
        Alert(
            "GpuTemperatureHigh",
            "max by (Hostname, gpu) (DCGM_FI_DEV_GPU_TEMP) > 85",
            "5m",
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is at {{ $value }} C",
        ),
        Alert(
            "GpuCountDropped",
            'kube_node_status_capacity{resource="nvidia_com_gpu"}'
            ' < max_over_time(kube_node_status_capacity{resource="nvidia_com_gpu"}[1d])',
            "5m",
            "critical",
            "Node {{ $labels.node }} advertises fewer GPUs than it did today (a GPU fell off the bus?)",
        ),
        Alert(
            "NodeNotReady",
            'kube_node_status_condition{condition="Ready",status="true"} == 0',
            "5m",
            "critical",
            "Node {{ $labels.node }} is not Ready",
        ),
        Alert(
            "ImageDiskAboveGcThreshold",
            _image_disk_expr(nodes, kubelet),
            "15m",
            "warning",
            "Image filesystem {{ $labels.mountpoint }} on {{ $labels.node }} is past the kubelet's image-GC"
            " high threshold: image GC cannot keep up",
        ),
        Alert(
            "KueueWorkloadsPendingTooLong",
            'sum by (cluster_queue) (kueue_pending_workloads{status="active"}) > 0'
            f" unless on (cluster_queue) sum by (cluster_queue) (increase(kueue_admitted_workloads_total[{pending}m]))"
            " > 0",
            f"{pending}m",
            "warning",
            f"ClusterQueue {{{{ $labels.cluster_queue }}}} has had workloads pending for {pending}m and admitted none",
        ),
    ]


def prometheus_rule(monitoring: MonitoringSpec, nodes: tuple[NodeSpec, ...], kubelet: KubeletSpec) -> dict[str, Any]:
    rules = [
        {
            "alert": alert.name,
            "expr": alert.expr,
            "for": alert.wait,
            "labels": {"severity": alert.severity},
            "annotations": {"summary": alert.summary},
        }
        for alert in alerts(monitoring, nodes, kubelet)
    ]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": ALERTS_RULE, "namespace": monitoring.namespace},
        "spec": {"groups": [{"name": "mlcluster", "rules": rules}]},
    }


Panel = tuple[str, str, str]
"""(title, PromQL, legend)."""


def _dashboard(uid: str, title: str, panels: Iterable[Panel]) -> dict[str, Any]:
    built = []
    for i, (panel_title, expr, legend) in enumerate(panels):
        built.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": panel_title,
                "datasource": {"type": "prometheus", "uid": "prometheus"},
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "targets": [{"refId": "A", "expr": expr, "legendFormat": legend}],
            }
        )
    return {"uid": uid, "title": title, "schemaVersion": 39, "tags": ["mlcluster"], "panels": built}


def dashboards(spec: Spec) -> dict[str, dict[str, Any]]:
    """Grafana dashboards by file name: GPUs (the DCGM dashboard's metrics and the fault counters), Kueue, serving."""
    gpus = _dashboard(
        "mlcluster-gpus",
        "GPUs (DCGM)",
        [
            ("GPU utilisation %", "DCGM_FI_DEV_GPU_UTIL", "{{Hostname}} gpu {{gpu}}"),
            ("Tensor pipe active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "{{Hostname}} gpu {{gpu}}"),
            ("Framebuffer used (MiB)", "DCGM_FI_DEV_FB_USED", "{{Hostname}} gpu {{gpu}}"),
            ("Temperature (C)", "DCGM_FI_DEV_GPU_TEMP", "{{Hostname}} gpu {{gpu}}"),
            ("Power (W)", "DCGM_FI_DEV_POWER_USAGE", "{{Hostname}} gpu {{gpu}}"),
            ("SM clock (MHz)", "DCGM_FI_DEV_SM_CLOCK", "{{Hostname}} gpu {{gpu}}"),
            ("Last XID error", "DCGM_FI_DEV_XID_ERRORS", "{{Hostname}} gpu {{gpu}}"),
            ("Double-bit ECC errors (10m)", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m])", "{{Hostname}} gpu {{gpu}}"),
            ("Thermal throttling (ns/s)", "rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m])", "{{Hostname}} gpu {{gpu}}"),
            ("GPUs per node", 'kube_node_status_capacity{resource="nvidia_com_gpu"}', "{{node}}"),
        ],
    )
    kueue = _dashboard(
        "mlcluster-kueue",
        "Kueue: queues and team quotas",
        [
            (
                "Pending workloads",
                "sum by (cluster_queue, status) (kueue_pending_workloads)",
                "{{cluster_queue}} {{status}}",
            ),
            ("Admitted active workloads", "kueue_admitted_active_workloads", "{{cluster_queue}}"),
            (
                "Admissions per minute",
                "sum by (cluster_queue) (rate(kueue_admitted_workloads_total[5m])) * 60",
                "{{cluster_queue}}",
            ),
            (
                "GPU quota used % per team",
                '100 * sum by (cluster_queue) (kueue_cluster_queue_resource_usage{resource="nvidia.com/gpu"})'
                ' / sum by (cluster_queue) (kueue_cluster_queue_nominal_quota{resource="nvidia.com/gpu"})',
                "{{cluster_queue}}",
            ),
        ],
    )
    serving_panels: list[Panel] = [
        (
            "Available replicas",
            'kube_deployment_status_replicas_available{namespace=~"' + _model_namespaces(spec.kserve) + '"}',
            "{{namespace}}/{{deployment}}",
        ),
        (
            "HPA current replicas",
            "kube_horizontalpodautoscaler_status_current_replicas",
            "{{namespace}}/{{horizontalpodautoscaler}}",
        ),
        (
            "HPA desired replicas",
            "kube_horizontalpodautoscaler_status_desired_replicas",
            "{{namespace}}/{{horizontalpodautoscaler}}",
        ),
        (
            "HPA max replicas",
            "kube_horizontalpodautoscaler_spec_max_replicas",
            "{{namespace}}/{{horizontalpodautoscaler}}",
        ),
    ]
    for deployment in custom_metric_deployments(spec):
        name = str(deployment.autoscaling.metric_name)
        serving_panels.append(
            (f"{deployment.namespace}/{deployment.name}: {name} (scales the HPA)", f"sum({name})", name)
        )
    serving = _dashboard("mlcluster-serving", "Serving: replicas and autoscaling", serving_panels)
    return {"gpus.json": gpus, "kueue.json": kueue, "serving.json": serving}


def _model_namespaces(kserve: KserveSpec) -> str:
    names = {e.namespace for e in kserve.endpoints} | {d.namespace for d in kserve.deployments}
    return "|".join(sorted(names)) or ".+"


def dashboard_config_maps(spec: Spec) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"mlcluster-dashboard-{file.removesuffix('.json')}",
                "namespace": spec.monitoring.namespace,
                "labels": {DASHBOARD_LABEL: "1"},
            },
            "data": {file: json.dumps(dashboard, indent=1, sort_keys=True)},
        }
        for file, dashboard in sorted(dashboards(spec).items())
    ]


def nvsentinel_values(spec: Spec) -> dict[str, Any]:
    """observe: health monitors write node conditions and events; cordon: + fault-quarantine, whose rule sets
    cordon on fatal GPU, syslog and CSP events (it needs its datastore); drain: + node-drainer."""
    mode = fault_mode(spec)
    quarantine = mode in ("cordon", "drain")
    return {
        "global": {
            "gpuHealthMonitor": {"enabled": True},
            "syslogHealthMonitor": {"enabled": True},
            "dcgm": {"service": {"endpoint": f"nvidia-dcgm.{spec.gpu_operator.namespace}.svc", "port": 5555}},
            "faultQuarantine": {"enabled": quarantine},
            "mongodbStore": {"enabled": quarantine},
            "nodeDrainer": {"enabled": mode == "drain"},
            # Its controllers (quarantine, drainer, datastore) run where the rest of the platform does.
            "systemNodeTolerations": platform_tolerations(spec),
        }
    }


NVSENTINEL_DATASTORE_TOLERATION_PATHS = ("mongodb-store.mongodb.tolerations", "mongodb-store.job.tolerations")
"""The datastore subchart does not read global.systemNodeTolerations."""


def nvsentinel_release(spec: Spec) -> ChartRelease:
    fault = spec.monitoring.fault_handling
    return ChartRelease(
        name=NVSENTINEL_RELEASE,
        chart="oci://ghcr.io/nvidia/nvsentinel",
        version=fault.version,
        namespace=fault.namespace,
        values=tolerating(nvsentinel_values(spec), NVSENTINEL_DATASTORE_TOLERATION_PATHS, platform_tolerations(spec)),
        upstream_chart="nvsentinel",
    )
