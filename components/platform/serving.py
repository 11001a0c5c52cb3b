"""Serving: metrics-server, cert-manager, Knative (Knative mode), KServe's charts, Gateway API (Standard mode),
KEDA (queue-scaled endpoints), then the model endpoints and their HTTPRoutes.

Order: cert-manager (and, in Knative mode, the Knative Operator and a Ready KnativeServing) before kserve-crd,
kserve-crd before the InferenceGateway (Envoy Gateway, GatewayClass, Gateway), both before the controller, the
controller (and KEDA and LeaderWorkerSet) before the LLMInferenceService charts, those before Envoy AI Gateway
(LLM endpoints with a picker) and the runtimes, the
runtimes before any endpoint, an endpoint's versions before its HTTPRoute, an LLM endpoint before its ScaledObject.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from ..config.derived import monitoring_wanted, platform_tolerations
from ..config.serving import gateway_wanted, llm_endpoints
from ..config.spec import Spec
from ..render import manifests
from ..render.endpoints import (
    deployment_service,
    endpoint_namespaces,
    horizontal_pod_autoscaler,
    inference_deployment,
    inference_services,
    namespace_object,
)
from ..render.inference_gateway import endpoint_route, endpoint_routes
from ..render.llm import (
    ai_gateway_releases,
    llm_inference_service,
    llm_namespaces,
    llm_routing,
    llmisvc_releases,
    lws_release,
    scaled_object,
)
from ..render.monitoring import prometheus_url
from ..render.serving import (
    KNATIVE_SERVING_NAMESPACE,
    cert_manager_release,
    keda_release,
    knative_operator_release,
    knative_serving,
    kserve_releases,
    metrics_server_release,
)
from .inference_gateway import InferenceGateway
from .platform_layer import PlatformLayer


class Serving(PlatformLayer):
    type_token = "mlcluster:serving:Serving"
    layer_name = "serving"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        kserve = spec.kserve
        metrics = metrics_server_release(spec)
        metrics_api: list[pulumi.Resource] = [self.chart(metrics)] if metrics is not None else []

        self.cert_manager = self.chart(cert_manager_release(spec))
        before_kserve: list[pulumi.Resource] = [self.cert_manager]
        operator = knative_operator_release(spec)
        if operator is not None:
            operator_release = self.chart(operator)
            serving_namespace = self.manifest(
                manifests.namespace(KNATIVE_SERVING_NAMESPACE), name=f"ns-{KNATIVE_SERVING_NAMESPACE}"
            )
            before_kserve.append(
                self.manifest(knative_serving(kserve), [operator_release, serving_namespace], name="knative-serving")
            )

        keda = keda_release(spec)
        # KEDA's CRDs before any InferenceService of KServe's keda class (KServe creates their ScaledObjects), and
        # before the llmisvc controller, which watches ScaledObjects only if their CRD exists when it starts.
        scalers: list[pulumi.Resource] = [self.chart(keda, before_kserve)] if keda is not None else []
        lws = lws_release(kserve, platform_tolerations(spec))
        # LeaderWorkerSet likewise before the llmisvc controller (controller.go L454-456 checks its CRD once).
        groups: list[pulumi.Resource] = [self.chart(lws, before_kserve)] if lws is not None else []

        crds, *rest = kserve_releases(spec)
        previous: list[pulumi.Resource] = [self.chart(crds, before_kserve)]
        if gateway_wanted(kserve):
            # After kserve-crd (its release creates KServe's namespace, where the Gateway lives); before KServe's
            # controller, which watches Gateway API routes from its start.
            self.gateway: InferenceGateway | None = InferenceGateway(
                spec, self.provider, previous, pulumi.ResourceOptions(parent=self)
            )
            previous = [*previous, self.gateway]
        else:
            self.gateway = None
        controller, *runtimes = rest
        previous = [self.chart(controller, previous)]
        # The llmisvc charts after KServe's controller (whose release makes the shared inferenceservice-config the
        # llmisvc controller reads) and after the Gateway API, KEDA and LWS CRDs its controller looks for at start;
        # before the runtime configs, whose LLMInferenceServiceConfig presets its webhook validates.
        for release in llmisvc_releases(kserve, platform_tolerations(spec)):
            previous = [self.chart(release, [*previous, *scalers, *groups])]
        # Envoy AI Gateway after the InferencePool CRD (kserve-llmisvc-resources): its controller sets up its
        # InferencePool controller only if the CRD exists when it starts (envoyproxy/ai-gateway v1.1.0
        # internal/controller/controller.go L192-215).
        for release in ai_gateway_releases(kserve, platform_tolerations(spec)):
            previous = [self.chart(release, previous)]
        for release in runtimes:
            previous = [self.chart(release, previous)]
        runtimes_ready = previous

        namespaces = {
            name: self.manifest(namespace_object(name), name=f"ns-{name}")
            for name in sorted({*endpoint_namespaces(kserve), *llm_namespaces(kserve)})
        }
        prometheus = prometheus_url(spec.monitoring) if monitoring_wanted(spec) else None
        self.endpoints = []
        for endpoint in kserve.endpoints:
            services = [
                self.manifest(
                    isvc,
                    [*runtimes_ready, *metrics_api, *scalers, namespaces[endpoint.namespace]],
                    name=f"isvc-{endpoint.namespace}-{isvc['metadata']['name']}",
                )
                for isvc in inference_services(endpoint, kserve, platform_tolerations(spec), prometheus)
            ]
            self.endpoints.extend(services)
            route = endpoint_route(endpoint, kserve) if self.gateway is not None else None
            if route is not None and self.gateway is not None:
                # After the versions it routes to, so a route never points at a Service KServe has not made yet.
                self.manifest(route, [self.gateway, *services], name=f"httproute-{endpoint.namespace}-{endpoint.name}")
        self.llm_endpoints: list[pulumi.Resource] = []
        for llm in llm_endpoints(kserve):
            # A queued endpoint lives in its team's namespace, which the Kueue layer (before this one) creates.
            own = [namespaces[llm.namespace]] if llm.namespace in namespaces else []
            service = self.manifest(
                llm_inference_service(llm, kserve, spec.network, platform_tolerations(spec)),
                [*runtimes_ready, *groups, *own, *([self.gateway] if self.gateway is not None else [])],
                name=f"llmisvc-{llm.namespace}-{llm.name}",
            )
            self.llm_endpoints.append(service)
            scaler = scaled_object(llm, prometheus) if prometheus is not None else None
            if scaler is not None:
                self.manifest(scaler, [service, *scalers], name=f"scaledobject-{llm.namespace}-{llm.name}")
        self.deployments: list[pulumi.Resource] = []
        for item in kserve.deployments:
            key = f"{item.namespace}-{item.name}"
            namespace = [namespaces[item.namespace]]
            # The HPA owns the replica count once it runs; `up` must not reset it to minReplicas.
            deployment = self.manifest(
                inference_deployment(item, platform_tolerations(spec)),
                namespace,
                name=f"deploy-{key}",
                ignore_changes=["spec.replicas"],
            )
            self.manifest(deployment_service(item), namespace, name=f"svc-{key}")
            self.manifest(horizontal_pod_autoscaler(item), [deployment, *metrics_api], name=f"hpa-{key}")
            self.deployments.append(deployment)
        return {
            "endpoints": [f"{e.namespace}/{name}" for e in kserve.endpoints for name in e.isvc_names()],
            "routes": [f"{r['metadata']['namespace']}/{r['metadata']['name']}" for r in endpoint_routes(kserve)],
            "llmEndpoints": llm_routing(kserve),
        }
