"""LLM endpoints: KServe's LLMInferenceService (serving.kserve.io/v1alpha2, llm-d), routed through the Gateway API
Inference Extension (an InferencePool and its endpoint picker), multi-node replicas through LeaderWorkerSet.

What the pinned KServe v0.20.0 does with each setting is read from its source (kserve/kserve@v0.20.0):
- model URIs: pkg/controller/v1alpha2/llmisvc/workload_storage.go L89-204 takes pvc://, oci://, oci+native://,
  hf:// and s3://; any other scheme fails at reconcile ("unsupported schema in model URI"), never at admission.
- the served name goes into the preset's `eval "exec vllm serve ... --served-model-name "<name>" ..."`
  (charts/kserve-runtime-configs/files/llmisvcconfigs/resources.yaml L2566): a shell word inside eval.
- parallelism: the single-node preset passes only --tensor-parallel-size (same file, L2566); across nodes the shipped
  preset is data parallel (kserve-config-llm-worker-data-parallel, L2669-2860: --data-parallel-size{,-local}); no
  pipeline-parallel preset ships (pkg/controller/v1alpha2/llmisvc/config_merge.go L90-95, L228-263).
- a LeaderWorkerSet group is `data / dataLocal` pods (pkg/apis/serving/v1alpha2/llm_inference_service_types_func.go
  L102-117); prefill/decode routing needs the scheduler (pkg/controller/v1alpha2/llmisvc/scheduler.go L492-553).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from . import checks
from .schema import Problems, join_path, setting, show

LLM_MODEL_SCHEMES = ("hf", "pvc", "oci", "oci+native", "s3")
"""The schemes KServe v0.20.0's llmisvc controller attaches (workload_storage.go L89-204)."""

SERVED_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")
"""An OpenAI model name as clients send it (a Hugging Face id such as Qwen/Qwen2.5-7B-Instruct): the preset puts it
in a shell word inside `eval`, so quotes, `$`, blanks and `;` would run in the model server's container."""

DEFAULT_LLM_QUEUE_METRIC = "vllm:num_requests_waiting"
"""vLLM's requests waiting for a batch slot: the llm-d image serves vLLM."""
DEFAULT_LLM_QUEUE_TARGET = 4


LONGEST_CHILD_SUFFIX = "-kserve-self-signed-certs"
"""The longest suffix KServe's llmisvc controller and presets append to an endpoint's name (kmeta.ChildName in
pkg/controller/v1alpha2/llmisvc and the presets' `ChildName`): above 63 the name is cut and hashed, and the objects
the plan names would not be the ones made."""
LLM_NAME_MAX = 63 - len(LONGEST_CHILD_SUFFIX)


def llm_endpoint_name(value: str) -> str | None:
    """Every object the controller derives keeps the name whole, and its Services (<name>-epp-service,
    <name>-kserve-workload-svc) are DNS-1035 labels, which start with a letter."""
    problem = checks.k8s_name(value)
    if problem is not None:
        return problem
    if len(value) > LLM_NAME_MAX:
        return (
            f"is {len(value)} characters: KServe names objects <name>{LONGEST_CHILD_SUFFIX}, so at most {LLM_NAME_MAX}"
        )
    if not value[0].isalpha():
        return "starts with a digit: KServe makes Services named after it, and a Service name starts with a letter"
    return None


def llm_model_uri(value: str) -> str | None:
    scheme, sep, rest = value.partition("://")
    if not sep or not rest or re.search(r"\s", value) or "\x00" in value:
        return (
            "is not a model URI such as hf://Qwen/Qwen2.5-7B-Instruct, pvc://claim/path, oci://registry/image:tag"
            " or s3://bucket/path"
        )
    if scheme not in LLM_MODEL_SCHEMES:
        return (
            f"has scheme {scheme}://, which KServe's LLMInferenceService does not take (it takes"
            f" {', '.join(s + '://' for s in LLM_MODEL_SCHEMES)}; others fail only when the controller reconciles):"
            " copy the model to a PVC or an OCI image, or serve it as an InferenceService (kserve.endpoints)"
        )
    if scheme == "pvc" and "/" not in rest.strip("/"):
        return "names no path inside the claim: pvc://<claim>/<path to the model directory>"
    return None


def served_model_name(value: str) -> str | None:
    if not SERVED_NAME.fullmatch(value) or ".." in value.split("/"):
        return (
            "is not a model name clients can send (letters, digits, '.', '_', '-' and '/', at most 128, starting"
            " with a letter or digit), e.g. Qwen/Qwen2.5-7B-Instruct"
        )
    return None


@dataclass(frozen=True)
class LlmAutoscalingSpec:
    max_replicas: int = setting(doc="Most replicas KEDA scales the decode workload to.", check=checks.between(1, 1000))
    target: int = setting(
        DEFAULT_LLM_QUEUE_TARGET,
        doc="Waiting requests per replica before KEDA adds one.",
        check=checks.between(1, 100000),
    )
    metric_name: str = setting(
        DEFAULT_LLM_QUEUE_METRIC,
        doc="Prometheus series of the model server's queue, summed over the endpoint's pods.",
        check=checks.prometheus_metric_name,
    )


@dataclass(frozen=True)
class LlmPrefillSpec:
    replicas: int = setting(1, doc="Prefill pods (a fixed count).", check=checks.between(1, 1000))
    gpus: int | None = setting(
        None, doc="GPUs per prefill pod (default: the decode pod's).", check=checks.between(1, 16)
    )
    tensor_parallel: int | None = setting(
        None, doc="Tensor-parallel size of a prefill pod (default: its GPUs).", check=checks.between(1, 16)
    )


@dataclass(frozen=True)
class LlmEndpointSpec:
    name: str = setting(
        doc="LLMInferenceService name; the OpenAI path is /<namespace>/<name>/v1/... on the Gateway.",
        check=llm_endpoint_name,
    )
    model: str = setting(
        doc="The model: hf://<org>/<repo>, pvc://<claim>/<path>, oci://<image> (a modelcar) or s3://<bucket>/<path>.",
        check=llm_model_uri,
    )
    model_name: str | None = setting(
        None,
        doc="The name clients send as `model` (default: the endpoint's name).",
        check=served_model_name,
    )
    namespace: str = setting("models", doc="Namespace (created if missing).", check=checks.k8s_name)
    gpus: int = setting(
        1,
        doc="nvidia.com/gpu per replica. More than one node has: set nodes (a replica over several nodes).",
        check=checks.between(1, 1024),
    )
    nodes: int = setting(
        1,
        doc="Pods per replica, each on its own node: above 1 a LeaderWorkerSet group serving the model data parallel"
        " (KServe's shipped multi-node preset), gpus divided evenly among them.",
        check=checks.between(1, 64),
    )
    tensor_parallel: int | None = setting(
        None,
        doc="Tensor-parallel size of each model copy (default: all of a pod's GPUs); a pod's GPUs divided by it are"
        " its data-parallel ranks.",
        check=checks.between(1, 16),
    )
    expert_parallel: bool = setting(
        False, doc="Spread a mixture-of-experts model's experts over the data-parallel ranks (multi-node only)."
    )
    replicas: int = setting(1, doc="Replicas (with autoscaling: the fewest KEDA keeps).", check=checks.between(1, 1000))
    cpu: str = setting("8", doc="CPU request and limit per pod.", check=checks.quantity)
    memory: str = setting("64Gi", doc="Memory request and limit per pod.", check=checks.quantity)
    routing: Literal["picker", "service"] = setting(
        "picker",
        doc="`picker`: an InferencePool whose endpoint picker (llm-d) routes each request by KV-cache and queue state"
        " (Gateway API Inference Extension, through Envoy AI Gateway); `service`: the route sends requests to the"
        " workload Service, round robin.",
    )
    prefill: LlmPrefillSpec | None = setting(
        None, doc="Prefill/decode disaggregation: separate prefill pods; the replicas above decode."
    )
    autoscaling: LlmAutoscalingSpec | None = setting(
        None, doc="Scale the decode workload on the model server's queue (KEDA), from replicas to maxReplicas."
    )
    queue: str | None = setting(
        None,
        doc="A kueue.teams name: Kueue admits the endpoint's pods against that team's quota (the endpoint then lives"
        " in the team's namespace).",
        check=checks.k8s_name,
    )

    @property
    def served_name(self) -> str:
        return self.model_name or self.name

    @property
    def gpus_per_pod(self) -> int:
        return self.gpus // self.nodes if self.gpus % self.nodes == 0 else self.gpus

    @property
    def tensor(self) -> int:
        return self.tensor_parallel or self.gpus_per_pod

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1

    @property
    def data_local(self) -> int:
        """Data-parallel ranks in one pod (multi-node): its GPUs over the tensor-parallel size."""
        return max(self.gpus_per_pod // self.tensor, 1)

    @property
    def prefill_gpus(self) -> int:
        return (self.prefill.gpus if self.prefill and self.prefill.gpus else None) or self.gpus_per_pod

    def validate(self, path: str, problems: Problems) -> None:
        if self.gpus % self.nodes:
            problems.error(
                join_path(path, "gpus"),
                f"({self.gpus}) does not divide among nodes ({self.nodes}): every pod of a replica holds as many GPUs",
            )
        elif self.gpus_per_pod % self.tensor:
            problems.error(
                join_path(path, "tensorParallel"),
                f"({self.tensor}) does not divide a pod's {self.gpus_per_pod} GPUs: each data-parallel rank takes"
                " tensorParallel GPUs",
            )
        elif not self.multi_node and self.tensor != self.gpus_per_pod:
            problems.error(
                join_path(path, "tensorParallel"),
                f"({self.tensor}) on one node must be the replica's gpus ({self.gpus}): KServe's single-node preset"
                " serves one model copy over all the pod's GPUs (--tensor-parallel-size); leave it unset",
            )
        if self.expert_parallel and not self.multi_node:
            problems.error(
                join_path(path, "expertParallel"),
                "is passed by KServe's multi-node (data-parallel) preset only: set nodes above 1, or remove it",
            )
        if self.prefill is not None:
            self._validate_prefill(join_path(path, "prefill"), self.prefill, problems)
        if self.autoscaling is not None and self.autoscaling.max_replicas < self.replicas:
            problems.error(
                join_path(path, "autoscaling.maxReplicas"),
                f"({self.autoscaling.max_replicas}) must not be below replicas ({self.replicas})",
            )

    def _validate_prefill(self, path: str, prefill: LlmPrefillSpec, problems: Problems) -> None:
        if self.routing != "picker":
            problems.error(
                path,
                "needs routing: picker: only the endpoint picker sends a request to a prefill pod and then to a"
                " decode pod (KServe scheduler.go L492-553); the workload Service would mix them",
            )
        if self.multi_node:
            problems.error(
                path,
                "with nodes above 1 is not rendered by mlcluster yet (KServe's decode-worker-data-parallel"
                " preset): disaggregate single-node replicas, or span nodes without prefill",
            )
        tensor = prefill.tensor_parallel or self.prefill_gpus
        if self.prefill_gpus != tensor:
            problems.error(
                join_path(path, "tensorParallel"),
                f"({tensor}) must be the prefill pod's gpus ({self.prefill_gpus}): the prefill preset serves one"
                " model copy over all its GPUs",
            )


@dataclass(frozen=True)
class LlmSpec:
    endpoints: tuple[LlmEndpointSpec, ...] = setting(
        (), doc="LLM endpoints, each a KServe LLMInferenceService (docs/serving.md)."
    )
    lws_version: str = setting(
        "v0.10.0",
        doc="LeaderWorkerSet chart version, installed when an endpoint spans nodes.",
        check=checks.pinned_chart_version,
    )
    lws_namespace: str = setting("lws-system", doc="Namespace of the LeaderWorkerSet release.", check=checks.k8s_name)
    ai_gateway_version: str = setting(
        "v1.1.0",
        doc="Envoy AI Gateway chart version, installed when an endpoint routes through its picker: Envoy Gateway"
        " reaches an InferencePool only through this extension.",
        check=checks.pinned_chart_version,
    )
    ai_gateway_namespace: str = setting(
        "envoy-ai-gateway-system", doc="Namespace of the Envoy AI Gateway releases.", check=checks.k8s_name
    )

    def validate(self, path: str, problems: Problems) -> None:
        seen: dict[tuple[str, str], int] = {}
        for i, endpoint in enumerate(self.endpoints):
            at = join_path(join_path(path, "endpoints"), i)
            key = (endpoint.namespace, endpoint.name)
            if key in seen:
                problems.error(
                    join_path(at, "name"),
                    f"{show(endpoint.name)} is already used in namespace {endpoint.namespace} by"
                    f" {join_path(join_path(path, 'endpoints'), seen[key])}",
                )
            seen.setdefault(key, i)


def gpu_sharing(mig_strategy: str, time_slicing_replicas: int | None) -> str | None:
    """How the device plugin shares a GPU: `time-slicing` (one GPU advertised several times), `mig` (a slice
    advertised as nvidia.com/gpu), or None."""
    if time_slicing_replicas is not None:
        return "time-slicing"
    return "mig" if mig_strategy != "none" else None


def validate_llm_on_cluster(
    llm: LlmSpec,
    endpoints: tuple[LlmEndpointSpec, ...],
    *,
    node_gpus: list[int] | None,
    gpu_sharing: str | None,
    team_namespaces: dict[str, str],
    rdma: bool,
    problems: Problems,
) -> None:
    """LLM endpoints against the nodes, the GPU sharing and the Kueue teams. node_gpus: each GPU node's count (None:
    an existing cluster, whose inventory the stack does not list). team_namespaces: team -> its LocalQueue's
    namespace (empty when Kueue is off)."""
    largest = max(node_gpus or [], default=0)
    for i, endpoint in enumerate(llm.endpoints):
        if endpoint not in endpoints:
            continue
        at = join_path("kserve.llm.endpoints", i)
        _fits_nodes(at, endpoint, node_gpus, largest, problems)
        if gpu_sharing == "time-slicing":
            # vLLM preallocates --gpu-memory-utilization (0.9) of the device: a second pod on a shared GPU gets OOM.
            problems.error(
                at,
                "runs vLLM, which takes 90% of a GPU's memory at start (--gpu-memory-utilization 0.9): on"
                " time-sliced GPUs (gpuOperator.timeSlicingReplicas) a second pod on the same GPU fails to start;"
                " serve it from a cluster without time-slicing, or as kserve.endpoints with a small model",
            )
        elif gpu_sharing == "mig" and (endpoint.gpus_per_pod > 1 or endpoint.multi_node):
            # NVIDIA MIG user guide: no GPU-to-GPU (P2P, NVLink) communication between MIG instances, which NCCL's
            # tensor and data parallelism need.
            problems.error(
                join_path(at, "gpus"),
                f"({endpoint.gpus}) spans MIG slices (gpuOperator.migStrategy): NCCL cannot join MIG instances for"
                " tensor or data parallelism; serve a model that fits one slice (gpus: 1, nodes: 1)",
            )
        _queue_fits(at, endpoint, team_namespaces, problems)
        if endpoint.prefill is not None and not rdma:
            problems.warn(
                join_path(at, "prefill"),
                "moves each request's KV cache from a prefill pod to a decode pod over NIXL, and without"
                " network.rdma that is TCP between nodes: expect the transfer to cost more than disaggregation saves"
                " unless both pods share a node (NVLink)",
            )


def _fits_nodes(
    at: str, endpoint: LlmEndpointSpec, node_gpus: list[int] | None, largest: int, problems: Problems
) -> None:
    if node_gpus is None:
        return
    if not node_gpus:
        problems.error(join_path(at, "gpus"), "can never be scheduled: no node in nodes has a gpu section")
        return
    if endpoint.gpus_per_pod > largest and not endpoint.multi_node:
        fitting = [n for n in range(2, 65) if endpoint.gpus % n == 0 and endpoint.gpus // n <= largest]
        hint = f"set nodes: {fitting[0]} (a LeaderWorkerSet group, data parallel)" if fitting else "use fewer GPUs"
        problems.error(
            join_path(at, "gpus"),
            f"({endpoint.gpus}) per replica can never be scheduled on one node: the largest GPU node has {largest};"
            f" {hint}",
        )
    elif endpoint.gpus_per_pod > largest:
        problems.error(
            join_path(at, "gpus"),
            f"({endpoint.gpus}) over {endpoint.nodes} nodes is {endpoint.gpus_per_pod} per pod: the largest GPU node"
            f" has {largest}; raise nodes or lower gpus",
        )
    wide = sum(1 for count in node_gpus if count >= endpoint.gpus_per_pod)
    if endpoint.multi_node and wide < endpoint.nodes:
        problems.error(
            join_path(at, "nodes"),
            f"({endpoint.nodes}) pods of {endpoint.gpus_per_pod} GPUs each need as many nodes with that many GPUs:"
            f" the stack has {wide}",
        )
    if endpoint.prefill is not None and endpoint.prefill_gpus > largest:
        problems.error(
            join_path(at, "prefill.gpus"),
            f"({endpoint.prefill_gpus}) per prefill pod can never be scheduled: the largest GPU node has {largest}",
        )


def _queue_fits(at: str, endpoint: LlmEndpointSpec, team_namespaces: dict[str, str], problems: Problems) -> None:
    if endpoint.queue is None:
        if endpoint.namespace in team_namespaces.values():
            problems.error(
                join_path(at, "namespace"),
                f'"{endpoint.namespace}" is a Kueue team namespace (kueue.teams creates it): set queue to that team,'
                " or serve from a namespace of its own, e.g. models",
            )
        return
    if not team_namespaces:
        problems.error(join_path(at, "queue"), "names a Kueue team, and Kueue is off: set kueue.enabled, or remove it")
    elif endpoint.queue not in team_namespaces:
        problems.error(
            join_path(at, "queue"),
            f"{show(endpoint.queue)} is no kueue.teams name (teams: {', '.join(sorted(team_namespaces))})",
        )
    elif endpoint.namespace != team_namespaces[endpoint.queue]:
        problems.error(
            join_path(at, "namespace"),
            f"{show(endpoint.namespace)} is not team {endpoint.queue}'s namespace ({team_namespaces[endpoint.queue]}):"
            " a pod names a LocalQueue of its own namespace",
        )
