"""Example stacks and their variants, run through the program and rendered with the real Helm engine.

Each Helm release is rendered from the pinned chart source in ../shared with exactly the values the recording
monitor saw. Values only the preflight can decide (`[computed]` in preview) are rendered for every value they can
take; nothing else may be unknown.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from components.airgap.releases import RELEASE, chart_directory, release_values
from components.config.spec import Spec
from components.plan.engine import RecordedResource, run_program

from .conftest import as_config, load_spec, stack_values
from .helm_render import RenderedChart, render_chart

NOT_IN_FIXTURES = {
    "ai-gateway-crds-helm": "Envoy AI Gateway's CRD chart (envoyproxy/ai-gateway) is not among the shared fixtures",
    "ai-gateway-helm": "Envoy AI Gateway's controller chart (envoyproxy/ai-gateway) is not among the shared fixtures",
}
"""Charts a stack installs whose source the shared upstream fixtures lack: not rendered, and listed by the render
test (test_rendered_charts) so that nothing else is ever left out silently."""


def _onprem(change: Callable[[dict[str, Any]], None]) -> tuple[dict[str, Any], list[str]]:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    change(values)
    return values, secret


def _cloud(provider: str) -> tuple[dict[str, Any], list[str]]:
    values, secret = stack_values("cloud")
    values = copy.deepcopy(values)
    values["cluster"]["provider"] = provider
    if provider != "gke":
        # Only GKE's table row brings a default StorageClass and metrics-server for all of them.
        values["storage"] = {"enabled": True, "provisioner": "local-path"}
    return values, secret


def _all_gpu_workers(values: dict[str, Any]) -> None:
    values["nodes"] = [n for n in values["nodes"] if "gpu" in n or "control-plane" in n["roles"]]
    for team in values["kueue"]["teams"]:
        team["quotas"] = [q for q in team["quotas"] if q["flavor"] != "cpu"]


def _one_node_lab(values: dict[str, Any]) -> None:
    [first] = [n for n in values["nodes"] if n["name"] == "cp-1"]
    # A GPU node names its rack (kueue.topology of the on-prem example).
    rack = {"block": "b1", "rack": "r07"}
    gpu = {"count": 2, "model": "H100-SXM-80GB"}
    values["nodes"] = [{**first, "roles": ["control-plane", "worker"], "gpu": gpu, "topology": rack}]
    values["cluster"].pop("controlPlaneEndpoint")
    values["kueue"]["teams"] = [
        {
            "name": "vision",
            "quotas": [{"flavor": "h100-sxm-80gb", "nominal": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 1}}],
        }
    ]


def _knative(values: dict[str, Any]) -> None:
    values["kserve"]["deploymentMode"] = "Knative"
    for endpoint in values["kserve"]["endpoints"]:
        endpoint["autoscaling"] = {"metric": "concurrency", "target": 4}


def _dra(values: dict[str, Any]) -> None:
    values["gpuOperator"]["dra"] = True


def _spegel_off(values: dict[str, Any]) -> None:
    values["images"]["spegel"]["enabled"] = False


def _rdma(values: dict[str, Any]) -> None:
    values["network"]["rdma"]["enabled"] = True


LLM_ENDPOINTS: list[dict[str, Any]] = [
    # One GPU, routed by the endpoint picker, scaled by KEDA on vLLM's queue.
    {
        "name": "qwen",
        "model": "hf://Qwen/Qwen2.5-7B-Instruct",
        "modelName": "Qwen/Qwen2.5-7B-Instruct",
        "gpus": 1,
        "autoscaling": {"maxReplicas": 4},
    },
    # A mixture-of-experts model over two nodes (a LeaderWorkerSet group), admitted by Kueue for team llm.
    {
        "name": "deepseek",
        "namespace": "llm",
        "queue": "llm",
        "model": "hf://deepseek-ai/DeepSeek-V2-Lite-Chat",
        "gpus": 16,
        "nodes": 2,
        "tensorParallel": 1,
        "expertParallel": True,
    },
    # Prefill/decode disaggregation.
    {"name": "qwen-pd", "model": "hf://Qwen/Qwen2.5-7B-Instruct", "gpus": 1, "prefill": {"replicas": 2}},
]


def _llm(values: dict[str, Any]) -> None:
    values["kserve"]["llm"] = {"endpoints": copy.deepcopy(LLM_ENDPOINTS)}
    values["network"]["rdma"]["enabled"] = True


def _llm_service(values: dict[str, Any]) -> None:
    values["kserve"]["llm"] = {"endpoints": [{**LLM_ENDPOINTS[0], "routing": "service"}]}


def variants() -> dict[str, tuple[dict[str, Any], list[str]]]:
    return {
        "onprem": stack_values("onprem"),
        "cloud": stack_values("cloud"),
        "all-gpu-workers": _onprem(_all_gpu_workers),
        "one-node-lab": _onprem(_one_node_lab),
        "existing-eks": _cloud("eks"),
        "existing-gke": _cloud("gke"),
        "existing-aks": _cloud("aks"),
        "knative": _onprem(_knative),
        "dra": _onprem(_dra),
        "spegel-off": _onprem(_spegel_off),
        "rdma": _onprem(_rdma),
        "llm": _onprem(_llm),
        "llm-service": _onprem(_llm_service),
    }


VARIANTS = tuple(variants())


@dataclass(frozen=True)
class RenderedRelease:
    resource: RecordedResource
    chart: RenderedChart
    driver_enabled: bool | None
    """The preflight decision this rendering assumed (None: the values did not depend on it)."""

    @property
    def name(self) -> str:
        return str(self.resource.inputs["name"])


@dataclass(frozen=True)
class RenderedStack:
    name: str
    spec: Spec
    resources: tuple[RecordedResource, ...]
    releases: tuple[RenderedRelease, ...]

    def release(self, name: str, driver_enabled: bool | None = None) -> RenderedRelease:
        found = [r for r in self.releases if r.name == name and r.driver_enabled in (driver_enabled, None)]
        if not found:
            raise AssertionError(f"{self.name}: no release {name} rendered")
        return found[0]


@cache
def _render(chart: str, version: str, values: str, *where: str) -> RenderedChart:
    # Variants share most releases value for value: each distinct rendering is done once per test run.
    release, namespace, kube_version = where
    return render_chart(
        chart, version, json.loads(values), release=release, namespace=namespace, kube_version=kube_version
    )


@cache
def rendered_stack(name: str) -> RenderedStack:
    values, secret = variants()[name]
    spec = load_spec(values, secret)
    run = run_program(as_config(values), [f"mlcluster:{k}" for k in secret], stack=name, preview=True)
    releases = []
    for resource in run.resources:
        if resource.type != RELEASE or chart_directory(resource) in NOT_IN_FIXTURES:
            continue
        for enabled, chart_values in release_values(resource):
            chart = _render(
                chart_directory(resource),
                str(resource.inputs["version"]),
                json.dumps(chart_values, sort_keys=True),
                str(resource.inputs["name"]),
                str(resource.inputs["namespace"]),
                spec.kubernetes_version,
            )
            releases.append(RenderedRelease(resource, chart, enabled))
    return RenderedStack(name, spec, tuple(run.resources), tuple(releases))
