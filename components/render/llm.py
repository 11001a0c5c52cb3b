"""LLM endpoints as data: KServe's LLMInferenceService charts and objects, LeaderWorkerSet, the Envoy AI Gateway that
lets Envoy Gateway route to an InferencePool, KEDA's ScaledObject for a queue, and the routing a reviewer reads.

Names and behaviour are KServe v0.20.0's (kserve/kserve@v0.20.0, pkg/controller/v1alpha2/llmisvc): the workload
Deployment <name>-kserve (workload_single_node.go L512), the LeaderWorkerSet <name>-kserve-mn
(workload_multi_node.go L663), the prefill Deployment <name>-kserve-prefill (L516), the HTTPRoute <name>-kserve-route
(router.go L241), the endpoint picker Deployment <name>-kserve-router-scheduler and the InferencePool
<name>-inference-pool (scheduler.go L304, L1612; the kserve-config-llm-scheduler preset).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..config.llm import LlmEndpointSpec
from ..config.network import NetworkSpec
from ..config.serving import KserveSpec, ai_gateway_wanted, llm_endpoints, lws_wanted
from .endpoints import GPU_RESOURCE, MANAGED_BY, gpu_toleration
from .helm import ChartRelease, tolerating
from .network import rdma_device
from .serving import KSERVE_CHARTS, KSERVE_GATEWAY

LLMISVC_API = "serving.kserve.io/v1alpha2"
MAIN_CONTAINER = "main"
"""The presets' container: KServe merges the template into it by name (config_merge.go L777-779)."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""Copied by the llmisvc controller to the workload Deployment or LeaderWorkerSet and its pods (labels under
kueue.x-k8s.io: workload_single_node.go L302-322, workload_multi_node.go L616-661)."""
INFERENCE_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages")
"""Paths the kserve-config-llm-router-route preset sends to the InferencePool under /<namespace>/<name> (runtime-configs
files/llmisvcconfigs/resources.yaml L1723-1820); its catch-all rules send the rest (/v1/models) to the Service."""
MODEL_HEADER = "X-Gateway-Model-Name"
"""The route preset's model-based rules match /v1/... with this header = publishers/<namespace>/models/<model>
(kserve v0.20.0 pkg/apis/serving/v1beta1/configmap.go L59, DefaultModelBasedRoutingHeaderName)."""
MODEL_SERVER_PORT = 8000
PICKER_PORT = 9002

LWS_CHART = "oci://registry.k8s.io/lws/charts/lws"
"""kubernetes-sigs/lws v0.10.0 hack/push-chart.sh and charts/lws/README.md: the release chart and image."""
LWS_IMAGE = "registry.k8s.io/lws/lws"
LWS_RELEASE = "lws"

AI_GATEWAY_CHARTS = "oci://docker.io/envoyproxy"
AI_GATEWAY_CRDS = "ai-gateway-crds-helm"
AI_GATEWAY_CONTROLLER = "ai-gateway-helm"
AI_GATEWAY_SERVICE = "ai-gateway-controller"
"""The controller's Service: ai-gateway-helm values controller.fullnameOverride (envoyproxy/ai-gateway v1.1.0)."""
AI_GATEWAY_EXTENSION_PORT = 1063
"""Its grpc port, which Envoy Gateway's extensionManager dials (ai-gateway v1.1.0
manifests/envoy-gateway-values.yaml)."""
INFERENCE_POOL = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "version": "v1"}


# --- names the controller gives what it makes ------------------------------------------------------------------


def workload_name(endpoint: LlmEndpointSpec) -> str:
    return f"{endpoint.name}-kserve-mn" if endpoint.multi_node else f"{endpoint.name}-kserve"


def workload_kind(endpoint: LlmEndpointSpec) -> tuple[str, str]:
    return ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet") if endpoint.multi_node else ("apps/v1", "Deployment")


def workload_pods(endpoint: LlmEndpointSpec) -> str:
    """A regex for the decode pods: a Deployment's <name>-<hash>-<suffix>, or an LWS group's leader <lws>-<i> and
    workers <lws>-<i>-<j>."""
    if endpoint.multi_node:
        return f"{workload_name(endpoint)}-[0-9]+(-[0-9]+)?"
    return f"{workload_name(endpoint)}-[a-z0-9]+-[a-z0-9]+"


def route_name(endpoint: LlmEndpointSpec) -> str:
    return f"{endpoint.name}-kserve-route"


def pool_name(endpoint: LlmEndpointSpec) -> str:
    return f"{endpoint.name}-inference-pool"


def picker_name(endpoint: LlmEndpointSpec) -> str:
    return f"{endpoint.name}-kserve-router-scheduler"


def workload_service(endpoint: LlmEndpointSpec) -> str:
    return f"{endpoint.name}-kserve-workload-svc"


# --- the LLMInferenceService -------------------------------------------------------------------------------------


def _resources(endpoint: LlmEndpointSpec, gpus: int, rdma: Mapping[str, int]) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": endpoint.cpu, "memory": endpoint.memory, GPU_RESOURCE: str(gpus)}
    limits: dict[str, Any] = {"cpu": endpoint.cpu, "memory": endpoint.memory, GPU_RESOURCE: str(gpus)}
    for name, count in rdma.items():
        requests[name] = limits[name] = str(count)
    return {"requests": requests, "limits": limits}


def _pod(
    endpoint: LlmEndpointSpec, gpus: int, rdma: Mapping[str, int], env: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The part of a pod the presets leave to us: the GPUs (the controller never adds nvidia.com/gpu), and the GPU
    taint's toleration."""
    container: dict[str, Any] = {"name": MAIN_CONTAINER, "resources": _resources(endpoint, gpus, rdma)}
    if env:
        container["env"] = [dict(e) for e in env]
    return {"containers": [container], "tolerations": [gpu_toleration()]}


def _kv_transfer(role: str) -> list[dict[str, Any]]:
    """vLLM's NIXL connector for prefill/decode: what KServe's P/D sample sets per role (docs/samples/llmisvc/
    single-node-gpu/llm-inference-service-pd-qwen2-7b-gpu.yaml); the presets set none."""
    config = json.dumps({"kv_connector": "NixlConnector", "kv_role": role}, separators=(",", ":"))
    return [
        {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "VLLM_ADDITIONAL_ARGS", "value": f"--kv_transfer_config '{config}'"},
    ]


def _router(endpoint: LlmEndpointSpec, kserve: KserveSpec, cpu_tolerations: Sequence[Mapping[str, str]]) -> Any:
    router: dict[str, Any] = {
        # Named, so the plan shows the Gateway; the route preset's parentRefs are replaced by these
        # (config_merge.go L329-336).
        "gateway": {"refs": [{"name": KSERVE_GATEWAY, "namespace": kserve.namespace}]},
        "route": {},
    }
    if endpoint.routing == "picker":
        # The picker runs no GPU work: it needs what every platform pod tolerates to find a node.
        router["scheduler"] = (
            {"template": {"tolerations": [dict(t) for t in cpu_tolerations]}} if cpu_tolerations else {}
        )
    return router


def llm_inference_service(
    endpoint: LlmEndpointSpec,
    kserve: KserveSpec,
    network: NetworkSpec,
    cpu_tolerations: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    labels = dict(MANAGED_BY)
    if endpoint.queue is not None:
        labels[QUEUE_LABEL] = endpoint.queue
    # Pods that talk to other pods' GPUs (a multi-node group, or KV cache moving from prefill to decode) take the
    # RDMA device when the stack has one.
    talks = endpoint.multi_node or endpoint.prefill is not None
    rdma = rdma_device(network) if talks else {}
    decode_env = _kv_transfer("kv_consumer") if endpoint.prefill is not None else []
    spec: dict[str, Any] = {"model": {"uri": endpoint.model, "name": endpoint.served_name}}
    if endpoint.autoscaling is None:
        # Without replicas the controller keeps the workload's count (workload.go PreserveDeploymentReplicas), so
        # KEDA owns it.
        spec["replicas"] = endpoint.replicas
    parallelism: dict[str, Any] = {"tensor": endpoint.tensor}
    if endpoint.multi_node:
        parallelism["data"] = endpoint.data_local * endpoint.nodes
        parallelism["dataLocal"] = endpoint.data_local
        if endpoint.expert_parallel:
            parallelism["expert"] = True
    spec["parallelism"] = parallelism
    spec["template"] = _pod(endpoint, endpoint.gpus_per_pod, rdma, decode_env)
    if endpoint.multi_node:
        spec["worker"] = _pod(endpoint, endpoint.gpus_per_pod, rdma)
    if endpoint.prefill is not None:
        spec["prefill"] = {
            "replicas": endpoint.prefill.replicas,
            "parallelism": {"tensor": endpoint.prefill_gpus},
            "template": _pod(endpoint, endpoint.prefill_gpus, rdma, _kv_transfer("kv_producer")),
        }
    spec["router"] = _router(endpoint, kserve, cpu_tolerations)
    return {
        "apiVersion": LLMISVC_API,
        "kind": "LLMInferenceService",
        "metadata": {"name": endpoint.name, "namespace": endpoint.namespace, "labels": labels},
        "spec": spec,
    }


def llm_namespaces(kserve: KserveSpec) -> list[str]:
    """Namespaces the serving layer creates for LLM endpoints: those of endpoints outside Kueue (a queued endpoint
    lives in its team's namespace, which the Kueue layer creates)."""
    return sorted({e.namespace for e in llm_endpoints(kserve) if e.queue is None})


# --- autoscaling ---------------------------------------------------------------------------------------------------


def queue_query(endpoint: LlmEndpointSpec) -> str:
    scaling = endpoint.autoscaling
    metric = scaling.metric_name if scaling else ""
    return f'sum({metric}{{namespace="{endpoint.namespace}",pod=~"{workload_pods(endpoint)}"}})'


def scaled_object(endpoint: LlmEndpointSpec, prometheus_url: str) -> dict[str, Any] | None:
    """KEDA scales the decode workload on the model server's queue; KServe's own scaling (spec.scaling) needs the
    llm-d workload-variant-autoscaler, which mlcluster does not install."""
    scaling = endpoint.autoscaling
    if scaling is None:
        return None
    api_version, kind = workload_kind(endpoint)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": endpoint.name, "namespace": endpoint.namespace, "labels": dict(MANAGED_BY)},
        "spec": {
            "scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": workload_name(endpoint)},
            "minReplicaCount": endpoint.replicas,
            "maxReplicaCount": scaling.max_replicas,
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": prometheus_url,
                        "query": queue_query(endpoint),
                        "threshold": str(scaling.target),
                    },
                }
            ],
        },
    }


# --- releases ------------------------------------------------------------------------------------------------------


def llmisvc_releases(kserve: KserveSpec, tolerations: Sequence[Mapping[str, str]]) -> list[ChartRelease]:
    """KServe's LLMInferenceService CRDs, then its controller (with the InferencePool CRDs it bundles).
    tolerations: what platform pods tolerate (config.derived.platform_tolerations)."""
    if not llm_endpoints(kserve):
        return []
    resources = {
        "kserve": {
            # kserve-resources already makes inferenceservice-config, the Issuer and the ClusterStorageContainer:
            # two releases owning one object is refused by Helm.
            "createSharedResources": False,
            "llmisvc": {"createGIECRDs": True},
        }
    }
    return [
        ChartRelease(
            name="kserve-llmisvc-crd",
            chart=f"{KSERVE_CHARTS}/kserve-llmisvc-crd",
            version=kserve.version,
            namespace=kserve.namespace,
            upstream_chart="kserve-llmisvc-crd",
        ),
        ChartRelease(
            name="kserve-llmisvc-resources",
            chart=f"{KSERVE_CHARTS}/kserve-llmisvc-resources",
            version=kserve.version,
            namespace=kserve.namespace,
            values=tolerating(resources, ["kserve.llmisvc.controller.tolerations"], tolerations),
            upstream_chart="kserve-llmisvc-resources",
        ),
    ]


def lws_release(kserve: KserveSpec, tolerations: Sequence[Mapping[str, str]]) -> ChartRelease | None:
    if not lws_wanted(kserve):
        return None
    llm = kserve.llm
    values = {
        # The published chart carries these (hack/push-chart.sh rewrites values.yaml); the source tree says main.
        "image": {"manager": {"repository": LWS_IMAGE, "tag": llm.lws_version, "pullPolicy": "IfNotPresent"}},
    }
    return ChartRelease(
        name=LWS_RELEASE,
        chart=LWS_CHART,
        version=llm.lws_version,
        namespace=llm.lws_namespace,
        values=tolerating(values, ["tolerations"], tolerations),
        upstream_chart="lws",
    )


def ai_gateway_releases(kserve: KserveSpec, tolerations: Sequence[Mapping[str, str]]) -> list[ChartRelease]:
    """Envoy AI Gateway's CRDs and controller: the extension server Envoy Gateway asks how to reach an
    InferencePool's endpoints. Its chart source is not among the shared upstream fixtures (docs/serving.md)."""
    if not ai_gateway_wanted(kserve):
        return []
    llm = kserve.llm
    controller = {"envoyGateway": {"namespace": kserve.gateway.namespace}}
    return [
        ChartRelease(
            name="ai-gateway-crds",
            chart=f"{AI_GATEWAY_CHARTS}/{AI_GATEWAY_CRDS}",
            version=llm.ai_gateway_version,
            namespace=llm.ai_gateway_namespace,
        ),
        ChartRelease(
            name="ai-gateway",
            chart=f"{AI_GATEWAY_CHARTS}/{AI_GATEWAY_CONTROLLER}",
            version=llm.ai_gateway_version,
            namespace=llm.ai_gateway_namespace,
            values=tolerating(controller, ["controller.tolerations"], tolerations),
        ),
    ]


def envoy_gateway_extension(kserve: KserveSpec) -> dict[str, Any]:
    """Envoy Gateway's config that hands InferencePool backends to the AI gateway (envoyproxy/ai-gateway v1.1.0
    manifests/envoy-gateway-values.yaml and examples/inference-pool/envoy-gateway-values-addon.yaml)."""
    if not ai_gateway_wanted(kserve):
        return {}
    hooks = {name: {"includeAll": True} for name in ("listener", "route", "cluster", "secret")}
    return {
        "config": {
            "envoyGateway": {
                "extensionApis": {"enableEnvoyPatchPolicy": True, "enableBackend": True},
                "extensionManager": {
                    "hooks": {"xdsTranslator": {"translation": hooks, "post": ["Translation", "Cluster", "Route"]}},
                    "service": {
                        "fqdn": {
                            "hostname": f"{AI_GATEWAY_SERVICE}.{kserve.llm.ai_gateway_namespace}.svc.cluster.local",
                            "port": AI_GATEWAY_EXTENSION_PORT,
                        }
                    },
                    "backendResources": [dict(INFERENCE_POOL)],
                },
            }
        }
    }


# --- what a reviewer reads -----------------------------------------------------------------------------------------


def llm_routing(kserve: KserveSpec) -> list[dict[str, Any]]:
    """Per LLM endpoint: the Gateway, the route, what the route sends to, and what a client calls."""
    rows = []
    for endpoint in llm_endpoints(kserve):
        base = f"/{endpoint.namespace}/{endpoint.name}"
        backend = (
            f"InferencePool {endpoint.namespace}/{pool_name(endpoint)}, picker {picker_name(endpoint)} (:{PICKER_PORT})"
            if endpoint.routing == "picker"
            else f"Service {endpoint.namespace}/{workload_service(endpoint)}"
        )
        _, kind = workload_kind(endpoint)
        rows.append(
            {
                "endpoint": f"{endpoint.namespace}/{endpoint.name}",
                "model": endpoint.served_name,
                "gateway": f"{kserve.namespace}/{KSERVE_GATEWAY}",
                "route": f"{endpoint.namespace}/{route_name(endpoint)}",
                "backend": backend,
                "workload": f"{kind} {workload_name(endpoint)}"
                + (f" + Deployment {endpoint.name}-kserve-prefill" if endpoint.prefill else ""),
                "paths": [base + path for path in INFERENCE_PATHS],
                "other": f"Service {endpoint.namespace}/{workload_service(endpoint)}",
                "header": f"{MODEL_HEADER}: publishers/{endpoint.namespace}/models/{endpoint.served_name}",
            }
        )
    return rows
