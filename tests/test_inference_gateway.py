"""Inference through Gateway API (Envoy Gateway, a canary and header routes) and InferenceServices scaled by KEDA
on a queue length: the charts rendered by the real Helm engine, every object validated against the CRDs in
../shared, the 90/10 canary and the metric -> query -> scaler -> target chain as rendered, each link broken once."""

from __future__ import annotations

import copy
import re
from functools import cache
from typing import Any

import promql_parser
import pytest

from components.config.spec import Spec
from components.render import monitoring
from components.render.endpoints import inference_services, predictor_name
from components.render.helm import tolerating
from components.render.inference_gateway import (
    ENVOY_GATEWAY_TOLERATIONS,
    endpoint_route,
    envoy_gateway_release,
    gateway,
    gateway_class,
)
from components.render.serving import keda_release, kserve_releases

from .conftest import load_spec, stack_values
from .helm_render import RenderedChart, render_chart
from .upstream import UPSTREAM, chart_values, crd_errors, custom_resource_errors, unknown_value_keys

GATEWAY_API_CRDS = "gateway-api/v1.6.1/standard"
ISVC_CRD = "kserve/v0.20.0/serving.kserve.io_inferenceservices.yaml"
RELEASE = "kubernetes:helm.sh/v3:Release"
HTTPROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"


def canary_values() -> tuple[dict[str, Any], list[str]]:
    """The on-prem example's chat endpoint as a 90/10 canary of two models, an x-model header route to v2, scaled
    by KEDA on vLLM's queue; plus a CPU endpoint scaled to zero on a broker's queue."""
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    chat = values["kserve"]["endpoints"][0]
    chat["versions"] = [
        {"name": "v1", "weight": 90},
        {"name": "v2", "weight": 10, "storageUri": "hf://Qwen/Qwen2.5-14B-Instruct"},
    ]
    chat["headerRoutes"] = [{"header": "x-model", "value": "qwen2.5-14b-instruct", "version": "v2"}]
    chat["autoscaling"] = {"metric": "queue", "metricName": "vllm:num_requests_waiting", "target": 4}
    values["kserve"]["endpoints"].append(
        {
            "name": "scorer",
            "namespace": "models",
            "modelFormat": "sklearn",
            "storageUri": "gs://kfserving-examples/models/sklearn/1.0/model",
            "minReplicas": 0,
            "maxReplicas": 3,
            "autoscaling": {"metric": "external", "metricName": "rabbitmq_queue_messages_ready", "target": 30},
        }
    )
    return values, secret


@cache
def canary_spec() -> Spec:
    return load_spec(*canary_values())


@pytest.fixture(scope="module")
def canary_run() -> Any:
    from components.plan.engine import run_program

    from .conftest import Run, as_config

    values, secret = canary_values()
    return Run(run_program(as_config(values), [f"mlcluster:{k}" for k in secret], stack="onprem"))


def gateway_api_crd(kind: str) -> str:
    return f"{GATEWAY_API_CRDS}/gateway.networking.k8s.io_{kind.lower()}s.yaml".replace("classs", "classes")


# --- Envoy Gateway: the chart, the CRDs it installs, mlcluster's objects ----------------------------------------


@cache
def envoy_gateway() -> RenderedChart:
    release = envoy_gateway_release(canary_spec())
    assert release is not None
    return render_chart(
        "gateway-helm", release.version, release.values, release=release.name, namespace=release.namespace
    )


@pytest.mark.render
def test_envoy_gateway_renders_and_installs_the_gateway_api_crds_it_pins() -> None:
    rendered = envoy_gateway()
    assert rendered.named("Deployment", "envoy-gateway")
    # The chart's crds subchart carries the Gateway API CRDs (bundle v1.6.1, experimental channel, a superset
    # of standard) in its crds/ folder: Helm installs them before the templates, so no separate CRD release.
    crds = {c["metadata"]["name"]: c for c in rendered.crds if c.get("kind") == "CustomResourceDefinition"}
    for name in ("gatewayclasses", "gateways", "httproutes"):
        crd = crds[f"{name}.gateway.networking.k8s.io"]
        assert crd["metadata"]["annotations"]["gateway.networking.k8s.io/bundle-version"] == "v1.6.1"
    # The same bundle as the standard-channel fixture mlcluster's objects are checked against below.
    standard = UPSTREAM / "crds" / GATEWAY_API_CRDS
    assert "bundle-version: v1.6.1" in (standard / "gateway.networking.k8s.io_httproutes.yaml").read_text()


TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
"""A taint every node carries on an all-GPU cluster: the platform's pods must tolerate it to run at all."""


@pytest.mark.render
def test_envoy_gateway_and_keda_pods_take_the_platform_tolerations() -> None:
    spec = canary_spec()
    for release, workloads in (
        (envoy_gateway_release(spec), [("Deployment", "envoy-gateway"), ("Job", "envoy-gateway-gateway-helm-certgen")]),
        (
            keda_release(spec),
            [
                ("Deployment", n)
                for n in ("keda-operator", "keda-operator-metrics-apiserver", "keda-admission-webhooks")
            ],
        ),
    ):
        assert release is not None
        path = ENVOY_GATEWAY_TOLERATIONS if release.name == "envoy-gateway" else ["tolerations"]
        values = tolerating({}, path, [TOLERATION])
        chart = "gateway-helm" if release.name == "envoy-gateway" else "keda"
        rendered = render_chart(chart, release.version, values, release=release.name, namespace=release.namespace)
        for kind, name in workloads:
            pod = rendered.named(kind, name)["spec"]["template"]["spec"]
            assert TOLERATION in pod.get("tolerations", []), (chart, name)


@pytest.mark.render
def test_gateway_objects_validate_against_the_crds_the_chart_installs() -> None:
    crds = {
        (c["spec"]["names"]["kind"]): c for c in envoy_gateway().crds if c.get("kind") == "CustomResourceDefinition"
    }
    spec = canary_spec()
    route = endpoint_route(spec.kserve.endpoints[0], spec.kserve)
    assert route is not None
    for document in (gateway_class(), gateway(spec.kserve), route):
        assert custom_resource_errors(document, crds[document["kind"]], "gateway-helm crds") == []


def test_gateway_objects_validate_against_the_standard_gateway_api_crds() -> None:
    spec = canary_spec()
    route = endpoint_route(spec.kserve.endpoints[0], spec.kserve)
    assert route is not None
    for document in (gateway_class(), gateway(spec.kserve), route):
        assert crd_errors(document, gateway_api_crd(document["kind"])) == [], document["kind"]
    # The check means something: a weight out of Gateway API's range, a header name that is not a token.
    broken = copy.deepcopy(route)
    broken["spec"]["rules"][-1]["backendRefs"][0]["weight"] = -1
    broken["spec"]["rules"][0]["matches"][0]["headers"][0]["name"] = "x model"
    assert len(crd_errors(broken, gateway_api_crd("HTTPRoute"))) == 2


def test_envoy_gateway_and_keda_values_exist_in_the_pinned_charts() -> None:
    spec = canary_spec()
    for release in (envoy_gateway_release(spec), keda_release(spec)):
        assert release is not None
        assert unknown_value_keys(dict(release.values), chart_values(release.upstream_chart, release.version)) == []


def test_kserve_is_configured_for_gateway_api_on_mlclusters_gateway() -> None:
    spec = canary_spec()
    resources = {r.name: r for r in kserve_releases(spec)}["kserve-resources"]
    controller = resources.values["kserve"]["controller"]
    assert controller["gateway"] == {
        "domain": "example.com",
        "ingressGateway": {
            "enableGatewayApi": True,
            "kserveGateway": "kserve/kserve-ingress-gateway",
            "createGateway": False,
        },
    }
    assert unknown_value_keys(dict(resources.values), chart_values("kserve-resources", "v0.20.0")) == []
    # Knative mode keeps Kourier: no Gateway API values, no Envoy Gateway.
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["kserve"]["deploymentMode"] = "Knative"
    del values["kserve"]["endpoints"][0]["autoscaling"]
    knative = load_spec(values, secret)
    assert envoy_gateway_release(knative) is None
    controller = {r.name: r for r in kserve_releases(knative)}["kserve-resources"].values["kserve"]["controller"]
    assert controller["gateway"] == {"disableIstioVirtualHost": True}


# --- The canary and the header route, as rendered ------------------------------------------------------------------


def test_a_two_version_canary_splits_90_10_and_the_model_header_picks_v2(canary_run: Any) -> None:
    (route,) = canary_run.of_type(HTTPROUTE)
    backend = {"group": "", "kind": "Service", "port": 80}
    assert route.raw_inputs["metadata"] == {
        "name": "chat",
        "namespace": "models",
        "labels": {"app.kubernetes.io/managed-by": "mlcluster"},
    }
    spec = route.raw_inputs["spec"]
    assert spec["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "namespace": "kserve",
            "name": "kserve-ingress-gateway",
        }
    ]
    assert spec["hostnames"] == ["chat-models.example.com"]
    assert spec["rules"] == [
        {
            "name": "header-0",
            "matches": [
                {
                    "path": {"type": "PathPrefix", "value": "/"},
                    "headers": [{"type": "Exact", "name": "x-model", "value": "qwen2.5-14b-instruct"}],
                }
            ],
            "backendRefs": [{**backend, "name": "chat-v2-predictor"}],
        },
        {
            "name": "weighted",
            "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
            "backendRefs": [
                {**backend, "name": "chat-v1-predictor", "weight": 90},
                {**backend, "name": "chat-v2-predictor", "weight": 10},
            ],
        },
    ]
    # Each backend is a version's InferenceService, whose predictor Service KServe names <isvc>-predictor.
    isvcs = {r.raw_inputs["metadata"]["name"]: r for r in canary_run.of_type(ISVC)}
    assert {"chat-v1", "chat-v2"} <= set(isvcs)
    assert isvcs["chat-v2"].raw_inputs["spec"]["predictor"]["model"]["storageUri"] == "hf://Qwen/Qwen2.5-14B-Instruct"
    assert isvcs["chat-v1"].raw_inputs["spec"]["predictor"]["model"]["storageUri"] == "hf://Qwen/Qwen2.5-7B-Instruct"
    for isvc in ("chat-v1", "chat-v2"):
        assert canary_run.urn_of(f"isvc-models-{isvc}") in route.depends_on


def test_install_order_puts_the_gateway_between_kserves_crds_and_its_controller(canary_run: Any) -> None:
    run = canary_run
    assert run.urn_of("kserve-crd") in run.named("envoy-gateway").depends_on
    assert run.urn_of("envoy-gateway") in run.named("gatewayclass-envoy").depends_on
    assert run.urn_of("gatewayclass-envoy") in run.named("gateway-kserve").depends_on
    controller = run.named("kserve-resources").depends_on
    assert run.urn_of("kserve-crd") in controller
    assert run.urn_of("gateway-kserve") in controller and run.urn_of("envoy-gateway") in controller
    for name in ("isvc-models-chat-v1", "isvc-models-chat-v2", "isvc-models-scorer"):
        assert run.urn_of("keda") in run.named(name).depends_on
    gateway_resource = run.named("gateway-kserve")
    assert "mlcluster:inference_gateway:InferenceGateway" in gateway_resource.parent


def test_every_inference_service_validates_against_the_kserve_crd(canary_run: Any) -> None:
    from .test_serving import document

    checked = 0
    for isvc in canary_run.of_type(ISVC):
        assert crd_errors(document(isvc), ISVC_CRD) == [], isvc.name
        checked += 1
    assert checked == 3


def test_the_onprem_example_gets_gateway_api_but_no_route_or_keda(run_stack: Any) -> None:
    run = run_stack("onprem")
    releases = {r.name for r in run.of_type(RELEASE)}
    assert "envoy-gateway" in releases and "keda" not in releases
    assert not [r for r in run.resources if r.type == HTTPROUTE]


# --- The queue-length chain: metric -> query -> scaler -> target -----------------------------------------------------

POD_OF = "{}-predictor-7c9d8f6b5-x2x4z"
"""A predictor pod name as a ReplicaSet names it."""


def kserve_scaled_object(isvc: dict[str, Any]) -> dict[str, Any] | None:
    """The ScaledObject KServe v0.20's keda reconciler makes for an InferenceService (its keda_reconciler.go:
    named after the predictor, scaling the predictor Deployment, one prometheus trigger per External metric with
    serverAddress, query and the target value as threshold); None for any other autoscaler class."""
    annotations = isvc["metadata"].get("annotations", {})
    if annotations.get("serving.kserve.io/autoscalerClass") != "keda":
        return None
    predictor = isvc["spec"]["predictor"]
    triggers = [
        {
            "type": m["external"]["metric"]["backend"],
            "metadata": {
                "serverAddress": m["external"]["metric"]["serverAddress"],
                "query": m["external"]["metric"]["query"],
                "threshold": f"{float(m['external']['target']['value']):f}",
            },
        }
        for m in predictor.get("autoScaling", {}).get("metrics", [])
        if m["type"] == "External"
    ]
    name = predictor_name(isvc["metadata"]["name"])
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": isvc["metadata"]["namespace"]},
        "spec": {
            "scaleTargetRef": {"name": name},
            "minReplicaCount": predictor.get("minReplicas", 1),
            "maxReplicaCount": max(predictor.get("maxReplicas", 0), predictor.get("minReplicas", 1)),
            "triggers": triggers,
        },
    }


@cache
def keda() -> RenderedChart:
    release = keda_release(canary_spec())
    assert release is not None
    return render_chart("keda", release.version, release.values, release=release.name, namespace=release.namespace)


def _selector(query: str) -> tuple[str, dict[str, tuple[str, str]]]:
    """(metric name, {label: (op, value)}) of the query's one vector selector, through a real PromQL parser."""
    found: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        for attr in ("expr", "lhs", "rhs"):
            child = getattr(node, attr, None)
            if child is not None:
                walk(child)

    walk(promql_parser.parse(query))
    (selector,) = found
    matchers = {
        str(m.name): (str(m.op).rsplit(".", 1)[-1], str(m.value))
        for m in selector.matchers.matchers
        if str(m.name) != "__name__"
    }
    return str(selector.name), matchers


def queue_chain_problems(
    spec: Spec,
    isvcs: list[dict[str, Any]] | None = None,
    monitors: list[dict[str, Any]] | None = None,
    scaled_objects: dict[str, dict[str, Any] | None] | None = None,
) -> list[str]:
    """For every queue-scaled InferenceService: the metric is scraped from its pods (or, external, not theirs to
    scrape), the Prometheus query reads that metric for exactly its pods on the stack's Prometheus, KServe's keda
    class makes a ScaledObject that validates against KEDA's CRD, and it scales the predictor Deployment."""
    problems: list[str] = []
    prometheus = monitoring.prometheus_url(spec.monitoring)
    monitors = monitoring.scrape_monitors(spec) if monitors is None else monitors
    if isvcs is None:
        isvcs = [i for e in spec.kserve.endpoints for i in inference_services(e, spec.kserve, (), prometheus)]
    by_name = {(e.namespace, n): e for e in spec.kserve.endpoints for n in e.isvc_names()}
    scaled_crd = keda().named("CustomResourceDefinition", "scaledobjects.keda.sh")
    for isvc in isvcs:
        meta = isvc["metadata"]
        endpoint = by_name[(meta["namespace"], meta["name"])]
        if endpoint.autoscaling.metric not in ("queue", "external"):
            continue
        name, metric = meta["name"], endpoint.autoscaling.queue_metric
        # 1. metric: a PodMonitor scrapes the predictor pods where the model server exports the metric.
        if endpoint.autoscaling.metric == "queue":
            scraped = [
                m
                for m in monitors
                if m["kind"] == "PodMonitor"
                and meta["namespace"] in m["spec"]["namespaceSelector"]["matchNames"]
                and {"key": monitoring.KSERVE_ISVC_LABEL, "operator": "Exists"}
                in m["spec"]["selector"].get("matchExpressions", [])
                and any(p.get("portNumber") == monitoring.KSERVE_METRICS_PORT for p in m["spec"]["podMetricsEndpoints"])
            ]
            if not scraped:
                problems.append(f"{name}: no PodMonitor scrapes its predictor pods, so {metric} is not in Prometheus")
        # 2. query: the metric, on the stack's Prometheus, for this InferenceService's pods only.
        (trigger_metric,) = isvc["spec"]["predictor"].get("autoScaling", {}).get("metrics", [None])
        if trigger_metric is None or trigger_metric["type"] != "External":
            problems.append(f"{name}: no External metric in spec.predictor.autoScaling")
            continue
        source = trigger_metric["external"]["metric"]
        if source["serverAddress"] != prometheus:
            problems.append(f"{name}: the query goes to {source['serverAddress']}, not the stack's Prometheus")
        selected, matchers = _selector(source["query"])
        if selected != metric:
            problems.append(f"{name}: the query reads {selected}, not {metric}")
        if endpoint.autoscaling.metric == "queue":
            op, pods = matchers.get("pod", ("", ""))
            others = [n for (ns, n) in by_name if ns == meta["namespace"] and n != name]
            if matchers.get("namespace") != ("Equal", meta["namespace"]) or op != "Re":
                problems.append(f"{name}: the query is not limited to namespace {meta['namespace']} and its pods")
            elif not re.fullmatch(pods, POD_OF.format(name)) or any(
                re.fullmatch(pods, POD_OF.format(o)) for o in others
            ):
                problems.append(f"{name}: the query's pod regex {pods} does not select exactly its predictor pods")
        # 3. scaler: KServe's keda class turns it into a ScaledObject that KEDA's CRD accepts.
        scaled = (scaled_objects or {}).get(name) or kserve_scaled_object(isvc)
        if scaled is None:
            problems.append(f"{name}: autoscalerClass is not keda, so KServe makes no ScaledObject")
            continue
        errors = custom_resource_errors(scaled, scaled_crd, "keda CRD")
        if errors:
            problems.append(f"{name}: the ScaledObject does not validate: {errors}")
        # 4. target: the predictor Deployment KServe makes for this InferenceService.
        if scaled["spec"]["scaleTargetRef"].get("name") != predictor_name(name):
            problems.append(f"{name}: the ScaledObject scales {scaled['spec']['scaleTargetRef'].get('name')}")
    return problems


@pytest.mark.render
def test_the_queue_length_chain_holds_for_every_queue_scaled_inference_service() -> None:
    spec = canary_spec()
    assert queue_chain_problems(spec) == []
    prometheus = monitoring.prometheus_url(spec.monitoring)
    isvcs = {
        i["metadata"]["name"]: i
        for e in spec.kserve.endpoints
        for i in inference_services(e, spec.kserve, (), prometheus)
    }
    assert kserve_scaled_object(isvcs["chat-v1"]) == {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "chat-v1-predictor", "namespace": "models"},
        "spec": {
            "scaleTargetRef": {"name": "chat-v1-predictor"},
            "minReplicaCount": 1,
            "maxReplicaCount": 4,
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": "http://kube-prometheus-stack-prometheus.monitoring.svc:9090",
                        "query": 'sum(vllm:num_requests_waiting{namespace="models",'
                        'pod=~"chat-v1-predictor-[a-z0-9]+-[a-z0-9]+"})',
                        "threshold": "4.000000",
                    },
                }
            ],
        },
    }
    # The broker queue scales from zero: minReplicaCount 0, no pod filter (the series is not the endpoint's).
    scorer = kserve_scaled_object(isvcs["scorer"])
    assert scorer is not None
    assert scorer["spec"]["minReplicaCount"] == 0
    assert scorer["spec"]["triggers"][0]["metadata"]["query"] == "sum(rabbitmq_queue_messages_ready)"


@pytest.mark.render
def test_the_queue_chain_check_catches_each_broken_link() -> None:
    spec = canary_spec()
    prometheus = monitoring.prometheus_url(spec.monitoring)
    isvcs = [i for e in spec.kserve.endpoints for i in inference_services(e, spec.kserve, (), prometheus)]
    # 1. metric: nothing scrapes the model servers, so the series never reaches Prometheus.
    unscraped = [m for m in monitoring.scrape_monitors(spec) if m["metadata"]["name"] != "kserve-inference-services"]
    assert queue_chain_problems(spec, monitors=unscraped) == [
        f"chat-{v}: no PodMonitor scrapes its predictor pods, so vllm:num_requests_waiting is not in Prometheus"
        for v in ("v1", "v2")
    ]
    # 2. query: the other version's pods (v1 would scale on v2's queue), and a misspelt series.
    wrong_pods = copy.deepcopy(isvcs)
    metric = wrong_pods[0]["spec"]["predictor"]["autoScaling"]["metrics"][0]["external"]["metric"]
    metric["query"] = metric["query"].replace("chat-v1-", "chat-v2-")
    assert queue_chain_problems(spec, isvcs=wrong_pods) == [
        "chat-v1: the query's pod regex chat-v2-predictor-[a-z0-9]+-[a-z0-9]+ does not select exactly its"
        " predictor pods"
    ]
    misspelt = copy.deepcopy(isvcs)
    metric = misspelt[0]["spec"]["predictor"]["autoScaling"]["metrics"][0]["external"]["metric"]
    metric["query"] = metric["query"].replace("num_requests_waiting", "num_request_waiting")
    assert queue_chain_problems(spec, isvcs=misspelt) == [
        "chat-v1: the query reads vllm:num_request_waiting, not vllm:num_requests_waiting"
    ]
    # 3. scaler: the hpa class makes no ScaledObject; a ScaledObject KEDA's CRD refuses.
    hpa = copy.deepcopy(isvcs)
    hpa[0]["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] = "hpa"
    assert queue_chain_problems(spec, isvcs=hpa) == [
        "chat-v1: autoscalerClass is not keda, so KServe makes no ScaledObject"
    ]
    bad = kserve_scaled_object(isvcs[0])
    assert bad is not None
    bad["spec"]["minReplicaCount"] = "one"
    problems = queue_chain_problems(spec, scaled_objects={"chat-v1": bad})
    assert len(problems) == 1 and problems[0].startswith("chat-v1: the ScaledObject does not validate")
    # 4. target: the ScaledObject scales another Deployment than the version's predictor.
    elsewhere = kserve_scaled_object(isvcs[0])
    assert elsewhere is not None
    elsewhere["spec"]["scaleTargetRef"]["name"] = "chat-predictor"
    assert queue_chain_problems(spec, scaled_objects={"chat-v1": elsewhere}) == [
        "chat-v1: the ScaledObject scales chat-predictor"
    ]


@pytest.mark.render
def test_keda_renders_with_its_crds_and_the_external_metrics_api() -> None:
    rendered = keda()
    assert rendered.named("CustomResourceDefinition", "scaledobjects.keda.sh")
    assert rendered.named("APIService", "v1beta1.external.metrics.k8s.io")
    assert rendered.named("Deployment", "keda-operator")


def test_each_version_holds_its_gpus_outside_kueue() -> None:
    from components.config.derived import unqueued_gpus

    # chat: 1 GPU x minReplicas 1 x 2 versions; Kueue's quota check must count both.
    assert unqueued_gpus(canary_spec())["endpoint chat"] == 2
