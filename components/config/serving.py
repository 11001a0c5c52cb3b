"""Model serving settings: KServe (and cert-manager), Knative for scale-to-zero, autoscaled endpoints."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from . import checks, formats
from .inference_gateway import EndpointVersionSpec, GatewaySpec, HeaderRouteSpec, validate_routes
from .llm import LlmEndpointSpec, LlmSpec
from .schema import Problems, join_path, setting, show

KNATIVE_COST = (
    "Knative installs at least eight more always-on Deployments (the Knative Operator and its webhook;"
    " Knative Serving's activator, autoscaler, controller and webhook; the Kourier gateway and its controller)"
    " to run and upgrade"
    " in step with KServe, and an endpoint scaled to zero waits for a cold start on the first request (pulling"
    " a multi-GB model image and loading weights takes minutes); use deploymentMode Standard unless"
    " scale-to-zero is worth that"
)


LLM_SINCE = (0, 20)
"""The first KServe release whose llmisvc charts mlcluster renders and validates (v0.20.0, the pinned one)."""
LLM_NAMESPACE = "kserve"
"""The namespace KServe v0.20.0's LLMInferenceService charts are built for."""

PLATFORM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "cert-manager", "knative-serving")
"""Namespaces mlcluster or Kubernetes own; endpoint namespaces are created (and deleted) by mlcluster."""


ENDPOINT_METRICS = ("cpu", "memory", "concurrency", "rps", "queue", "external")
QUEUE_METRICS = ("queue", "external")
"""Scaled by KEDA through KServe's `keda` autoscaler class (Standard mode): a Prometheus query, not an HPA metric."""
DEFAULT_QUEUE_METRIC = "vllm:num_requests_waiting"
"""vLLM's count of requests waiting for a batch slot: the queue length of KServe's Hugging Face runtime (vLLM)."""


def endpoint_metric_name(value: str) -> str | None:
    """An endpoint's metric, with the way to a queue length named when the metric is one KServe's HPA lacks."""
    if value in ENDPOINT_METRICS:
        return None
    return (
        f"is not an endpoint metric ({', '.join(ENDPOINT_METRICS)}): to scale an InferenceService on a queue"
        " length (e.g. vLLM's vllm:num_requests_waiting) use metric: queue with metricName (KEDA, deploymentMode"
        " Standard), or metric: external for a queue outside the model server"
    )


@dataclass(frozen=True)
class EndpointAutoscalingSpec:
    metric: str | None = setting(
        None,
        doc="What KServe scales on. Standard mode: `cpu` or `memory` utilisation % (HPA, default cpu); `queue`:"
        " a queue length the model server exports, summed over the endpoint's pods (KEDA); `external`: a queue"
        " length from elsewhere, e.g. a broker (KEDA; allows minReplicas 0). Knative mode (Knative's"
        " autoscaler): `concurrency` (in-flight requests per replica) or `rps` (requests per second per"
        " replica), default concurrency.",
        check=endpoint_metric_name,
    )
    target: int | None = setting(
        None,
        doc="Target per replica (default KServe's: 80 % CPU, or Knative's 100 concurrent requests; queue and"
        " external: 4 waiting requests).",
        check=checks.between(1, 100000),
    )
    metric_name: str | None = setting(
        None,
        doc="Prometheus series of a `queue` or `external` metric (queue default: vllm:num_requests_waiting).",
        check=checks.prometheus_metric_name,
    )

    def validate(self, path: str, problems: Problems) -> None:
        if self.metric in ("cpu", "memory") and self.target is not None and self.target > 100:
            problems.error(join_path(path, "target"), f"({self.target}) is a utilisation percentage: at most 100")
        if self.metric == "external" and not self.metric_name:
            problems.error(join_path(path, "metricName"), "is required when metric is external (the queue's series)")
        if self.metric_name and self.metric not in QUEUE_METRICS:
            problems.error(
                join_path(path, "metricName"),
                f"only applies to metric queue or external, not {self.metric or 'the default'}",
            )

    @property
    def queue_metric(self) -> str:
        """The Prometheus series a queue/external endpoint scales on."""
        return self.metric_name or DEFAULT_QUEUE_METRIC

    @property
    def queue_target(self) -> int:
        return self.target if self.target is not None else DEFAULT_QUEUE_TARGET


DEFAULT_QUEUE_TARGET = 4
"""Waiting requests per replica before KEDA adds one: a few queued requests keep a GPU's batches full."""


@dataclass(frozen=True)
class EndpointSpec:
    name: str = setting(doc="InferenceService name.", check=checks.k8s_name)
    model_format: str = setting(
        doc="Model format KServe picks a runtime for: huggingface, sklearn, xgboost, pytorch, triton, onnx, ...",
        check=lambda v: (
            None
            if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", v)
            else "is not a model format name such as huggingface or sklearn"
        ),
    )
    storage_uri: str = setting(
        doc="Where the model is: s3://, gs://, pvc://, hf://, oci://, https:// ...",
        check=formats.storage_uri,
    )
    namespace: str = setting("models", doc="Namespace of the endpoint (created if missing).", check=checks.k8s_name)
    runtime: str | None = setting(
        None,
        doc="ServingRuntime/ClusterServingRuntime name (default: KServe picks one for the format).",
        check=checks.k8s_name,
    )
    gpus: int = setting(
        0, doc="nvidia.com/gpu per replica (GPU endpoints tolerate the GPU taint).", check=checks.between(0, 16)
    )
    cpu: str = setting("1", doc="CPU request and limit per replica.", check=checks.quantity)
    memory: str = setting("4Gi", doc="Memory request and limit per replica.", check=checks.quantity)
    min_replicas: int = setting(
        1, doc="Fewest replicas; 0 (scale-to-zero) needs deploymentMode Knative.", check=checks.between(0, 1000)
    )
    max_replicas: int = setting(1, doc="Most replicas.", check=checks.between(1, 1000))
    autoscaling: EndpointAutoscalingSpec = setting(
        default_factory=EndpointAutoscalingSpec, doc="Autoscaling metric and target."
    )
    versions: tuple[EndpointVersionSpec, ...] = setting(
        (),
        doc="Versions behind one route (a canary): each an InferenceService <name>-<version>, weights in percent"
        " (Gateway API; deploymentMode Standard).",
    )
    header_routes: tuple[HeaderRouteSpec, ...] = setting(
        (), doc="Header values that send a request to one version (e.g. x-model: the model a client asks for)."
    )

    def validate(self, path: str, problems: Problems) -> None:
        validate_routes(path, self.versions, self.header_routes, self.name, problems)

    def isvc_names(self) -> list[str]:
        """The InferenceServices this endpoint is: itself, or one per version."""
        return [f"{self.name}-{v.name}" for v in self.versions] if self.versions else [self.name]


@dataclass(frozen=True)
class DeploymentAutoscalingSpec:
    metric: Literal["cpu", "memory", "pods", "external"] = setting(
        "cpu",
        doc="`cpu`/`memory`: average utilisation % (metrics-server); `pods`: a per-pod custom metric;"
        " `external`: a metric from outside the cluster such as a queue length (both need a metrics adapter).",
    )
    target: int = setting(
        70, doc="Utilisation % (cpu/memory) or average value per replica.", check=checks.between(1, 100000)
    )
    metric_name: str | None = setting(
        None,
        doc="Custom or external metric name (required for `pods` and `external`), e.g. queue_length: the"
        " Prometheus series prometheus-adapter serves under the same name.",
        check=checks.metric_name,
    )

    def validate(self, path: str, problems: Problems) -> None:
        custom = self.metric in ("pods", "external")
        if custom and not self.metric_name:
            problems.error(join_path(path, "metricName"), f"is required when metric is {self.metric}")
        if not custom and self.metric_name:
            problems.error(join_path(path, "metricName"), f"only applies to metric pods or external, not {self.metric}")
        if not custom and self.target > 100:
            problems.error(join_path(path, "target"), f"({self.target}) is a utilisation percentage: at most 100")


@dataclass(frozen=True)
class InferenceDeploymentSpec:
    name: str = setting(doc="Deployment, Service and HPA name.", check=checks.k8s_name)
    image: str = setting(
        doc="Container image of the inference server (pin a tag or digest).", check=formats.image_reference
    )
    namespace: str = setting("models", doc="Namespace (created if missing).", check=checks.k8s_name)
    port: int = setting(8080, doc="Container port the Service exposes.", check=checks.between(1, 65535))
    args: tuple[str, ...] = setting((), doc="Container arguments.")
    gpus: int = setting(0, doc="nvidia.com/gpu per replica.", check=checks.between(0, 16))
    cpu: str = setting("1", doc="CPU request per replica (the base of CPU utilisation).", check=checks.quantity)
    memory: str = setting("2Gi", doc="Memory request and limit per replica.", check=checks.quantity)
    min_replicas: int = setting(1, doc="Fewest replicas (HPA minReplicas).", check=checks.between(1, 1000))
    max_replicas: int = setting(4, doc="Most replicas (HPA maxReplicas).", check=checks.between(1, 1000))
    autoscaling: DeploymentAutoscalingSpec = setting(
        default_factory=DeploymentAutoscalingSpec, doc="HPA metric and target."
    )


OPERATOR_SERVING_SPAN = 4
"""Knative Serving minors a knative-operator release can install: its own and the three before it."""


def major_minor(version: str) -> tuple[int, int] | None:
    """(major, minor) of 1.21, v1.21.0 or v0.17.0-rc.1; None when the text does not start as a version."""
    match = re.match(r"^v?(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


@dataclass(frozen=True)
class KnativeSpec:
    operator_version: str = setting(
        "1.21.0",
        doc="knative-operator chart version, as its repository publishes it (no v).",
        check=checks.pinned_chart_version,
    )
    serving_version: str = setting(
        "1.21", doc="Knative Serving version the operator installs (KnativeServing spec.version)."
    )
    namespace: str = setting("knative-operator", doc="Namespace of the operator release.", check=checks.k8s_name)

    def validate(self, path: str, problems: Problems) -> None:
        operator, serving = major_minor(self.operator_version), major_minor(self.serving_version)
        if serving is None or not re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)?", self.serving_version):
            problems.error(
                join_path(path, "servingVersion"), f"{show(self.serving_version)} is not a version such as 1.21"
            )
        elif operator is not None and not (
            serving[0] == operator[0] and operator[1] - OPERATOR_SERVING_SPAN < serving[1] <= operator[1]
        ):
            # The operator bundles the manifests of its own minor and the three before it, nothing else.
            problems.error(
                join_path(path, "servingVersion"),
                f'"{self.serving_version}" is not shipped by knative-operator {self.operator_version}: pick'
                f" {operator[0]}.{max(operator[1] - OPERATOR_SERVING_SPAN + 1, 0)} to {operator[0]}.{operator[1]},"
                " or change operatorVersion",
            )


@dataclass(frozen=True)
class KserveSpec:
    enabled: bool = setting(True, doc="Install KServe (and cert-manager) for model serving.")
    version: str = setting("v0.20.0", doc="KServe chart version.", check=checks.pinned_chart_version)
    namespace: str = setting("kserve", doc="Namespace of the release.", check=checks.k8s_name)
    cert_manager_version: str = setting(
        "v1.21.1", doc="cert-manager chart version (installed before KServe).", check=checks.pinned_chart_version
    )
    deployment_mode: Literal["Standard", "Knative"] = setting(
        "Standard", doc="`Standard`: Deployments + HPA, no Knative. `Knative`: scale-to-zero, installs Knative."
    )
    knative: KnativeSpec = setting(default_factory=KnativeSpec, doc="Knative Serving (deploymentMode Knative only).")
    metrics_server: bool | None = setting(
        None,
        doc="Install metrics-server for CPU/memory HPAs (default: yes on kubeadm, generic and EKS clusters;"
        " no on GKE and AKS, which ship it).",
    )
    metrics_server_version: str = setting(
        "3.13.0", doc="metrics-server chart version.", check=checks.pinned_chart_version
    )
    gateway: GatewaySpec = setting(
        default_factory=GatewaySpec, doc="Gateway API in front of the endpoints (Envoy Gateway; docs/serving.md)."
    )
    keda_version: str = setting(
        "2.20.2",
        doc="KEDA chart version, installed when an endpoint scales on a queue (metric queue or external).",
        check=checks.pinned_chart_version,
    )
    keda_namespace: str = setting("keda", doc="Namespace of the KEDA release.", check=checks.k8s_name)
    endpoints: tuple[EndpointSpec, ...] = setting((), doc="Model endpoints, each a KServe InferenceService.")
    deployments: tuple[InferenceDeploymentSpec, ...] = setting(
        (), doc="Inference servers that are not KServe: Deployment + Service + HPA (autoscaling/v2)."
    )
    llm: LlmSpec = setting(
        default_factory=LlmSpec,
        doc="LLM endpoints: KServe LLMInferenceService (llm-d), routed by an endpoint picker, multi-node through"
        " LeaderWorkerSet (docs/serving.md).",
    )

    def validate(self, path: str, problems: Problems) -> None:
        items_by_key = (
            ("endpoints", self.endpoints),
            ("deployments", self.deployments),
            ("llm.endpoints", self.llm.endpoints),
        )
        for key, items in items_by_key:
            if not self.enabled and items:
                # The serving layer (and metrics-server with it) is only installed when KServe is.
                problems.error(join_path(path, key), "needs the serving layer: set kserve.enabled: true or remove them")
        if self.deployment_mode == "Knative":
            problems.warn(join_path(path, "deploymentMode"), KNATIVE_COST)
        self._validate_endpoints(join_path(path, "endpoints"), problems)
        self._validate_llm_endpoints(join_path(path, "llm.endpoints"), problems)
        # Whether a metrics adapter serves deployments' pods/external metrics depends on monitoring
        # (config/monitoring.py).
        self._validate_workloads(join_path(path, "deployments"), self.deployments, problems)

    def _validate_endpoints(self, path: str, problems: Problems) -> None:
        self._validate_workloads(path, self.endpoints, problems)
        self._validate_isvc_names(path, problems)
        if self.deployment_mode == "Knative":
            if self.gateway.enabled:
                problems.error(
                    "kserve.gateway.enabled",
                    "Gateway API routing is for deploymentMode Standard: Knative mode routes through Kourier;"
                    " switch kserve.deploymentMode to Standard, or leave gateway.enabled unset",
                )
            for i, endpoint in enumerate(self.endpoints):
                at = join_path(path, i)
                if endpoint.autoscaling.metric in QUEUE_METRICS:
                    problems.error(
                        join_path(at, "autoscaling.metric"),
                        f'"{endpoint.autoscaling.metric}" scales through KEDA, which KServe offers in deploymentMode'
                        " Standard only: switch kserve.deploymentMode to Standard, or scale on concurrency or rps",
                    )
                for key, items in (("versions", endpoint.versions), ("headerRoutes", endpoint.header_routes)):
                    if items:
                        problems.error(
                            join_path(at, key),
                            "routes through Gateway API, which mlcluster sets up in deploymentMode Standard: switch"
                            " kserve.deploymentMode to Standard, or remove them",
                        )
                if endpoint.autoscaling.metric in ("cpu", "memory"):
                    problems.error(
                        join_path(join_path(path, i), "autoscaling.metric"),
                        f'"{endpoint.autoscaling.metric}" in Knative mode needs Knative\'s HPA autoscaler class,'
                        " which cannot scale to zero: scale on concurrency or rps, or switch kserve.deploymentMode"
                        " to Standard",
                    )
            return
        for i, endpoint in enumerate(self.endpoints):
            at = join_path(path, i)
            self._validate_hostname(at, endpoint, problems)
            metric = endpoint.autoscaling.metric
            if endpoint.min_replicas == 0 and metric == "queue":
                # A queue the model server exports vanishes with its last pod: nothing would wake the endpoint.
                problems.error(
                    join_path(at, "minReplicas"),
                    "0 with metric queue never scales up again: the queue's series comes from the endpoint's own"
                    " pods, and at zero pods there is none; scale on metric external (a queue outside the model"
                    " server), or set minReplicas to 1 or more",
                )
            elif endpoint.min_replicas == 0 and metric != "external":
                problems.error(
                    join_path(at, "minReplicas"),
                    "0 (scale-to-zero) needs Knative, or KEDA with metric external (a queue outside the model"
                    " server): switch kserve.deploymentMode to Knative, scale on metric external, or set"
                    " minReplicas to 1 or more",
                )
            if (endpoint.versions or endpoint.header_routes) and not gateway_wanted(self):
                problems.error(
                    join_path(at, "versions" if endpoint.versions else "headerRoutes"),
                    "routes through Gateway API: set kserve.gateway.enabled: true (or leave it unset), or remove"
                    " versions and headerRoutes",
                )
            if endpoint.autoscaling.metric in ("concurrency", "rps"):
                problems.error(
                    join_path(at, "autoscaling.metric"),
                    f'"{endpoint.autoscaling.metric}" needs Knative\'s autoscaler: switch kserve.deploymentMode'
                    " to Knative, or scale on cpu or memory (Standard mode's HPA), or on a queue length (metric:"
                    " queue, through KEDA)",
                )

    def _validate_llm_endpoints(self, path: str, problems: Problems) -> None:
        """LLMInferenceServices route through the Gateway mlcluster declares, and live beside no platform."""
        if not self.llm.endpoints:
            return
        if self.deployment_mode == "Knative":
            # The llmisvc controller makes Deployments and LeaderWorkerSets only: no code path reads deploymentMode
            # (kserve v0.20.0 pkg/controller/v1alpha2/llmisvc), and Knative mode here routes through Kourier.
            problems.error(
                path,
                "are LLMInferenceServices, which have no Knative mode (KServe's llmisvc controller makes Deployments"
                " and LeaderWorkerSets and routes through Gateway API): switch kserve.deploymentMode to Standard,"
                " or serve them as kserve.endpoints",
            )
        elif not gateway_wanted(self):
            problems.error(
                path,
                "route through Gateway API (an HTTPRoute on kserve's Gateway): set kserve.gateway.enabled: true (or"
                " leave it unset), or remove them",
            )
        version = major_minor(self.version)
        if version is not None and version < LLM_SINCE:
            problems.error(
                "kserve.version",
                f"{show(self.version)} predates the LLMInferenceService API mlcluster writes"
                " (serving.kserve.io/v1alpha2,"
                f" KServe v{LLM_SINCE[0]}.{LLM_SINCE[1]}): raise kserve.version, or remove kserve.llm.endpoints",
            )
        if self.namespace != LLM_NAMESPACE:
            # kserve-llmisvc-crd's conversion webhook and CA injection name namespace kserve, and the controller
            # looks its presets up there (charts/kserve-llmisvc-crd/templates L5-19; config_merge.go L741-758).
            problems.error(
                "kserve.namespace",
                f"{show(self.namespace)} cannot hold LLM endpoints' controller: KServe's LLMInferenceService charts"
                f" hard-code namespace {LLM_NAMESPACE} (the CRD's conversion webhook); set kserve.namespace:"
                f" {LLM_NAMESPACE}, or remove kserve.llm.endpoints",
            )
        platform = self._platform_namespaces()
        for i, endpoint in enumerate(self.llm.endpoints):
            if endpoint.namespace in platform:
                problems.error(
                    join_path(join_path(path, i), "namespace"),
                    f'"{endpoint.namespace}" belongs to the platform: put models in their own namespace, e.g. models',
                )

    def _platform_namespaces(self) -> set[str]:
        platform = {self.namespace, self.knative.namespace, self.gateway.namespace, self.keda_namespace}
        platform |= {self.llm.lws_namespace, self.llm.ai_gateway_namespace}
        return platform | set(PLATFORM_NAMESPACES)

    def _validate_hostname(self, at: str, endpoint: EndpointSpec, problems: Problems) -> None:
        """The host KServe gives the endpoint on the Gateway (<name>-<namespace>.<domain>) is a route hostname
        too: its first label a DNS label (63), the whole at most 253 (checks.gateway_hostname)."""
        if not gateway_wanted(self) or checks.gateway_hostname(self.gateway.domain):
            return
        first = f"{endpoint.name}-{endpoint.namespace}"
        host = f"{first}.{self.gateway.domain}"
        if len(first) > 63:
            problems.error(
                join_path(at, "name"),
                f"makes the host label {first!r} ({len(first)} characters): a DNS label holds at most 63; shorten the"
                " name or the namespace",
            )
        elif len(host) > checks.HOSTNAME_MAX:
            problems.error(
                join_path(at, "name"),
                f"makes the host {host[:40]}... ({len(host)} characters) under kserve.gateway.domain: Gateway API"
                f" takes at most {checks.HOSTNAME_MAX}; shorten the domain",
            )

    def _validate_isvc_names(self, path: str, problems: Problems) -> None:
        """A version's InferenceService (<endpoint>-<version>) must not take another endpoint's name."""
        owners: dict[tuple[str, str], int] = {}
        for i, endpoint in enumerate(self.endpoints):
            for name in endpoint.isvc_names():
                key = (endpoint.namespace, name)
                other = owners.setdefault(key, i)
                if other == i or not (endpoint.versions or self.endpoints[other].versions):
                    continue  # the same endpoint, or two plain endpoints (_validate_workloads reports those)
                versioned, taken = (i, other) if endpoint.versions else (other, i)
                problems.error(
                    join_path(join_path(path, versioned), "versions"),
                    f"make an InferenceService {name} in namespace {endpoint.namespace}, which"
                    f" {join_path(path, taken)} is too",
                )

    def _validate_workloads(
        self, path: str, items: Sequence[EndpointSpec | InferenceDeploymentSpec], problems: Problems
    ) -> None:
        """Rules endpoints and deployments share: unique per namespace, not in a platform namespace, min <= max."""
        platform = self._platform_namespaces()
        seen: dict[tuple[str, str], int] = {}
        for i, item in enumerate(items):
            at = join_path(path, i)
            key = (item.namespace, item.name)
            if key in seen:
                problems.error(
                    join_path(at, "name"),
                    f'"{item.name}" is already used in namespace {item.namespace} by {join_path(path, seen[key])}',
                )
            seen.setdefault(key, i)
            if item.namespace in platform:
                problems.error(
                    join_path(at, "namespace"),
                    f'"{item.namespace}" belongs to the platform: put models in their own namespace, e.g. models',
                )
            if item.min_replicas > item.max_replicas:
                problems.error(
                    join_path(at, "minReplicas"),
                    f"({item.min_replicas}) must not exceed maxReplicas ({item.max_replicas})",
                )


def gateway_wanted(spec: KserveSpec) -> bool:
    """Gateway API routing: on by default in Standard mode (KServe's raw deployments); Knative uses Kourier."""
    if not spec.enabled:
        return False
    if spec.gateway.enabled is not None:
        return spec.gateway.enabled
    return spec.deployment_mode == "Standard"


def llm_endpoints(spec: KserveSpec) -> tuple[LlmEndpointSpec, ...]:
    """The LLMInferenceServices the stack makes (validation refuses them where they cannot route)."""
    if not spec.enabled or spec.deployment_mode != "Standard" or not gateway_wanted(spec):
        return ()
    return spec.llm.endpoints


def lws_wanted(spec: KserveSpec) -> bool:
    """LeaderWorkerSet, when a replica spans nodes: no KServe chart bundles it (its ClusterRole only grants access)."""
    return any(e.multi_node for e in llm_endpoints(spec))


def ai_gateway_wanted(spec: KserveSpec) -> bool:
    """Envoy AI Gateway, when an endpoint routes through its picker: Envoy Gateway v1.9.0 reaches an InferencePool
    only through an extension server's custom backend (envoyproxy/gateway v1.9.0 internal/xds/translator, the
    extension-xds-ir http-route-custom-backend cases)."""
    return any(e.routing == "picker" for e in llm_endpoints(spec))


def autoscaled_llm_endpoints(spec: KserveSpec) -> list[LlmEndpointSpec]:
    return [e for e in llm_endpoints(spec) if e.autoscaling is not None]


def queue_endpoints(spec: KserveSpec) -> list[EndpointSpec]:
    """Endpoints KEDA scales (KServe's `keda` autoscaler class) on a queue length read from Prometheus."""
    if not spec.enabled or spec.deployment_mode != "Standard":
        return []
    return [e for e in spec.endpoints if e.autoscaling.metric in QUEUE_METRICS]


def keda_wanted(spec: KserveSpec) -> bool:
    """KEDA, when an endpoint or an LLM endpoint scales on a queue length read from Prometheus."""
    return bool(queue_endpoints(spec)) or bool(autoscaled_llm_endpoints(spec))


def metrics_server_wanted(spec: KserveSpec, cluster_mode: str, provider: str) -> bool:
    """GKE and AKS run metrics-server themselves; kubeadm, generic and EKS clusters do not have it."""
    if spec.metrics_server is not None:
        return spec.metrics_server
    return cluster_mode == "kubeadm" or provider not in ("gke", "aks")


def needs_resource_metrics(spec: KserveSpec) -> bool:
    """Whether any HPA scales on cpu/memory (which the metrics API, i.e. metrics-server, serves)."""
    standard_endpoints = spec.deployment_mode == "Standard" and any(
        e.autoscaling.metric not in QUEUE_METRICS for e in spec.endpoints
    )
    return bool(standard_endpoints) or any(d.autoscaling.metric in ("cpu", "memory") for d in spec.deployments)


def _workloads(spec: KserveSpec) -> list[tuple[str, EndpointSpec | InferenceDeploymentSpec]]:
    """Every endpoint and inference deployment with its key path."""
    workloads: list[tuple[str, EndpointSpec | InferenceDeploymentSpec]] = [
        (f"kserve.endpoints[{i}]", e) for i, e in enumerate(spec.endpoints)
    ]
    workloads += [(f"kserve.deployments[{i}]", d) for i, d in enumerate(spec.deployments)]
    return workloads


def validate_serving_on_cluster(
    spec: KserveSpec,
    *,
    cluster_mode: str,
    provider: str,
    node_gpus: list[int],
    team_namespaces: list[str],
    problems: Problems,
) -> None:
    """Rules that need the rest of the stack: GPU endpoints must fit a node; namespaces Kueue creates for teams
    are not created twice; CPU/memory HPAs need the metrics API."""
    if not spec.enabled:
        return
    largest = max(node_gpus, default=0)
    where = f"the largest GPU node has {largest}" if largest else "no node in nodes has a gpu section"
    for at, item in _workloads(spec):
        if item.namespace in team_namespaces:
            problems.error(
                join_path(at, "namespace"),
                f'"{item.namespace}" is a Kueue team namespace (kueue.teams creates it): serve from a'
                " namespace of its own, e.g. models",
            )
        # Only kubeadm stacks list their nodes; on an existing cluster the GPU inventory is unknown here.
        if cluster_mode == "kubeadm" and item.gpus > largest:
            problems.error(join_path(at, "gpus"), f"({item.gpus}) per replica can never be scheduled: {where}")
    if needs_resource_metrics(spec) and not metrics_server_wanted(spec, cluster_mode, provider):
        problems.warn(
            "kserve.metricsServer",
            "is false but HPAs scale on cpu/memory, which needs the metrics API: make sure the cluster"
            " runs metrics-server, or set kserve.metricsServer: true",
        )
