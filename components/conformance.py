"""`python -m components.conformance`: a stack's CNCF Kubernetes AI Conformance evidence pack.

    python -m components.conformance --stack onprem --out build/onprem/ai-conformance
    python -m components.conformance --stack-file path/to/Pulumi.x.yaml

For the stack's Kubernetes minor it fills the upstream checklist (AIConformance-1.<minor>.yaml, read at run time
from the shared upstream fixtures, never copied here): `id`, `description` and `level` exactly as upstream, and
`status`, `evidence` and `notes` from what the stack installs (its typed Spec and the render functions). Every
newer checklist found (a draft such as 1.36) is filled too, so that its SHOULDs are reported before they count.
Exit 0 with the pack written; exit 2 when the config is invalid or no checklist exists for the stack's minor.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .config import checks
from .config.derived import GPU_TAINT, custom_metric_deployments, lost_musts, monitoring_wanted
from .config.gpu import MIG_CONFIG_LABEL
from .config.serving import gateway_wanted, llm_endpoints
from .config.spec import Spec
from .config.stack_cli import PROJECT_ROOT
from .render import gpu_operator as gpu_render
from .render.kueue import integrations, wait_for_pods_ready
from .render.monitoring import (
    ADAPTER_RELEASE,
    DCGM_DEFAULT_COUNTERS,
    DCGM_METRICS_CONFIG,
    KPS_RELEASE,
    dcgm_scraped,
    scrape_monitors,
)
from .render.serving import KSERVE_GATEWAY

TEMPLATES_ENV = "MLCLUSTER_AI_CONFORMANCE_TEMPLATES"
DEFAULT_TEMPLATES = PROJECT_ROOT.parent / "shared" / "fixtures" / "upstream" / "conformance" / "cncf-k8s-ai-conformance"
_TEMPLATE_NAME = re.compile(r"AIConformance-1\.(\d+)\.yaml")

IMPLEMENTED = "Implemented"
NOT_IMPLEMENTED = "Not Implemented"
PARTIALLY = "Partially Implemented"
NOT_APPLICABLE = "N/A"


@dataclass(frozen=True)
class Assessment:
    status: str
    evidence: list[str] = field(default_factory=list)
    notes: str = ""


def templates_dir(given: Path | None = None) -> Path:
    if given is not None:
        return given
    return Path(os.environ.get(TEMPLATES_ENV) or DEFAULT_TEMPLATES)


def templates(directory: Path) -> dict[int, Path]:
    """Kubernetes minor -> checklist file, for every AIConformance-1.<minor>.yaml in the directory."""
    found = {}
    for path in directory.glob("AIConformance-1.*.yaml") if directory.is_dir() else ():
        if match := _TEMPLATE_NAME.fullmatch(path.name):
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def stack_minor(spec: Spec) -> int:
    return checks.version_tuple(spec.kubernetes_version)[1]


# --- one assessment per checklist id ------------------------------------------------------------------------------


def _dra_support(spec: Spec) -> Assessment:
    version = spec.kubernetes_version
    gpu = spec.gpu_operator
    where = (
        "kubeadm ClusterConfiguration (components/render/kubeadm.py) leaves resource.k8s.io on"
        if spec.cluster.mode == "kubeadm"
        else "served by the provider's API server"
    )
    evidence = [f"Kubernetes {version}: resource.k8s.io/v1 (DRA) is GA and served by default; {where}"]
    if gpu.enabled and gpu.dra:
        evidence += [
            f"HelmRelease {gpu_render.DRA_RELEASE}/{gpu_render.DRA_NAMESPACE} (chart nvidia-dra-driver-gpu"
            f" {gpu.dra_driver_version}): values gpuResourcesEnabledOverride: true, resources.gpus.enabled: true;"
            " GPUs published as ResourceSlices, DeviceClass gpu.nvidia.com",
            "HelmRelease gpu-operator: values devicePlugin.enabled: false (GPUs are not advertised twice)",
        ]
        notes = "GPUs are requested with ResourceClaims (gpuOperator.dra: true)."
    else:
        notes = (
            "The DRA API is served; this stack advertises GPUs through the device plugin (nvidia.com/gpu)."
            " gpuOperator.dra: true publishes them through NVIDIA's DRA driver instead."
        )
    evidence.append("docs/gpu.md#dra-dynamic-resource-allocation")
    return Assessment(IMPLEMENTED, evidence, notes)


def _driver_runtime_management(spec: Spec) -> Assessment:
    gpu = spec.gpu_operator
    if not gpu.enabled:
        return Assessment(NOT_IMPLEMENTED, notes="gpuOperator.enabled is false: nothing manages drivers or runtimes.")
    evidence = [
        f"HelmRelease gpu-operator/{gpu.namespace} (chart gpu-operator {gpu.version}): values driver.enabled"
        f" (gpuOperator.driver: {gpu.driver}), driver.upgradePolicy, toolkit.enabled; the operator's validator"
        " checks driver and toolkit on every GPU node before the device plugin starts",
        "docs/gpu.md#from-preflight-to-helm-values-in-the-same-up",
        "docs/cluster-care.md#gpu-driver-and-gpu-stack-upgrades",
    ]
    if spec.cluster.mode == "kubeadm":
        evidence.insert(
            1,
            "gpu-preflight step on every GPU node (components/scripts/gpu-preflight.sh): driver version, nouveau,"
            " kernel headers; decides driver.enabled per node (docs/gpu.md#the-gpu-preflight)",
        )
    return Assessment(
        IMPLEMENTED,
        evidence,
        "Driver and runtime versions are verified by the operator's validator, not yet through DRA attributes.",
    )


def _gpu_sharing(spec: Spec) -> Assessment:
    gpu = spec.gpu_operator
    if not gpu.enabled:
        return Assessment(NOT_IMPLEMENTED, notes="gpuOperator.enabled is false.")
    per_node = sorted({n.name for n in spec.nodes if n.gpu is not None and n.gpu.time_slicing_replicas})
    mig_nodes = sorted({n.name for n in spec.nodes if n.gpu is not None and n.gpu.mig_config})
    evidence = [
        "docs/gpu.md#mig (hardware partitioning: gpuOperator.migStrategy, nodes[].gpu.migConfig)",
        "docs/gpu.md#time-slicing (oversubscription: gpuOperator.timeSlicingReplicas, nodes[].gpu.timeSlicingReplicas)",
    ]
    used = []
    if gpu.mig_strategy != "none":
        used.append(f"HelmRelease gpu-operator values mig.strategy: {gpu.mig_strategy}")
    if mig_nodes:
        used.append(f"node label {MIG_CONFIG_LABEL} on {', '.join(mig_nodes)}")
    if gpu.time_slicing_replicas or per_node:
        used.append(f"ConfigMap {gpu_render.DEVICE_PLUGIN_CONFIG_MAP} (devicePlugin.config: time-slicing replicas)")
    notes = "This stack shares GPUs: " + "; ".join(used) + "." if used else "Available; this stack shares no GPU."
    if gpu.dra:
        notes += " With DRA, sharing is not yet exposed through DRA by this stack."
    return Assessment(IMPLEMENTED, [*used, *evidence], notes)


def _virtualized_accelerator(spec: Spec) -> Assessment:
    return Assessment(
        NOT_IMPLEMENTED,
        notes="mlcluster gives containers physical GPUs (or their MIG slices); it configures no vGPU.",
    )


def _ai_inference(spec: Spec) -> Assessment:
    kserve = spec.kserve
    if not kserve.enabled:
        return Assessment(NOT_IMPLEMENTED, notes="kserve.enabled is false: this stack serves no inference service.")
    evidence = [
        f"KServe {kserve.version} releases in {kserve.namespace} (deploymentMode {kserve.deployment_mode}):"
        " InferenceService CRD and controller",
        "docs/serving.md",
    ]
    wanted, key = gateway_wanted(spec.kserve), "kserve.gateway.enabled"
    if not wanted:
        return Assessment(NOT_IMPLEMENTED, evidence, f"{key} is off: inference services are not behind a Gateway.")
    evidence.insert(
        1,
        f"{key}: a Gateway API implementation (GatewayClass, Gateway) with an HTTPRoute per endpoint: weighted"
        " backends (endpoints[].versions) and header matches (endpoints[].headerRoutes)",
    )
    return Assessment(IMPLEMENTED, evidence, "")


def _gang_scheduling(spec: Spec) -> Assessment:
    kueue = spec.kueue
    if not kueue.enabled:
        return Assessment(NOT_IMPLEMENTED, notes="kueue.enabled is false: no gang scheduling solution is installed.")
    gang = wait_for_pods_ready(kueue)
    evidence = [
        f"HelmRelease kueue/{kueue.namespace} (chart kueue {kueue.version}): ConfigMap kueue-manager-config,"
        f" integrations.frameworks {integrations(spec.kubeflow, spec.kserve)}",
        "docs/kueue.md#gang-scheduling",
    ]
    if gang is None:
        return Assessment(
            NOT_IMPLEMENTED,
            evidence,
            "kueue.waitForPodsReady.enabled is false: a workload is admitted as a whole, but one whose pods do not"
            " all start keeps its quota and is never evicted.",
        )
    strategy = gang["requeuingStrategy"]
    evidence.insert(
        1,
        f"ConfigMap kueue-manager-config: waitForPodsReady.timeout {gang['timeout']}, requeuingStrategy"
        f" {{timestamp: {strategy['timestamp']}, backoffBaseSeconds: {strategy['backoffBaseSeconds']},"
        f" backoffMaxSeconds: {strategy['backoffMaxSeconds']}}} (kueue.waitForPodsReady)",
    )
    return Assessment(
        IMPLEMENTED,
        evidence,
        "Kueue admits a workload's pods all at once; pods not all ready within the timeout: the workload is evicted"
        " (reason PodsReadyTimeout) and requeued with backoff.",
    )


def _cluster_autoscaling(spec: Spec) -> Assessment:
    if spec.cluster.mode == "kubeadm":
        return Assessment(
            NOT_APPLICABLE,
            ["docs/bootstrap.md", "README.md#day-2 (Add a node)"],
            "On-prem bare-metal servers bootstrapped with kubeadm: the cluster's nodes are fixed physical machines"
            " declared in mlcluster:nodes, with no node groups or machine pool to provision from, so there is no"
            " cluster autoscaler or equivalent mechanism the requirement's condition applies to.",
        )
    return Assessment(
        NOT_APPLICABLE,
        ["docs/cloud.md"],
        f"Layered on an existing {spec.cluster.provider or 'managed'} cluster: node groups and their autoscaling"
        " belong to the base platform's layer (its own AI conformance submission), which mlcluster does not manage.",
    )


def _pod_autoscaling(spec: Spec) -> Assessment:
    if not monitoring_wanted(spec):
        return Assessment(
            NOT_IMPLEMENTED,
            notes="monitoring is off: no metrics adapter serves custom metrics to the HPA (the provider's may).",
        )
    evidence = [
        f"HelmRelease {ADAPTER_RELEASE}/{spec.monitoring.namespace}: custom.metrics.k8s.io and"
        " external.metrics.k8s.io from Prometheus",
    ]
    for deployment in custom_metric_deployments(spec):
        evidence.append(
            f"HorizontalPodAutoscaler {deployment.namespace}/{deployment.name} (autoscaling/v2,"
            f" {deployment.autoscaling.metric} metric {deployment.autoscaling.metric_name}) on a Deployment of"
            f" {deployment.gpus} GPU(s) per pod"
        )
    evidence += ["docs/monitoring.md", "docs/serving.md"]
    return Assessment(IMPLEMENTED, evidence, "")


def _accelerator_metrics(spec: Spec) -> Assessment:
    gpu = spec.gpu_operator
    if not gpu.enabled or not gpu.dcgm_exporter:
        key = "gpuOperator.enabled" if not gpu.enabled else "gpuOperator.dcgmExporter"
        return Assessment(NOT_IMPLEMENTED, notes=f"{key} is false: no accelerator metrics endpoint.")
    counters = ", ".join(name for name, _, _ in DCGM_DEFAULT_COUNTERS)
    evidence = [
        "HelmRelease gpu-operator values dcgmExporter.enabled: true: DaemonSet nvidia-dcgm-exporter on every GPU node,"
        " Prometheus exposition format on :9400/metrics",
    ]
    if dcgm_scraped(spec):
        evidence.append(
            f"ConfigMap {DCGM_METRICS_CONFIG} (dcgmExporter.config): {counters}; ServiceMonitor"
            " (dcgmExporter.serviceMonitor.enabled: true) scraped by Prometheus"
        )
    evidence.append("docs/monitoring.md")
    return Assessment(
        IMPLEMENTED,
        evidence,
        "Per-GPU utilisation and framebuffer memory, temperature, power and NVLink bandwidth (DCGM field names).",
    )


def _ai_service_metrics(spec: Spec) -> Assessment:
    if not monitoring_wanted(spec):
        return Assessment(
            NOT_IMPLEMENTED, notes="monitoring is off: this stack installs no Prometheus (the provider's may serve)."
        )
    evidence = [
        f"HelmRelease {KPS_RELEASE}/{spec.monitoring.namespace}: Prometheus selects every ServiceMonitor and"
        " PodMonitor (serviceMonitorSelectorNilUsesHelmValues: false, podMonitorSelectorNilUsesHelmValues: false)",
    ]
    evidence += [f"{m['kind']} {m['metadata']['namespace']}/{m['metadata']['name']}" for m in scrape_monitors(spec)]
    evidence.append("docs/monitoring.md")
    return Assessment(IMPLEMENTED, evidence, "Workloads expose Prometheus-format metrics; a PodMonitor discovers them.")


def _env_value(env: list[dict[str, Any]], name: str) -> str | None:
    return next((e["value"] for e in env if e.get("name") == name), None)


def _secure_accelerator_access(spec: Spec) -> Assessment:
    gpu = spec.gpu_operator
    if not gpu.enabled:
        return Assessment(NOT_IMPLEMENTED, notes="gpuOperator.enabled is false: this stack does not mediate GPUs.")
    values = gpu_render.gpu_operator_values(spec, True)
    toolkit_env = values["toolkit"]["env"]
    accept = _env_value(toolkit_env, "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED")
    evidence = [
        f"HelmRelease gpu-operator values cdi.enabled: {str(values['cdi']['enabled']).lower()} (containerd injects"
        " only the CDI devices allocated to a container; the nvidia runtime is not the default)",
    ]
    status = IMPLEMENTED if values["cdi"]["enabled"] and accept == "false" else PARTIALLY
    if values["toolkit"]["enabled"]:
        evidence.append(f"toolkit.env ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED={accept}")
    else:
        evidence.append("toolkit.enabled: false: the provider's preinstalled toolkit (docs/cloud.md)")
    if gpu.dra:
        evidence.append(f"HelmRelease {gpu_render.DRA_RELEASE}: GPUs allocated through ResourceClaims only")
    else:
        strategy = _env_value(values["devicePlugin"]["env"], "DEVICE_LIST_STRATEGY")
        evidence.append(f"devicePlugin.env DEVICE_LIST_STRATEGY={strategy}")
    evidence += [
        f"taint {GPU_TAINT} on GPU nodes: only pods that tolerate it (or Kueue admits onto a GPU flavor) land there",
        "docs/gpu.md#secure-accelerator-access",
    ]
    return Assessment(
        status,
        evidence,
        "An unprivileged pod without a GPU request (or claim) gets no GPU, NVIDIA_VISIBLE_DEVICES or not.",
    )


def _robust_controller(spec: Spec) -> Assessment:
    evidence = []
    if spec.kubeflow.enabled:
        evidence.append(
            f"HelmRelease kubeflow-trainer/{spec.kubeflow.namespace} (chart {spec.kubeflow.version}): TrainJob,"
            " TrainingRuntime and ClusterTrainingRuntime CRDs, validating webhooks, JobSet"
        )
    if spec.kserve.enabled:
        evidence.append(f"KServe {spec.kserve.version}: InferenceService CRD, controller and webhooks")
    if not evidence:
        return Assessment(NOT_IMPLEMENTED, notes="Neither Kubeflow Trainer nor KServe is installed.")
    evidence += ["docs/training.md", "docs/serving.md"]
    return Assessment(IMPLEMENTED, evidence, "")


def _advanced_inference_ingress(spec: Spec) -> Assessment:
    kserve = spec.kserve
    picked = [e for e in llm_endpoints(kserve) if e.routing == "picker"]
    if not picked:
        why = (
            "no kserve.llm endpoint routes through the endpoint picker"
            if llm_endpoints(kserve)
            else "no kserve.llm endpoint is configured"
        )
        return Assessment(NOT_IMPLEMENTED, notes=f"No Gateway API Inference Extension route: {why}.")
    names = ", ".join(f"{e.namespace}/{e.name}" for e in picked)
    return Assessment(
        IMPLEMENTED,
        [
            f"HelmRelease kserve-llmisvc-resources {kserve.version}: the InferencePool CRD"
            " (inference.networking.k8s.io/v1) and KServe's LLMInferenceService controller",
            f"LLMInferenceService {names}: router.scheduler (llm-d endpoint picker, KV-cache and queue aware) and"
            " an InferencePool behind an HTTPRoute on Gateway "
            f"{kserve.namespace}/{KSERVE_GATEWAY}",
            f"HelmRelease ai-gateway {kserve.llm.ai_gateway_version} (Envoy AI Gateway): Envoy Gateway's extension"
            " server for InferencePool backends (config.envoyGateway.extensionManager.backendResources)",
            "docs/serving.md",
        ],
        "",
    )


def _high_performance_networking(spec: Spec) -> Assessment:
    rdma = spec.network.rdma
    if not rdma.enabled:
        return Assessment(NOT_IMPLEMENTED, notes="network.rdma.enabled is false.")
    return Assessment(
        PARTIALLY,
        [f"NVIDIA Network Operator {rdma.version} (network.rdma): RDMA devices advertised to pods", "docs/network.md"],
        "RDMA NICs are exposed through a device plugin, not yet through DRA.",
    )


def _disaggregated_inference(spec: Spec) -> Assessment:
    split = [e for e in llm_endpoints(spec.kserve) if e.prefill is not None]
    if not split:
        return Assessment(NOT_IMPLEMENTED, notes="No kserve.llm endpoint sets prefill (prefill/decode disaggregation).")
    names = ", ".join(f"{e.namespace}/{e.name} ({e.prefill.replicas if e.prefill else 0} prefill)" for e in split)
    return Assessment(
        IMPLEMENTED,
        [
            f"LLMInferenceService {names}: spec.prefill, a separately scaled prefill Deployment (<name>-kserve-prefill)"
            " beside the decode workload; the endpoint picker sends each request to a prefill pod, then a decode pod",
            "KV cache handed over by vLLM's NixlConnector (kv_producer/kv_consumer)"
            + (" over the RDMA device (network.rdma)" if spec.network.rdma.enabled else " over TCP (network.rdma off)"),
            "docs/serving.md",
        ],
        "",
    )


ASSESSMENTS: dict[str, Callable[[Spec], Assessment]] = {
    "dra_support": _dra_support,
    "driver_runtime_management": _driver_runtime_management,
    "gpu_sharing": _gpu_sharing,
    "virtualized_accelerator": _virtualized_accelerator,
    "ai_inference": _ai_inference,
    "gang_scheduling": _gang_scheduling,
    "cluster_autoscaling": _cluster_autoscaling,
    "pod_autoscaling": _pod_autoscaling,
    "accelerator_metrics": _accelerator_metrics,
    "ai_service_metrics": _ai_service_metrics,
    "secure_accelerator_access": _secure_accelerator_access,
    "robust_controller": _robust_controller,
    "advanced_inference_ingress": _advanced_inference_ingress,
    "high_performance_networking": _high_performance_networking,
    "disaggregated_inference": _disaggregated_inference,
}


def assess(spec: Spec, requirement: str) -> Assessment:
    check = ASSESSMENTS.get(requirement)
    if check is None:
        return Assessment("", notes="mlcluster does not assess this requirement yet.")
    found = check(spec)
    lost = [item for item in lost_musts(spec) if item.requirement == requirement]
    if lost and found.status in (IMPLEMENTED, PARTIALLY):
        # The warning and the pack must agree: what the stack's settings give up is never claimed.
        found = Assessment(NOT_IMPLEMENTED, found.evidence, "; ".join(f"{i.path}: {i.why}" for i in lost))
    return found


def evidence_pack(spec: Spec, template: Path, *, stack: str) -> dict[str, Any]:
    """The checklist of `template` filled for this stack; the upstream fields are kept as read."""
    document: dict[str, Any] = yaml.safe_load(template.read_text())
    metadata = document.get("metadata") or {}
    metadata["platformName"] = f"mlcluster (stack {stack})"
    for items in (document.get("spec") or {}).values():
        for item in items:
            found = assess(spec, item["id"])
            item["status"] = found.status
            item["evidence"] = list(found.evidence)
            item["notes"] = found.notes
    return document


def dump(document: dict[str, Any]) -> str:
    # No line folding: a folded description would no longer read back byte for byte as upstream wrote it.
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=2**31 - 1)


def pack_files(spec: Spec, directory: Path, *, stack: str) -> dict[str, str]:
    """File name -> text: the checklist of the stack's minor, then every newer one (drafts) found."""
    minor = stack_minor(spec)
    found = templates(directory)
    if minor not in found:
        have = ", ".join(f"1.{m}" for m in found) or "none"
        raise LookupError(f"no AIConformance-1.{minor}.yaml in {directory} (checklists found: {have})")
    return {
        f"ai-conformance-v1.{m}.yaml": dump(evidence_pack(spec, path, stack=stack))
        for m, path in found.items()
        if m >= minor
    }


def summary(spec: Spec, text: str) -> str:
    document = yaml.safe_load(text)
    lines = [f"Kubernetes AI Conformance {document['metadata']['kubernetesVersion']}:"]
    for items in document["spec"].values():
        lines += [f"  {i['level']:<6} {i['id']:<28} {i['status'] or '-'}" for i in items]
    return "\n".join(lines)


FILL_IN = {
    "platformVersion": "FILL IN: the version of your platform (not the version of Kubernetes it runs)",
    "vendorName": "FILL IN: the legal entity certifying, exactly as listed under CNCF Members",
    "websiteUrl": "FILL IN: the product information website",
    "repoUrl": "FILL IN (optional): the primary repository, if the product is open source",
    "documentationUrl": "FILL IN: the product documentation, where the docs/... evidence below is published",
    "productLogoUrl": "FILL IN (optional): an SVG, AI or EPS logo that includes the product name",
    "description": "FILL IN: one sentence describing the offering",
    "contactEmailAddress": "FILL IN: an address that reaches the maintainers",
    "k8sConformanceUrl": "FILL IN: the product's Kubernetes Conformance submission,"
    " https://github.com/cncf/k8s-conformance/tree/master/v{minor}/<product>",
}
"""PRODUCT.yaml's metadata a person must fill (cncf/k8s-ai-conformance instructions.md, "PRODUCT.yaml"); the
program fills kubernetesVersion and platformName, and leaves the checklist's ids, descriptions and levels as read."""


def submission_files(spec: Spec, directory: Path, *, stack: str) -> dict[str, str]:
    """The layout a pull request to cncf/k8s-ai-conformance holds, `v1.<minor>/<product>/PRODUCT.yaml` (the filled
    checklist of the stack's minor with FILL IN markers where only a person can answer), and EVIDENCE.md: which
    evidence comes from the configuration and what a running cluster must add."""
    minor = stack_minor(spec)
    product = f"mlcluster-{stack}".lower()
    document = yaml.safe_load(pack_files(spec, directory, stack=stack)[f"ai-conformance-v1.{minor}.yaml"])
    metadata = document["metadata"]
    for key in metadata:
        if key in FILL_IN:
            metadata[key] = FILL_IN[key].format(minor=f"1.{minor}")
    rows = [
        "| id | level | status | evidence from the configuration (in PRODUCT.yaml) | what a running cluster must add |",
        "|---|---|---|---|---|",
    ]
    for items in document["spec"].values():
        for item in items:
            shown = "; ".join(item["evidence"]).replace("|", "\\|") or "-"
            needed = (
                "the outputs that show it working on the cluster, published as URLs (e.g. the acceptance report"
                " ConfigMap, `kubectl get` of the objects named)"
                if item["level"] == "MUST" and item["status"] in (IMPLEMENTED, PARTIALLY)
                else "-"
            )
            rows.append(f"| {item['id']} | {item['level']} | {item['status'] or '-'} | {shown} | {needed} |")
    base = f"submission/v1.{minor}/{product}"
    guide = (
        f"# AI conformance submission of stack {stack} (Kubernetes 1.{minor})\n\n"
        "`PRODUCT.yaml` is the checklist of this Kubernetes minor (cncf/k8s-ai-conformance, docs/) filled from the"
        " stack's configuration: ids, descriptions and levels as upstream wrote them. Before a pull request:\n\n"
        "1. Replace every `FILL IN` in `metadata` (vendorName must match the CNCF member name"
        + (
            "; k8sConformanceUrl needs the product's Kubernetes Conformance submission first"
            if "k8sConformanceUrl" in metadata
            else ""
        )
        + ").\n"
        "2. Evidence must be publicly reachable: publish the `docs/...` references under documentationUrl and"
        " rewrite them as URLs.\n"
        "3. Add, for every MUST, what only a running cluster shows (right-hand column below).\n\n"
        + "\n".join(rows)
        + "\n"
    )
    return {f"{base}/PRODUCT.yaml": dump(document), f"{base}/EVIDENCE.md": guide}


def write_pack(spec: Spec, out: Path, *, stack: str, directory: Path | None = None) -> dict[str, str]:
    files = {**pack_files(spec, templates_dir(directory), stack=stack)}
    files.update(submission_files(spec, templates_dir(directory), stack=stack))
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    return files


def main(argv: list[str] | None = None) -> int:
    # The plan CLI's stack arguments, loader and error report (the module imports pulumi).
    from .config.stack_cli import add_stack_arguments, spec_or_report, stack_path_and_name

    parser = argparse.ArgumentParser(prog="python -m components.conformance", description=__doc__.split("\n\n")[0])
    add_stack_arguments(parser)
    parser.add_argument("--out", type=Path, help="output folder (default build/<stack>/ai-conformance)")
    parser.add_argument(
        "--templates",
        type=Path,
        help=f"folder of the upstream AIConformance-1.<minor>.yaml (default ${TEMPLATES_ENV} or {DEFAULT_TEMPLATES})",
    )
    args = parser.parse_args(argv)
    path, stack = stack_path_and_name(args)
    out = args.out or PROJECT_ROOT / "build" / stack / "ai-conformance"
    read = spec_or_report(path)
    if read is None:
        return 2
    _, spec = read
    try:
        files = write_pack(spec, out, stack=stack, directory=args.templates)
    except LookupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for item in lost_musts(spec):
        print(f"warning: mlcluster:{item.path}: gives up {item.requirement} ({item.why})", file=sys.stderr)
    for name, text in files.items():
        if name.startswith("ai-conformance-"):
            print(summary(spec, text))
        print(f"wrote {out / name}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
