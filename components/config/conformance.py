"""Which CNCF Kubernetes AI Conformance MUSTs a stack's settings give up, and the key that gives each up.

The evidence pack (components/conformance.py) fills the checklist from the same answers, and validation warns with
them at preview, `up` and in the offline plan: a stack that turns off what a MUST needs says which MUST it loses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import serving
from .monitoring import monitoring_wanted
from .schema import Problems

if TYPE_CHECKING:
    from .spec import Spec


@dataclass(frozen=True)
class LostMust:
    requirement: str
    """The checklist id (gang_scheduling, ai_inference, ...)."""
    path: str
    """The config key that gives it up."""
    why: str


def gateway_api_setting(spec: Spec) -> tuple[bool, str] | None:
    """(whether KServe is routed through the Gateway API, the key that decides it), or None when this version of
    the schema has no such setting. Read defensively: the setting and its helper come with the serving layer."""
    wanted = getattr(serving, "gateway_wanted", None)
    for name in ("gateway", "gateway_api"):
        value = getattr(spec.kserve, name, None)
        if value is None:
            continue
        key = f"kserve.{'gateway' if name == 'gateway' else 'gatewayApi'}"
        if callable(wanted):
            return bool(wanted(spec.kserve)), f"{key}.enabled"
        if isinstance(value, bool):
            return value, key
        enabled = getattr(value, "enabled", None)
        return enabled is not False, f"{key}.enabled"
    return None


def lost_musts(spec: Spec) -> list[LostMust]:
    """The MUSTs this stack's own settings give up (not what only a cluster can show), in checklist order."""
    lost: list[LostMust] = []
    gpu = spec.gpu_operator
    if not gpu.enabled:
        for requirement in ("accelerator_metrics", "secure_accelerator_access"):
            lost.append(
                LostMust(requirement, "gpuOperator.enabled", "no GPU Operator: nothing installs DCGM or the toolkit")
            )
    elif not gpu.dcgm_exporter:
        lost.append(
            LostMust("accelerator_metrics", "gpuOperator.dcgmExporter", "no DCGM exporter: no per-GPU metrics endpoint")
        )
    if not spec.kserve.enabled:
        lost.append(LostMust("ai_inference", "kserve.enabled", "no KServe: no inference service behind a Gateway"))
    elif (gateway := gateway_api_setting(spec)) is not None and not gateway[0]:
        lost.append(LostMust("ai_inference", gateway[1], "KServe is not routed through the Gateway API"))
    if not spec.kueue.enabled:
        lost.append(LostMust("gang_scheduling", "kueue.enabled", "no Kueue: no all-or-nothing admission"))
    elif not spec.kueue.wait_for_pods_ready.enabled:
        lost.append(
            LostMust(
                "gang_scheduling",
                "kueue.waitForPodsReady.enabled",
                "Kueue admits a gang without evicting it when its pods do not all start",
            )
        )
    if not monitoring_wanted(spec):
        lost.append(
            LostMust("pod_autoscaling", "monitoring.enabled", "no prometheus-adapter: no custom metrics for the HPA")
        )
        lost.append(
            LostMust("ai_service_metrics", "monitoring.enabled", "no Prometheus discovering workloads' metrics")
        )
    if not spec.kubeflow.enabled and not spec.kserve.enabled:
        lost.append(
            LostMust(
                "robust_controller",
                "kubeflow.enabled",
                "neither Kubeflow Trainer nor KServe: no AI operator with CRDs and webhooks",
            )
        )
    return lost


def validate_conformance(spec: Spec, problems: Problems) -> None:
    """One warning per key that gives up MUSTs, naming them (docs/conformance.md)."""
    by_path: dict[str, list[LostMust]] = {}
    for item in lost_musts(spec):
        by_path.setdefault(item.path, []).append(item)
    for path, items in by_path.items():
        named = "; ".join(f"{item.requirement} ({item.why})" for item in items)
        problems.warn(
            path,
            f"gives up the Kubernetes AI Conformance MUST{'s' if len(items) > 1 else ''} {named}: the evidence pack"
            " (python -m components.conformance) marks it Not Implemented",
        )
