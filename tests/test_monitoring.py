"""Monitoring: the releases rendered by the real Helm engine from the pinned chart sources, mlcluster's objects
validated against the Prometheus Operator CRDs of the pinned chart, every PromQL expression parsed and held to the
metrics the pinned exporters define, the HPA -> adapter rule -> PromQL -> scrape chain, GPU fault handling, and
the monitoring section's validation."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from components.config.derived import fault_mode, monitoring_wanted
from components.config.load import spec_and_warnings
from components.config.monitoring import FaultMode
from components.config.schema import ConfigError
from components.config.spec import Spec
from components.render import monitoring
from components.render.endpoints import horizontal_pod_autoscaler, inference_deployment
from components.render.gpu_operator import gpu_operator_release
from components.render.kueue import kueue_release
from components.render.training import kubeflow_trainer_release

from .conftest import load_spec, stack_values
from .helm_render import RenderedChart, render_chart
from .test_config_validation import base, errors_of, parse
from .upstream import UPSTREAM, crd_errors

KPS_VERSION = "88.5.3"
KPS_DIR = UPSTREAM / "charts" / "kube-prometheus-stack" / KPS_VERSION
OPERATOR_CRDS = KPS_DIR / "charts" / "crds" / "crds"
DCGM_DIR = UPSTREAM / "dashboards" / "dcgm-exporter" / "4.5.3-4.8.2"
NVSENTINEL_FIXTURE = "main-42672ae8"
"""The chart source standing in for NVSentinel v1.19.0 (SOURCES.md S9: no tag was reachable)."""


@pytest.fixture(scope="module")
def onprem() -> Spec:
    values, secret = stack_values("onprem")
    return load_spec(values, secret)


def with_fault_mode(spec: Spec, mode: FaultMode | None) -> Spec:
    fault = dataclasses.replace(spec.monitoring.fault_handling, mode=mode)
    return dataclasses.replace(spec, monitoring=dataclasses.replace(spec.monitoring, fault_handling=fault))


def render_release(release: Any, kube_version: str = "1.34.2") -> RenderedChart:
    """Render a ChartRelease from its pinned source."""
    version = NVSENTINEL_FIXTURE if release.upstream_chart == "nvsentinel" else release.version
    return render_chart(
        release.upstream_chart,
        version,
        release.values,
        release=release.name,
        namespace=release.namespace,
        kube_version=kube_version,
    )


@pytest.fixture(scope="module")
def kps(onprem: Spec) -> RenderedChart:
    return render_release(monitoring.kube_prometheus_stack_release(onprem))


# --- CRDs -------------------------------------------------------------------------------------------------------


def operator_crd(kind: str) -> Path:
    name = {"PrometheusRule": "prometheusrules", "ServiceMonitor": "servicemonitors", "PodMonitor": "podmonitors"}
    return OPERATOR_CRDS / f"crd-{name[kind]}.yaml"


def operator_object_errors(document: dict[str, Any]) -> list[str]:
    # crd_errors reads below crds/; an absolute path replaces that base (pathlib's `/`).
    return crd_errors(document, str(operator_crd(document["kind"])))


def mlcluster_monitoring_objects(spec: Spec) -> list[dict[str, Any]]:
    return [monitoring.prometheus_rule(spec.monitoring, spec.nodes, spec.kubelet), *monitoring.scrape_monitors(spec)]


def test_mlcluster_objects_validate_against_the_pinned_prometheus_operator_crds(onprem: Spec) -> None:
    objects = mlcluster_monitoring_objects(onprem)
    assert {o["kind"] for o in objects} == {"PrometheusRule", "PodMonitor", "ServiceMonitor"}
    for document in objects:
        assert operator_object_errors(document) == [], document["metadata"]["name"]


def test_crd_check_rejects_a_misspelt_monitor(onprem: Spec) -> None:
    monitor = copy.deepcopy(monitoring.scrape_monitors(onprem)[0])
    monitor["spec"]["podMetricsEndpoint"] = monitor["spec"].pop("podMetricsEndpoints")
    assert operator_object_errors(monitor) != []


# --- The releases, rendered -------------------------------------------------------------------------------------


@pytest.mark.render
def test_kube_prometheus_stack_renders_sized_for_the_stack(onprem: Spec, kps: RenderedChart) -> None:
    (prometheus,) = kps.of_kind("Prometheus")
    spec = prometheus["spec"]
    assert spec["retention"] == onprem.monitoring.retention == "30d"
    claim = spec["storage"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == onprem.storage.storage_class == "local-path"
    assert claim["resources"]["requests"]["storage"] == "200Gi"
    # Selectors open to every namespace's monitors and rules, not only this release's.
    for selector in ("serviceMonitorSelector", "podMonitorSelector", "ruleSelector"):
        assert spec[selector] == {}, selector
    # node-exporter series carry the node name the image-disk alert selects nodes by.
    (exporter,) = [m for m in kps.of_kind("ServiceMonitor") if "node-exporter" in m["metadata"]["name"]]
    relabelings = exporter["spec"]["endpoints"][0]["relabelings"]
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": monitoring.NODE_LABEL} in [
        {k: r[k] for k in ("sourceLabels", "targetLabel") if k in r} for r in relabelings
    ]
    (image_disk,) = [
        a
        for a in monitoring.alerts(onprem.monitoring, onprem.nodes, onprem.kubelet)
        if a.name == "ImageDiskAboveGcThreshold"
    ]
    assert f'{monitoring.NODE_LABEL}=~"gpu-1|gpu-2|gpu-3|gpu-4"' in image_disk.expr
    # The CRDs the other layers' monitors need come with the chart.
    kinds = {crd["spec"]["names"]["kind"] for crd in kps.crds}
    assert {"ServiceMonitor", "PodMonitor", "PrometheusRule"} <= kinds


@pytest.mark.render
def test_grafana_reads_the_admin_secret_and_loads_the_dashboards(onprem: Spec, kps: RenderedChart) -> None:
    grafana = kps.named("Deployment", "kube-prometheus-stack-grafana")
    text = yaml.safe_dump(grafana)
    assert monitoring.GRAFANA_ADMIN_SECRET in text
    assert "admin-password" in text
    containers = grafana["spec"]["template"]["spec"]["containers"]
    sidecar = next(c for c in containers if "dashboard" in c["name"])
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert env["LABEL"] == monitoring.DASHBOARD_LABEL
    for config_map in monitoring.dashboard_config_maps(onprem):
        assert config_map["metadata"]["labels"] == {monitoring.DASHBOARD_LABEL: "1"}
        assert config_map["metadata"]["namespace"] == onprem.monitoring.namespace


@pytest.mark.render
def test_the_adapter_queries_the_prometheus_service_the_stack_creates(onprem: Spec, kps: RenderedChart) -> None:
    release = monitoring.prometheus_adapter_release(onprem)
    service = kps.named("Service", monitoring.PROMETHEUS_SERVICE)
    assert service["metadata"]["namespace"] == onprem.monitoring.namespace
    url = f"http://{monitoring.PROMETHEUS_SERVICE}.{onprem.monitoring.namespace}.svc"
    assert release.values["prometheus"] == {"url": url, "port": 9090}
    assert 9090 in [p["port"] for p in service["spec"]["ports"]]
    adapter = render_release(release)
    config = yaml.safe_load(adapter.named("ConfigMap", "prometheus-adapter")["data"]["config.yaml"])
    assert config["rules"] == monitoring.adapter_rules(onprem)["custom"]
    args = " ".join(
        adapter.named("Deployment", "prometheus-adapter")["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    assert f"--prometheus-url={url}:9090" in args
    assert adapter.named("APIService", "v1beta1.custom.metrics.k8s.io")


@pytest.mark.render
def test_gpu_operator_is_scraped_with_the_fault_counters(onprem: Spec) -> None:
    rendered = render_release(gpu_operator_release(onprem, driver_enabled=True))
    config_map = rendered.named("ConfigMap", monitoring.DCGM_METRICS_CONFIG)
    assert config_map["data"]["dcgm-metrics.csv"] == monitoring.dcgm_counters_csv()
    (policy,) = rendered.of_kind("ClusterPolicy")
    exporter = policy["spec"]["dcgmExporter"]
    assert exporter["config"]["name"] == monitoring.DCGM_METRICS_CONFIG
    assert exporter["serviceMonitor"]["enabled"] is True
    # NVSentinel's health monitor needs the standalone hostengine (faultHandling cordon in the example).
    assert policy["spec"]["dcgm"]["enabled"] is True


@pytest.mark.render
def test_kueue_renders_its_service_monitor_only_with_monitoring(onprem: Spec) -> None:
    rendered = render_release(kueue_release(onprem))
    (monitor,) = rendered.of_kind("ServiceMonitor")
    assert operator_object_errors(monitor) == []
    off = dataclasses.replace(onprem, monitoring=dataclasses.replace(onprem.monitoring, enabled=False))
    assert render_release(kueue_release(off)).of_kind("ServiceMonitor") == []


@pytest.mark.render
def test_the_trainer_monitor_selects_the_trainer_service(onprem: Spec) -> None:
    rendered = render_release(kubeflow_trainer_release(onprem))
    (monitor,) = [m for m in monitoring.scrape_monitors(onprem) if m["metadata"]["name"] == "kubeflow-trainer"]
    wanted = monitor["spec"]["selector"]["matchLabels"]
    port = monitor["spec"]["endpoints"][0]["port"]
    matching = [
        s
        for s in rendered.of_kind("Service")
        if wanted.items() <= s["metadata"].get("labels", {}).items()
        and port in [p.get("name") for p in s["spec"]["ports"]]
    ]
    assert len(matching) == 1
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [matching[0]["metadata"]["namespace"]]


@pytest.mark.render
@pytest.mark.parametrize(
    ("mode", "present", "absent"),
    [
        ("observe", {"platform-connectors", "gpu-health-monitor-dcgm-4.x"}, {"fault-quarantine", "node-drainer"}),
        ("cordon", {"platform-connectors", "fault-quarantine"}, {"node-drainer"}),
        ("drain", {"platform-connectors", "fault-quarantine", "node-drainer"}, set()),
    ],
)
def test_fault_handling_goes_as_far_as_the_mode(
    onprem: Spec, mode: FaultMode, present: set[str], absent: set[str]
) -> None:
    rendered = render_release(monitoring.nvsentinel_release(with_fault_mode(onprem, mode)))
    workloads = {o["metadata"]["name"] for o in rendered.objects if o["kind"] in ("Deployment", "DaemonSet")}
    assert present <= workloads
    assert not absent & workloads
    # The health monitor reads the GPU Operator's hostengine Service.
    monitor_text = yaml.safe_dump(rendered.named("DaemonSet", "gpu-health-monitor-dcgm-4.x"))
    assert f"nvidia-dcgm.{onprem.gpu_operator.namespace}.svc" in monitor_text


# --- PromQL: parses, and names only metrics the pinned exporters define ------------------------------------------


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (parsing it: a syntax error raises)."""
    names: set[str] = set()

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                names.add(node.name)
            names.update(m.value for m in node.matchers.matchers if m.name == "__name__")
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def all_expressions(spec: Spec) -> Iterator[tuple[str, str]]:
    for alert in monitoring.alerts(spec.monitoring, spec.nodes, spec.kubelet):
        yield f"alert {alert.name}", alert.expr
    for file, dashboard in monitoring.dashboards(spec).items():
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                yield f"{file}: {panel['title']}", target["expr"]


@cache
def dcgm_csv_fields() -> tuple[frozenset[str], frozenset[str]]:
    """(enabled, commented-out) field names of the exporter's pinned default-counters.csv."""
    enabled, commented = set(), set()
    for line in (DCGM_DIR / "default-counters.csv").read_text().splitlines():
        match = re.match(r"^\s*(#\s*)?(DCGM_\w+)\s*,", line)
        if match:
            (commented if match.group(1) else enabled).add(match.group(2))
    return frozenset(enabled), frozenset(commented)


@cache
def kube_prometheus_stack_text() -> str:
    """The pinned chart's own rules and dashboards: the kube-state-metrics/node-exporter series they use exist."""
    parts = [p.read_text() for p in (KPS_DIR / "templates").rglob("*") if p.is_file()]
    return "\n".join(parts)


def unknown_metrics(names: set[str], spec: Spec) -> list[str]:
    """Names no pinned exporter defines (the HPAs' own custom metrics are the inference servers')."""
    enabled, _ = dcgm_csv_fields()
    dcgm = enabled | {name for name, _, _ in monitoring.DCGM_FAULT_COUNTERS}
    custom = {str(d.autoscaling.metric_name) for d in spec.kserve.deployments if d.autoscaling.metric_name}
    unknown = []
    for name in sorted(names):
        source = monitoring.METRIC_SOURCES.get(name)
        if name in custom:
            continue
        if source == "dcgm-exporter" and name in dcgm:
            continue
        if source in ("kube-state-metrics", "node-exporter") and re.search(
            rf"\b{name}\b", kube_prometheus_stack_text()
        ):
            continue
        if source == "kueue":
            # Kueue's metric names (docs/reference/metrics.md at v0.19.2) are not among the fixtures; they are
            # held to METRIC_SOURCES alone.
            continue
        unknown.append(name)
    return unknown


def test_every_expression_parses_and_names_only_defined_metrics(onprem: Spec) -> None:
    seen: set[str] = set()
    for where, expr in all_expressions(onprem):
        names = metric_names(expr)
        assert names, f"{where}: selects no metric"
        assert unknown_metrics(names, onprem) == [], where
        seen |= names
    assert {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "kueue_pending_workloads"} <= seen


def test_metric_check_rejects_a_field_the_exporter_does_not_export(onprem: Spec) -> None:
    # Commented out in default-counters.csv and not in mlcluster's counters list: never exported.
    assert unknown_metrics({"DCGM_FI_DEV_RETIRED_PENDING"}, onprem) == ["DCGM_FI_DEV_RETIRED_PENDING"]
    assert unknown_metrics({"kube_node_made_up"}, onprem) == ["kube_node_made_up"]
    with pytest.raises(ValueError):
        metric_names("sum(rate(DCGM_FI_DEV_XID_ERRORS[5m])")


def test_the_counters_list_keeps_the_defaults_and_adds_only_real_fields() -> None:
    enabled, commented = dcgm_csv_fields()
    assert {name for name, _, _ in monitoring.DCGM_DEFAULT_COUNTERS} == enabled
    extras = {name for name, _, _ in monitoring.DCGM_FAULT_COUNTERS}
    assert extras <= commented
    assert not extras & enabled


# --- The queue-length HPA chain ---------------------------------------------------------------------------------


def substitute(query: str, metric: str, matchers: str, group_by: str) -> str:
    """prometheus-adapter's template substitution for one request."""
    return (
        query.replace("<<.Series>>", metric).replace("<<.LabelMatchers>>", matchers).replace("<<.GroupBy>>", group_by)
    )


def chain_problems(
    spec: Spec, rules: dict[str, list[dict[str, Any]]] | None = None, monitors: list[dict[str, Any]] | None = None
) -> list[str]:
    """HPA metric -> adapter rule -> PromQL -> the series a scrape would hold, for every custom-metric HPA
    (the adapter rules and monitors planned for the spec unless given)."""
    problems = []
    rules = monitoring.adapter_rules(spec) if rules is None else rules
    monitors = monitoring.scrape_monitors(spec) if monitors is None else monitors
    for deployment in spec.kserve.deployments:
        (metric,) = horizontal_pod_autoscaler(deployment)["spec"]["metrics"]
        if metric["type"] not in ("Pods", "External"):
            continue
        name = metric["pods" if metric["type"] == "Pods" else "external"]["metric"]["name"]
        kind = "custom" if metric["type"] == "Pods" else "external"
        served = [r for r in rules[kind] if re.fullmatch(r["name"]["matches"], name) and r["name"]["as"] == name]
        if len(served) != 1:
            problems.append(f"{deployment.name}: {len(served)} {kind} adapter rules serve {name}")
            continue
        (rule,) = served
        if metric_names(rule["seriesQuery"]) != {name}:
            problems.append(f"{deployment.name}: the rule's seriesQuery does not select {name}")
        if metric["type"] == "Pods":
            matchers = f'namespace="{deployment.namespace}",pod=~"{deployment.name}-.*"'
            query = substitute(rule["metricsQuery"], name, matchers, "pod")
        else:
            query = substitute(rule["metricsQuery"], name, "", "")
        if metric_names(query) != {name}:
            problems.append(f"{deployment.name}: the rule's metricsQuery does not read {name}")
        if metric["type"] == "Pods":
            problems += _scrape_problems(deployment, rule, monitors)
    return problems


def _scrape_problems(deployment: Any, rule: dict[str, Any], monitors: list[dict[str, Any]]) -> list[str]:
    """A PodMonitor scrapes the deployment's pods on a port they declare; its series carry the labels (namespace,
    pod) the rule maps to resources, which the Prometheus Operator adds to every PodMonitor target."""
    pod = inference_deployment(deployment)["spec"]["template"]
    ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    scraping = [
        m
        for m in monitors
        if m["kind"] == "PodMonitor"
        and deployment.namespace in m["spec"]["namespaceSelector"]["matchNames"]
        and m["spec"]["selector"].get("matchLabels", {}).items() <= pod["metadata"]["labels"].items()
        and any(e.get("port") in ports for e in m["spec"]["podMetricsEndpoints"])
    ]
    problems = [] if scraping else [f"{deployment.name}: no PodMonitor scrapes its pods"]
    if set(rule["resources"]["overrides"]) != {"namespace", "pod"}:
        problems.append(f"{deployment.name}: the rule maps labels the scrape does not add")
    return problems


def test_the_onprem_queue_length_hpa_is_served_end_to_end(onprem: Spec) -> None:
    (deployment,) = [d for d in onprem.kserve.deployments if d.autoscaling.metric == "pods"]
    assert deployment.autoscaling.metric_name == "tgi_queue_size"
    assert chain_problems(onprem) == []


def external_queue_spec(onprem: Spec) -> Spec:
    values, secret = stack_values("onprem")
    values["kserve"]["deployments"].append(
        {
            "name": "batch-scorer",
            "image": "registry.example/scorer:3.2",
            "autoscaling": {"metric": "external", "metricName": "rabbitmq_queue_messages_ready", "target": 30},
        }
    )
    return load_spec(values, secret)


@pytest.mark.render
def test_an_external_queue_metric_is_served_without_a_namespace_filter(onprem: Spec) -> None:
    spec = external_queue_spec(onprem)
    (rule,) = monitoring.adapter_rules(spec)["external"]
    assert rule["resources"] == {"namespaced": False}
    assert chain_problems(spec) == []
    rendered = render_release(monitoring.prometheus_adapter_release(spec))
    assert rendered.named("APIService", "v1beta1.external.metrics.k8s.io")


def test_the_chain_check_catches_each_broken_link(onprem: Spec) -> None:
    rules = monitoring.adapter_rules(onprem)
    monitors = monitoring.scrape_monitors(onprem)
    # The adapter serves another name than the HPA asks for.
    renamed = copy.deepcopy(rules)
    renamed["custom"][0]["name"]["as"] = "tgi_queue_length"
    assert chain_problems(onprem, rules=renamed) == ["chat-tgi: 0 custom adapter rules serve tgi_queue_size"]
    # The rule's series query selects another metric.
    wrong_series = copy.deepcopy(rules)
    wrong_series["custom"][0]["seriesQuery"] = '{__name__="tgi_queue_length",namespace!="",pod!=""}'
    assert chain_problems(onprem, rules=wrong_series) == [
        "chat-tgi: the rule's seriesQuery does not select tgi_queue_size"
    ]
    # Nothing scrapes the pods, so Prometheus holds no such series.
    unscraped = [m for m in monitors if m["metadata"]["name"] != "models-chat-tgi"]
    assert chain_problems(onprem, monitors=unscraped) == ["chat-tgi: no PodMonitor scrapes its pods"]
    # A monitor on a port the pods do not declare scrapes nothing.
    wrong_port = copy.deepcopy(monitors)
    for monitor in wrong_port:
        for endpoint in monitor["spec"].get("podMetricsEndpoints", []):
            endpoint["port"] = "metrics"
    assert chain_problems(onprem, monitors=wrong_port) == ["chat-tgi: no PodMonitor scrapes its pods"]


# --- The program ------------------------------------------------------------------------------------------------


def release_of(run: Any, name: str) -> Any:
    (release,) = [r for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.name == name]
    return release


def test_monitoring_comes_before_the_layers_whose_charts_use_its_crds(run_stack: Any) -> None:
    run = run_stack("onprem")
    stack = release_of(run, "kube-prometheus-stack")
    # Kueue's chart renders a ServiceMonitor; the GPU Operator creates one: both need the CRDs first.
    for name in ("kueue", "gpu-operator", "prometheus-adapter"):
        assert stack.urn in release_of(run, name).depends_on, name
    assert release_of(run, "local-path-provisioner").urn in stack.depends_on
    # NVSentinel reads the operator's DCGM hostengine.
    assert release_of(run, "gpu-operator").urn in release_of(run, "nvsentinel").depends_on
    assert release_of(run, "nvsentinel").inputs["version"] == "v1.19.0"


def secret_of(run: Any, name: str) -> Any:
    (secret,) = [r for r in run.of_type("kubernetes:core/v1:Secret") if r.name == name]
    return secret


def test_the_grafana_password_and_remote_write_credentials_are_secrets(run_stack: Any) -> None:
    values, secret_keys = stack_values("onprem")
    values["monitoring"]["remoteWrite"] = {
        "url": "https://metrics.example.internal/api/v1/push",
        "username": "ml-onprem",
        "password": "REMOTE-WRITE-PASSWORD",
    }
    run = run_stack("onprem", values=values, secret=secret_keys)
    grafana_secret = secret_of(run, monitoring.GRAFANA_ADMIN_SECRET)
    assert grafana_secret.inputs["stringData"]["admin-password"] == "[secret]"
    remote_secret = secret_of(run, monitoring.REMOTE_WRITE_SECRET)
    assert remote_secret.inputs["stringData"] == {"username": "ml-onprem", "password": "[secret]"}
    stack_values_ = release_of(run, "kube-prometheus-stack").raw_inputs["values"]
    grafana = stack_values_["grafana"]
    assert grafana["admin"]["existingSecret"] == grafana_secret.inputs["metadata"]["name"]
    assert "adminPassword" not in grafana
    (target,) = stack_values_["prometheus"]["prometheusSpec"]["remoteWrite"]
    assert target["basicAuth"]["password"] == {"name": monitoring.REMOTE_WRITE_SECRET, "key": "password"}
    # Neither credential reaches a non-secret input of any resource.
    for resource in run.resources:
        assert "REMOTE-WRITE-PASSWORD" not in str(resource.inputs), resource.name
    assert remote_secret.urn in release_of(run, "kube-prometheus-stack").depends_on


@pytest.mark.render
def test_remote_write_renders_into_the_prometheus_resource(onprem: Spec) -> None:
    values, secret_keys = stack_values("onprem")
    values["monitoring"]["remoteWrite"] = {"url": "https://metrics.example.internal/api/v1/push"}
    spec = load_spec(values, secret_keys)
    (prometheus,) = render_release(monitoring.kube_prometheus_stack_release(spec)).of_kind("Prometheus")
    assert prometheus["spec"]["remoteWrite"] == [{"url": "https://metrics.example.internal/api/v1/push"}]


# --- Config -----------------------------------------------------------------------------------------------------


def test_defaults_follow_the_cluster_mode() -> None:
    kubeadm = parse(base())
    assert monitoring_wanted(kubeadm) and fault_mode(kubeadm) == "cordon"
    existing = parse({"cluster": {"mode": "existing", "kubeconfig": "apiVersion: v1"}}, ("cluster",))
    assert not monitoring_wanted(existing) and fault_mode(existing) == "off"


@pytest.mark.parametrize(
    ("monitoring_values", "expected"),
    [
        ({"retention": "15 days"}, 'mlcluster:monitoring.retention: "15 days" is not a Prometheus duration'),
        ({"storageSize": "lots"}, 'mlcluster:monitoring.storageSize: "lots" is not a Kubernetes quantity'),
        ({"version": "latest"}, 'mlcluster:monitoring.version: "latest" is not a pinned chart version'),
        ({"adapterVersion": "5.x"}, 'mlcluster:monitoring.adapterVersion: "5.x" is not a pinned chart version'),
        ({"faultHandling": {"version": "main"}}, 'mlcluster:monitoring.faultHandling.version: "main" is not a pinned'),
        ({"faultHandling": {"mode": "reboot"}}, "mlcluster:monitoring.faultHandling.mode:"),
        ({"pendingAlertMinutes": 0}, "mlcluster:monitoring.pendingAlertMinutes:"),
        ({"grafanaAdminPassword": "hunter2"}, "mlcluster:monitoring.grafanaAdminPassword: must be set as a secret"),
    ],
)
def test_monitoring_values_are_checked(monitoring_values: dict[str, Any], expected: str) -> None:
    values = base()
    values["monitoring"] = monitoring_values
    problems = errors_of(values)
    assert any(p.startswith(expected) for p in problems), problems
    assert "hunter2" not in " ".join(problems)


def test_a_custom_metric_name_must_be_a_prometheus_metric_name() -> None:
    values = base()
    values["kserve"] = {
        "deployments": [
            {
                "name": "scorer",
                "image": "example.org/s:1",
                "autoscaling": {"metric": "pods", "metricName": "queue.length"},
            }
        ]
    }
    problems = errors_of(values)
    assert any(
        p.startswith(
            'mlcluster:kserve.deployments[0].autoscaling.metricName: "queue.length" is not a Prometheus metric'
        )
        for p in problems
    ), problems
    # Without monitoring mlcluster runs no adapter, so only the field's own grammar applies.
    values["monitoring"] = {"enabled": False}
    assert parse(values).kserve.deployments[0].autoscaling.metric_name == "queue.length"
    values["monitoring"] = {}
    values["kserve"]["deployments"][0]["autoscaling"]["metricName"] = "queue_length"
    assert parse(values).kserve.deployments[0].autoscaling.metric_name == "queue_length"


@pytest.mark.parametrize(
    ("remote_write", "expected"),
    [
        (
            {"url": "metrics.example.internal"},
            'mlcluster:monitoring.remoteWrite.url: "metrics.example.internal" is not',
        ),
        ({"url": "https://m.example", "username": "u"}, "mlcluster:monitoring.remoteWrite.password: is required"),
    ],
)
def test_remote_write_is_checked(remote_write: dict[str, Any], expected: str) -> None:
    values = base()
    values["monitoring"] = {"remoteWrite": remote_write}
    problems = errors_of(values, ("ssh", "monitoring"))
    assert any(p.startswith(expected) for p in problems), problems
    # A password given in plaintext (the section not stored as a secret) is refused, and not echoed.
    values["monitoring"] = {"remoteWrite": {"url": "https://m.example", "username": "u", "password": "hunter2"}}
    problems = errors_of(values)
    assert any(p.startswith("mlcluster:monitoring.remoteWrite.password: must be set as a secret") for p in problems)
    assert "hunter2" not in " ".join(problems)
    assert parse(values, ("ssh", "monitoring")).monitoring.remote_write is not None


def test_fault_handling_needs_the_gpu_operator_and_monitoring_warns_without_a_storage_class() -> None:
    values = base()
    values["storage"] = {"enabled": False}
    values["gpuOperator"] = {"enabled": False}
    values["monitoring"] = {"faultHandling": {"mode": "drain"}}
    problems = errors_of(values)
    assert problems == [
        "mlcluster:monitoring.faultHandling.mode: drain reads GPU health from the GPU Operator's DCGM: set"
        " gpuOperator.enabled: true, or mode: off"
    ]
    values["monitoring"] = {"faultHandling": {"mode": "off"}}
    spec, warnings = spec_and_warnings(values, lambda key: key == "ssh")
    (storage,) = [str(w) for w in warnings if str(w).startswith("mlcluster:monitoring.")]
    assert storage.startswith("mlcluster:monitoring.storageSize: Prometheus' volume claim names no StorageClass")
    # Without a class of the stack's own, the claim names none (the cluster's default, if any).
    claim = monitoring.kube_prometheus_stack_release(spec).values["prometheus"]["prometheusSpec"]["storageSpec"]
    assert "storageClassName" not in claim["volumeClaimTemplate"]["spec"]
    values["monitoring"] = {"enabled": False, "faultHandling": {"mode": "off"}}
    warnings = spec_and_warnings(values, lambda key: key == "ssh")[1]
    # Only what monitoring off gives up of the AI conformance is said (tests/test_conformance.py).
    said = [str(w) for w in warnings if str(w).startswith("mlcluster:monitoring.")]
    assert [w for w in said if "AI Conformance" not in w] == []


def test_quarantine_without_cert_manager_is_refused_and_the_default_falls_back_to_observe(onprem: Spec) -> None:
    values, secret = stack_values("onprem")
    values["kserve"] = {"enabled": False}
    values["monitoring"].setdefault("faultHandling", {})["mode"] = "cordon"
    with pytest.raises(ConfigError) as refused:
        load_spec(values, secret)
    assert "mlcluster:monitoring.faultHandling.mode: cordon needs cert-manager" in str(refused.value)
    del values["monitoring"]["faultHandling"]["mode"]
    assert fault_mode(load_spec(values, secret)) == "observe"
    assert fault_mode(onprem) == "cordon"
