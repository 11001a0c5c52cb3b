"""Serving: metrics-server, cert-manager, Knative (Knative mode), KServe's charts, then the model endpoints.

Order: cert-manager (and, in Knative mode, the Knative Operator and a Ready KnativeServing) before kserve-crd,
kserve-crd before the controller, the controller before its runtimes, the runtimes before any endpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from ..config.scheduling import platform_tolerations
from ..config.spec import Spec
from ..render import manifests
from ..render.endpoints import (
    deployment_service,
    endpoint_namespaces,
    horizontal_pod_autoscaler,
    inference_deployment,
    inference_service,
    namespace_object,
)
from ..render.serving import (
    KNATIVE_SERVING_NAMESPACE,
    cert_manager_release,
    knative_operator_release,
    knative_serving,
    kserve_releases,
    metrics_server_release,
)
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

        previous = before_kserve
        for release in kserve_releases(spec):
            previous = [self.chart(release, previous)]
        runtimes_ready = previous

        namespaces = {
            name: self.manifest(namespace_object(name), name=f"ns-{name}") for name in endpoint_namespaces(kserve)
        }
        self.endpoints = [
            self.manifest(
                inference_service(endpoint, kserve, platform_tolerations(spec)),
                [*runtimes_ready, *metrics_api, namespaces[endpoint.namespace]],
                name=f"isvc-{endpoint.namespace}-{endpoint.name}",
            )
            for endpoint in kserve.endpoints
        ]
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
        return {"endpoints": [f"{e.namespace}/{e.name}" for e in kserve.endpoints]}
