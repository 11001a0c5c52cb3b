"""Serving releases: metrics-server, cert-manager, Knative (Knative mode only) and KServe's charts, in order."""

from __future__ import annotations

from typing import Any

from ..config.derived import platform_tolerations
from ..config.serving import KserveSpec, gateway_wanted, keda_wanted, llm_endpoints, major_minor, metrics_server_wanted
from ..config.spec import Spec
from .helm import ChartRelease, tolerating

KSERVE_CHARTS = "oci://ghcr.io/kserve/charts"
SPLIT_CHARTS_SINCE = (0, 17)
"""KServe v0.17 split the `kserve` chart into `kserve-resources` and `kserve-runtime-configs`."""

CONTROLLER_TOLERATIONS = {
    "kserve-resources": ["kserve.controller.tolerations"],
    "kserve": ["kserve.controller.tolerations"],
}
"""Where each KServe chart takes the controller's tolerations (the CRD and runtime charts run no pods)."""

KSERVE_GATEWAY = "kserve-ingress-gateway"
"""KServe's default kserveIngressGateway name; mlcluster's Gateway (render/inference_gateway.py) lives in KServe's
namespace under it."""
KNATIVE_SERVING_NAMESPACE = "knative-serving"
KOURIER_INGRESS_CLASS = "kourier.ingress.networking.knative.dev"


def _minor(version: str) -> tuple[int, int]:
    numbers = major_minor(version)
    if numbers is None:
        raise ValueError(f"not a chart version: {version}")
    return numbers


def kserve_chart_names(version: str) -> tuple[str, ...]:
    """KServe's charts for a version, in install order (CRDs, controller, runtimes)."""
    if _minor(version) >= SPLIT_CHARTS_SINCE:
        return ("kserve-crd", "kserve-resources", "kserve-runtime-configs")
    # Before the split, the one `kserve` chart carried the controller and the ClusterServingRuntimes.
    return ("kserve-crd", "kserve")


def deployment_mode_value(mode: str, version: str) -> str:
    """The chart/annotation string for a mode; charts before the split only know the old names."""
    if _minor(version) >= SPLIT_CHARTS_SINCE:
        return mode
    return {"Standard": "RawDeployment", "Knative": "Serverless"}[mode]


def cert_manager_release(spec: Spec) -> ChartRelease:
    return ChartRelease(
        name="cert-manager",
        chart="oci://quay.io/jetstack/charts/cert-manager",
        version=spec.kserve.cert_manager_version,
        namespace="cert-manager",
        values=tolerating(
            {"crds": {"enabled": True}},
            ["tolerations", "webhook.tolerations", "cainjector.tolerations", "startupapicheck.tolerations"],
            platform_tolerations(spec),
        ),
        upstream_chart="cert-manager",
    )


def metrics_server_release(spec: Spec) -> ChartRelease | None:
    if not metrics_server_wanted(spec.kserve, spec.cluster.mode, spec.cluster.provider):
        return None
    values: dict[str, Any] = {}
    if spec.cluster.mode == "kubeadm":
        # kubeadm's kubelets serve self-signed certificates (no serverTLSBootstrap), which metrics-server
        # cannot verify; it still authenticates to the kubelet with its service account.
        values["args"] = ["--kubelet-insecure-tls"]
    return ChartRelease(
        name="metrics-server",
        chart="metrics-server",
        repository="https://kubernetes-sigs.github.io/metrics-server/",
        version=spec.kserve.metrics_server_version,
        namespace="kube-system",
        values=tolerating(values, ["tolerations"], platform_tolerations(spec)),
    )


def knative_operator_release(spec: Spec) -> ChartRelease | None:
    if spec.kserve.deployment_mode != "Knative":
        return None
    return ChartRelease(
        name="knative-operator",
        chart="knative-operator",
        repository="https://knative.github.io/operator",
        version=spec.kserve.knative.operator_version,
        namespace=spec.kserve.knative.namespace,
        values=tolerating(
            {},
            ["knative_operator.knative_operator.tolerations", "knative_operator.operator_webhook.tolerations"],
            platform_tolerations(spec),
        ),
    )


def knative_serving(kserve: KserveSpec) -> dict[str, Any]:
    """The KnativeServing the operator turns into Knative Serving with Kourier as its ingress."""
    return {
        "apiVersion": "operator.knative.dev/v1beta1",
        "kind": "KnativeServing",
        "metadata": {
            "name": "knative-serving",
            "namespace": KNATIVE_SERVING_NAMESPACE,
            # KServe needs Knative's CRDs and webhook before its first InferenceService; wait until Ready.
            "annotations": {"pulumi.com/waitFor": "condition=Ready"},
        },
        "spec": {
            "version": kserve.knative.serving_version,
            "ingress": {"kourier": {"enabled": True}},
            "config": {
                "network": {"ingress-class": KOURIER_INGRESS_CLASS},
                # GPU endpoints carry tolerations (and may use node selectors); Knative rejects both by default.
                "features": {
                    "kubernetes.podspec-tolerations": "enabled",
                    "kubernetes.podspec-nodeselector": "enabled",
                    "kubernetes.podspec-affinity": "enabled",
                },
            },
        },
    }


def kserve_ingress_values(kserve: KserveSpec) -> dict[str, Any]:
    """kserve.controller.gateway values: HTTPRoutes on mlcluster's Gateway instead of Ingresses (the chart's own
    Gateway, createGateway, hard-codes its class; mlcluster declares class and Gateway itself)."""
    return {
        "domain": kserve.gateway.domain,
        "ingressGateway": {
            "enableGatewayApi": True,
            "kserveGateway": f"{kserve.namespace}/{KSERVE_GATEWAY}",
            "createGateway": False,
        },
    }


def kserve_releases(spec: Spec) -> list[ChartRelease]:
    """KServe's charts in install order, with the deployment mode set explicitly (the chart default is Knative)."""
    kserve = spec.kserve
    controller: dict[str, Any] = {"deploymentMode": deployment_mode_value(kserve.deployment_mode, kserve.version)}
    if kserve.deployment_mode == "Knative":
        # Kourier, not Istio, routes Knative traffic: KServe must not create Istio VirtualServices.
        controller["gateway"] = {"disableIstioVirtualHost": True}
    elif gateway_wanted(kserve):
        # Standard mode: an HTTPRoute per InferenceService on the Gateway mlcluster declares, not an Ingress.
        controller["gateway"] = kserve_ingress_values(kserve)
    values: dict[str, dict[str, Any]] = {
        "kserve-crd": {},
        "kserve-resources": {"kserve": {"controller": controller}},
        # The chart installs no ClusterServingRuntime unless asked; endpoints need them to find a runtime.
        "kserve-runtime-configs": {"kserve": {"servingruntime": {"enabled": True}}},
        "kserve": {"kserve": {"controller": controller}},
    }
    if llm_endpoints(kserve):
        # The LLMInferenceServiceConfig presets every LLMInferenceService is merged from (off by default).
        values["kserve-runtime-configs"]["kserve"]["llmisvcConfigs"] = {"enabled": True}
    return [
        ChartRelease(
            name=chart,
            chart=f"{KSERVE_CHARTS}/{chart}",
            version=kserve.version,
            namespace=kserve.namespace,
            values=tolerating(values[chart], CONTROLLER_TOLERATIONS.get(chart, []), platform_tolerations(spec)),
            upstream_chart=chart,
        )
        for chart in kserve_chart_names(kserve.version)
    ]


def keda_release(spec: Spec) -> ChartRelease | None:
    """KEDA, when an endpoint scales on a queue: KServe's keda class creates a ScaledObject KEDA acts on (and
    mlcluster one per autoscaled LLM endpoint)."""
    if not keda_wanted(spec.kserve):
        return None
    return ChartRelease(
        name="keda",
        chart="keda",
        repository="https://kedacore.github.io/charts",
        version=spec.kserve.keda_version,
        namespace=spec.kserve.keda_namespace,
        # The chart's global tolerations reach the operator, its metrics server and its webhooks.
        values=tolerating({}, ["tolerations"], platform_tolerations(spec)),
        upstream_chart="keda",
    )
