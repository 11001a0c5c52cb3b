"""Serving: metrics-server, cert-manager, Knative (Knative mode), KServe's charts, then the model endpoints.

Order: cert-manager (and, in Knative mode, the Knative Operator and a Ready KnativeServing) before kserve-crd,
kserve-crd before the controller, the controller before its runtimes, the runtimes before any endpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from .config.spec import Spec
from .helm_release import helm_release
from .render.endpoints import (
    deployment_service,
    endpoint_namespaces,
    horizontal_pod_autoscaler,
    inference_deployment,
    inference_service,
    namespace_object,
)
from .render.serving import (
    KNATIVE_SERVING_NAMESPACE,
    cert_manager_release,
    knative_operator_release,
    knative_serving,
    kserve_releases,
    metrics_server_release,
)


def _custom_resource(name: str, document: Mapping[str, Any], opts: pulumi.ResourceOptions) -> pulumi.Resource:
    return k8s.apiextensions.CustomResource(
        name,
        api_version=document["apiVersion"],
        kind=document["kind"],
        metadata=document["metadata"],
        spec=document["spec"],
        opts=opts,
    )


class Serving(pulumi.ComponentResource):
    def __init__(
        self,
        spec: Spec,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:serving:Serving", "serving", None, opts)
        kserve = spec.kserve

        def options(after: Sequence[pulumi.Resource], **extra: Any) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(after), **extra)

        metrics = metrics_server_release(spec)
        metrics_api: list[pulumi.Resource] = []
        if metrics is not None:
            metrics_api = [helm_release(metrics, provider, parent=self, depends_on=depends_on)]

        before_kserve: list[pulumi.Resource] = [
            helm_release(cert_manager_release(spec), provider, parent=self, depends_on=depends_on)
        ]
        operator = knative_operator_release(spec)
        if operator is not None:
            operator_release = helm_release(operator, provider, parent=self, depends_on=depends_on)
            serving_namespace = k8s.core.v1.Namespace(
                f"ns-{KNATIVE_SERVING_NAMESPACE}",
                metadata={"name": KNATIVE_SERVING_NAMESPACE},
                opts=options(depends_on),
            )
            before_kserve.append(
                _custom_resource(
                    "knative-serving", knative_serving(kserve), options([operator_release, serving_namespace])
                )
            )

        previous = before_kserve
        for release in kserve_releases(spec):
            previous = [helm_release(release, provider, parent=self, depends_on=previous)]
        runtimes_ready = previous

        namespaces = {
            name: k8s.core.v1.Namespace(
                f"ns-{name}", metadata=namespace_object(name)["metadata"], opts=options(depends_on)
            )
            for name in endpoint_namespaces(kserve)
        }
        self.endpoints = [
            _custom_resource(
                f"isvc-{endpoint.namespace}-{endpoint.name}",
                inference_service(endpoint, kserve),
                options([*runtimes_ready, *metrics_api, namespaces[endpoint.namespace]]),
            )
            for endpoint in kserve.endpoints
        ]
        self.deployments: list[pulumi.Resource] = []
        for item in kserve.deployments:
            key = f"{item.namespace}-{item.name}"
            deployment_doc = inference_deployment(item)
            deployment = k8s.apps.v1.Deployment(
                f"deploy-{key}",
                metadata=deployment_doc["metadata"],
                spec=deployment_doc["spec"],
                # The HPA owns the replica count once it runs; `up` must not reset it to minReplicas.
                opts=options([namespaces[item.namespace]], ignore_changes=["spec.replicas"]),
            )
            service_doc = deployment_service(item)
            k8s.core.v1.Service(
                f"svc-{key}",
                metadata=service_doc["metadata"],
                spec=service_doc["spec"],
                opts=options([namespaces[item.namespace]]),
            )
            hpa_doc = horizontal_pod_autoscaler(item)
            k8s.autoscaling.v2.HorizontalPodAutoscaler(
                f"hpa-{key}",
                metadata=hpa_doc["metadata"],
                spec=hpa_doc["spec"],
                opts=options([deployment, *metrics_api]),
            )
            self.deployments.append(deployment)
        self.register_outputs({"endpoints": [f"{e.namespace}/{e.name}" for e in kserve.endpoints]})
