"""Gateway API in front of KServe, as pure data: the Envoy Gateway release, its GatewayClass, the Gateway KServe
attaches each InferenceService's HTTPRoute to, KServe's ingress values, and each versioned endpoint's HTTPRoute
(a weighted canary plus header routes)."""

from __future__ import annotations

from typing import Any

from ..config.derived import platform_tolerations
from ..config.serving import EndpointSpec, KserveSpec, gateway_wanted
from ..config.spec import Spec
from .endpoints import MANAGED_BY, predictor_name
from .helm import ChartRelease, tolerating
from .llm import envoy_gateway_extension
from .serving import KSERVE_GATEWAY

ENVOY_GATEWAY_CHART = "oci://docker.io/envoyproxy/gateway-helm"
ENVOY_GATEWAY_RELEASE = "envoy-gateway"
ENVOY_GATEWAY_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"
"""The controllerName Envoy Gateway reconciles GatewayClasses for (its default EnvoyGateway config)."""
GATEWAY_CLASS = "envoy"
GATEWAY_API = "gateway.networking.k8s.io/v1"
ENVOY_GATEWAY_TOLERATIONS = ["deployment.pod.tolerations", "certgen.job.tolerations"]
"""The control plane's Deployment and its certificate Job (the chart has no global tolerations)."""
PREDICTOR_PORT = 80
"""KServe's predictor Service port in Standard mode."""


def envoy_gateway_release(spec: Spec) -> ChartRelease | None:
    if not gateway_wanted(spec.kserve):
        return None
    return ChartRelease(
        name=ENVOY_GATEWAY_RELEASE,
        chart=ENVOY_GATEWAY_CHART,
        version=spec.kserve.gateway.version,
        namespace=spec.kserve.gateway.namespace,
        # The chart's crds subchart (on by default) installs the Gateway API CRDs it was built against (v1.6.1,
        # experimental channel) and Envoy Gateway's own; KServe's controller watches HTTPRoutes from its start.
        # With an LLM endpoint's picker: InferencePool backends handed to Envoy AI Gateway (render/llm.py).
        values=tolerating(envoy_gateway_extension(spec.kserve), ENVOY_GATEWAY_TOLERATIONS, platform_tolerations(spec)),
        upstream_chart="gateway-helm",
    )


def gateway_class() -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_API,
        "kind": "GatewayClass",
        "metadata": {"name": GATEWAY_CLASS, "labels": dict(MANAGED_BY)},
        "spec": {"controllerName": ENVOY_GATEWAY_CONTROLLER},
    }


def gateway(kserve: KserveSpec) -> dict[str, Any]:
    """One HTTP listener every namespace's routes may attach to: KServe's and the endpoints' own."""
    return {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": {"name": KSERVE_GATEWAY, "namespace": kserve.namespace, "labels": dict(MANAGED_BY)},
        "spec": {
            "gatewayClassName": GATEWAY_CLASS,
            "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}
            ],
        },
    }


def endpoint_hostname(endpoint: EndpointSpec, kserve: KserveSpec) -> str:
    """KServe's default domainTemplate ({{ .Name }}-{{ .Namespace }}.{{ .IngressDomain }}) for the endpoint's name,
    which no InferenceService takes once it has versions (they are <name>-<version>)."""
    return f"{endpoint.name}-{endpoint.namespace}.{kserve.gateway.domain}"


def _backend(isvc_name: str, weight: int | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"group": "", "kind": "Service", "name": predictor_name(isvc_name), "port": PREDICTOR_PORT}
    if weight is not None:
        ref["weight"] = weight
    return ref


def endpoint_route(endpoint: EndpointSpec, kserve: KserveSpec) -> dict[str, Any] | None:
    """The endpoint's HTTPRoute when it has versions: header routes first (Gateway API ranks a rule with more header
    matches above one with fewer), then the weighted split every other request takes."""
    if not endpoint.versions:
        return None
    rules: list[dict[str, Any]] = [
        {
            "name": f"header-{i}",
            "matches": [
                {
                    "path": {"type": "PathPrefix", "value": "/"},
                    "headers": [{"type": "Exact", "name": route.header, "value": route.value}],
                }
            ],
            "backendRefs": [_backend(f"{endpoint.name}-{route.version}")],
        }
        for i, route in enumerate(endpoint.header_routes)
    ]
    rules.append(
        {
            "name": "weighted",
            "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
            "backendRefs": [_backend(f"{endpoint.name}-{v.name}", v.weight) for v in endpoint.versions],
        }
    )
    return {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": {"name": endpoint.name, "namespace": endpoint.namespace, "labels": dict(MANAGED_BY)},
        "spec": {
            "parentRefs": [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "namespace": kserve.namespace,
                    "name": KSERVE_GATEWAY,
                }
            ],
            "hostnames": [endpoint_hostname(endpoint, kserve)],
            "rules": rules,
        },
    }


def endpoint_routes(kserve: KserveSpec) -> list[dict[str, Any]]:
    if not gateway_wanted(kserve):
        return []
    return [route for e in kserve.endpoints if (route := endpoint_route(e, kserve)) is not None]
