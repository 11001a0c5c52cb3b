"""Model endpoints as Kubernetes objects: KServe InferenceServices, and Deployment + Service + HPA for the rest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config.checks import parse_taint
from ..config.derived import GPU_TAINT
from ..config.inference_gateway import PREDICTOR_SUFFIX, EndpointVersionSpec
from ..config.serving import (
    QUEUE_METRICS,
    DeploymentAutoscalingSpec,
    EndpointSpec,
    InferenceDeploymentSpec,
    KserveSpec,
)
from . import manifests
from .serving import deployment_mode_value

GPU_RESOURCE = "nvidia.com/gpu"
MANAGED_BY = {"app.kubernetes.io/managed-by": "mlcluster"}
ENDPOINT_LABEL = "mlcluster.io/endpoint"
"""On each version's InferenceService: the endpoint (and HTTPRoute) it is a version of."""


def gpu_toleration() -> dict[str, str]:
    """Tolerates the taint GPU nodes carry, so GPU pods (and only they) land there."""
    taint = parse_taint(GPU_TAINT)
    return {"key": taint["key"], "operator": "Equal", "value": taint.get("value", ""), "effect": taint["effect"]}


def _resources(cpu: str, memory: str, gpus: int, *, cpu_limit: bool) -> dict[str, dict[str, Any]]:
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    limits: dict[str, Any] = {"memory": memory}
    if cpu_limit:
        limits["cpu"] = cpu
    if gpus:
        # Extended resources must have requests equal to limits; the limit alone is what the scheduler counts.
        requests[GPU_RESOURCE] = str(gpus)
        limits[GPU_RESOURCE] = str(gpus)
    return {"requests": requests, "limits": limits}


def _metadata(
    name: str, namespace: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {**(labels or {}), **MANAGED_BY}}
    if annotations:
        metadata["annotations"] = annotations
    return metadata


def endpoint_namespaces(kserve: KserveSpec) -> list[str]:
    return sorted({e.namespace for e in kserve.endpoints} | {d.namespace for d in kserve.deployments})


def namespace_object(name: str) -> dict[str, Any]:
    return manifests.namespace(name, MANAGED_BY)


def endpoint_metric(endpoint: EndpointSpec, mode: str) -> str:
    """The metric written out, so the plan shows what scales the endpoint: the mode's autoscaler's default."""
    return endpoint.autoscaling.metric or ("cpu" if mode == "Standard" else "concurrency")


def _endpoint_annotations(kserve: KserveSpec, endpoint: EndpointSpec) -> dict[str, str]:
    annotations = {"serving.kserve.io/deploymentMode": deployment_mode_value(kserve.deployment_mode, kserve.version)}
    if kserve.deployment_mode == "Standard":
        # Explicit, so KServe's webhook validates the metric against what the class supports: its HPA class takes
        # only cpu/memory, its keda class also a Prometheus query (and creates the KEDA ScaledObject itself).
        queued = endpoint.autoscaling.metric in QUEUE_METRICS
        annotations["serving.kserve.io/autoscalerClass"] = "keda" if queued else "hpa"
    return annotations


def predictor_name(isvc_name: str) -> str:
    """KServe's Deployment, Service and (keda class) ScaledObject of an InferenceService in Standard mode."""
    return f"{isvc_name}{PREDICTOR_SUFFIX}"


def predictor_pods(isvc_name: str) -> str:
    """A regex for the predictor Deployment's pods (<deployment>-<replicaset hash>-<pod suffix>), anchored by
    PromQL, so chat's pods never include chat-v2's."""
    return f"{predictor_name(isvc_name)}-[a-z0-9]+-[a-z0-9]+"


def queue_query(endpoint: EndpointSpec, isvc_name: str) -> str:
    """The PromQL KEDA evaluates: the endpoint's whole queue (KEDA divides it by the target per replica)."""
    metric = endpoint.autoscaling.queue_metric
    if endpoint.autoscaling.metric == "external":
        # A queue outside the model server (a broker, a gateway): its series is not the endpoint's pods'.
        return f"sum({metric})"
    return f'sum({metric}{{namespace="{endpoint.namespace}",pod=~"{predictor_pods(isvc_name)}"}})'


def queue_autoscaling(endpoint: EndpointSpec, isvc_name: str, prometheus_url: str) -> dict[str, Any]:
    """spec.predictor.autoScaling for KServe's keda class: one External metric, a Prometheus query and its target."""
    return {
        "metrics": [
            {
                "type": "External",
                "external": {
                    "metric": {
                        "backend": "prometheus",
                        "serverAddress": prometheus_url,
                        "query": queue_query(endpoint, isvc_name),
                    },
                    # KServe's webhook wants a Value target for External; it becomes KEDA's threshold, which KEDA
                    # applies per replica (AverageValue).
                    "target": {"type": "Value", "value": str(endpoint.autoscaling.queue_target)},
                },
            }
        ]
    }


def inference_service(
    endpoint: EndpointSpec,
    kserve: KserveSpec,
    cpu_tolerations: Sequence[Mapping[str, str]] = (),
    *,
    version: EndpointVersionSpec | None = None,
    prometheus_url: str | None = None,
) -> dict[str, Any]:
    """cpu_tolerations: what a pod without GPUs needs to find a node (config.derived.platform_tolerations).
    version: one of the endpoint's versions (the InferenceService <endpoint>-<version>). prometheus_url: where KEDA
    reads a queue metric (render.monitoring.prometheus_url)."""
    name = f"{endpoint.name}-{version.name}" if version else endpoint.name
    model: dict[str, Any] = {
        "modelFormat": {"name": endpoint.model_format},
        "storageUri": (version.storage_uri if version else None) or endpoint.storage_uri,
        "resources": _resources(endpoint.cpu, endpoint.memory, endpoint.gpus, cpu_limit=True),
    }
    runtime = (version.runtime if version else None) or endpoint.runtime
    if runtime:
        model["runtime"] = runtime
    predictor: dict[str, Any] = {"minReplicas": endpoint.min_replicas, "maxReplicas": endpoint.max_replicas}
    if endpoint.autoscaling.metric in QUEUE_METRICS and kserve.deployment_mode == "Standard":
        if prometheus_url is None:
            raise ValueError(f"{endpoint.namespace}/{name} scales on a queue but no Prometheus was given")
        # KServe's keda class refuses scaleMetric: the query is the metric.
        predictor["autoScaling"] = queue_autoscaling(endpoint, name, prometheus_url)
    else:
        predictor["scaleMetric"] = endpoint_metric(endpoint, kserve.deployment_mode)
        if endpoint.autoscaling.target is not None:
            predictor["scaleTarget"] = endpoint.autoscaling.target
    predictor["model"] = model
    tolerations = [gpu_toleration()] if endpoint.gpus else list(cpu_tolerations)
    if tolerations:
        predictor["tolerations"] = tolerations
    labels = {ENDPOINT_LABEL: endpoint.name} if version else None
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        # The mode per object as well as cluster-wide, so changing the cluster default never moves an endpoint.
        "metadata": _metadata(
            name, endpoint.namespace, labels=labels, annotations=_endpoint_annotations(kserve, endpoint)
        ),
        "spec": {"predictor": predictor},
    }


def inference_services(
    endpoint: EndpointSpec,
    kserve: KserveSpec,
    cpu_tolerations: Sequence[Mapping[str, str]] = (),
    prometheus_url: str | None = None,
) -> list[dict[str, Any]]:
    """The endpoint's InferenceServices: itself, or one per version (a canary's v1 and v2)."""
    if not endpoint.versions:
        return [inference_service(endpoint, kserve, cpu_tolerations, prometheus_url=prometheus_url)]
    return [
        inference_service(endpoint, kserve, cpu_tolerations, version=v, prometheus_url=prometheus_url)
        for v in endpoint.versions
    ]


def deployment_labels(deployment: InferenceDeploymentSpec) -> dict[str, str]:
    return {"app.kubernetes.io/name": deployment.name}


def inference_deployment(
    deployment: InferenceDeploymentSpec, cpu_tolerations: Sequence[Mapping[str, str]] = ()
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "server",
        "image": deployment.image,
        "ports": [{"name": "http", "containerPort": deployment.port}],
        # No CPU limit: throttling adds latency; the request is what CPU utilisation is measured against.
        "resources": _resources(deployment.cpu, deployment.memory, deployment.gpus, cpu_limit=False),
    }
    if deployment.args:
        container["args"] = list(deployment.args)
    pod_spec: dict[str, Any] = {"containers": [container]}
    tolerations = [gpu_toleration()] if deployment.gpus else list(cpu_tolerations)
    if tolerations:
        pod_spec["tolerations"] = tolerations
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(deployment.name, deployment.namespace, labels=deployment_labels(deployment)),
        "spec": {
            "replicas": deployment.min_replicas,
            "selector": {"matchLabels": deployment_labels(deployment)},
            "template": {"metadata": {"labels": deployment_labels(deployment)}, "spec": pod_spec},
        },
    }


def deployment_service(deployment: InferenceDeploymentSpec) -> dict[str, Any]:
    """The (core v1) Service in front of an inference Deployment."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(deployment.name, deployment.namespace),
        "spec": {
            "selector": deployment_labels(deployment),
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
        },
    }


def hpa_metric(autoscaling: DeploymentAutoscalingSpec) -> dict[str, Any]:
    if autoscaling.metric in ("cpu", "memory"):
        return {
            "type": "Resource",
            "resource": {
                "name": autoscaling.metric,
                "target": {"type": "Utilization", "averageUtilization": autoscaling.target},
            },
        }
    target = {"type": "AverageValue", "averageValue": str(autoscaling.target)}
    if autoscaling.metric == "pods":
        return {"type": "Pods", "pods": {"metric": {"name": autoscaling.metric_name}, "target": target}}
    # External: e.g. a queue's length divided across the replicas (AverageValue), not one value per pod.
    return {"type": "External", "external": {"metric": {"name": autoscaling.metric_name}, "target": target}}


def horizontal_pod_autoscaler(deployment: InferenceDeploymentSpec) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(deployment.name, deployment.namespace),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment.name},
            "minReplicas": deployment.min_replicas,
            "maxReplicas": deployment.max_replicas,
            "metrics": [hpa_metric(deployment.autoscaling)],
        },
    }
