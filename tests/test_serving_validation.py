"""Serving validation rules, one data-driven case each: a change to a valid config and the line it must produce."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from components.config.load import spec_and_warnings
from components.config.schema import Problem

from .test_config_validation import base, errors_of, parse


def serving_base() -> dict[str, Any]:
    """The validation base config plus one GPU endpoint and one CPU deployment with an HPA."""
    values = base()
    values["kserve"] = {
        "deploymentMode": "Standard",
        "endpoints": [
            {
                "name": "chat",
                "modelFormat": "huggingface",
                "storageUri": "hf://Qwen/Qwen2.5-7B-Instruct",
                "gpus": 1,
                "minReplicas": 1,
                "maxReplicas": 2,
            }
        ],
        "deployments": [{"name": "embeddings", "image": "example.org/tei:1.8", "minReplicas": 1, "maxReplicas": 4}],
    }
    return values


def serving_warnings(warnings: list[Problem]) -> list[str]:
    """Only this layer's warnings: other layers (e.g. Kueue's quota coverage) warn about the same base config."""
    return [str(w) for w in warnings if w.path.startswith("kserve")]


def endpoint(**changes: Any) -> Callable[[dict[str, Any]], None]:
    return lambda values: values["kserve"]["endpoints"][0].update(changes)


def deployment(**changes: Any) -> Callable[[dict[str, Any]], None]:
    return lambda values: values["kserve"]["deployments"][0].update(changes)


def kserve(**changes: Any) -> Callable[[dict[str, Any]], None]:
    return lambda values: values["kserve"].update(changes)


def second_endpoint_named_chat(values: dict[str, Any]) -> None:
    values["kserve"]["endpoints"].append(copy.deepcopy(values["kserve"]["endpoints"][0]))


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "scale-to-zero needs Knative",
        endpoint(minReplicas=0),
        "mlcluster:kserve.endpoints[0].minReplicas: 0 (scale-to-zero) needs Knative: switch kserve.deploymentMode"
        " to Knative, or set minReplicas to 1 or more",
    ),
    (
        "concurrency needs Knative",
        endpoint(autoscaling={"metric": "concurrency", "target": 8}),
        'mlcluster:kserve.endpoints[0].autoscaling.metric: "concurrency" needs Knative\'s autoscaler',
    ),
    (
        "cpu scaling in Knative mode",
        lambda values: (
            values["kserve"].update(deploymentMode="Knative"),
            endpoint(autoscaling={"metric": "cpu"})(values),
        ),
        'mlcluster:kserve.endpoints[0].autoscaling.metric: "cpu" in Knative mode needs Knative\'s HPA autoscaler class,'
        " which cannot scale to zero",
    ),
    (
        "replica range",
        endpoint(minReplicas=3, maxReplicas=2),
        "mlcluster:kserve.endpoints[0].minReplicas: (3) must not exceed maxReplicas (2)",
    ),
    (
        "utilisation is a percentage",
        endpoint(autoscaling={"metric": "cpu", "target": 150}),
        "mlcluster:kserve.endpoints[0].autoscaling.target: (150) is a utilisation percentage: at most 100",
    ),
    (
        "endpoint metric enum",
        endpoint(autoscaling={"metric": "gpu"}),
        'mlcluster:kserve.endpoints[0].autoscaling.metric: "gpu" must be one of "cpu", "memory", "concurrency", "rps"',
    ),
    (
        "duplicate endpoint",
        second_endpoint_named_chat,
        'mlcluster:kserve.endpoints[1].name: "chat" is already used in namespace models by kserve.endpoints[0]',
    ),
    (
        "GPU endpoint larger than any node",
        endpoint(gpus=9),
        "mlcluster:kserve.endpoints[0].gpus: (9) per replica can never be scheduled: the largest GPU node has 8",
    ),
    (
        "storage URI",
        endpoint(storageUri="/models/llama"),
        'mlcluster:kserve.endpoints[0].storageUri: "/models/llama" is not a storage URI',
    ),
    (
        "platform namespace",
        endpoint(namespace="kserve"),
        'mlcluster:kserve.endpoints[0].namespace: "kserve" belongs to the platform',
    ),
    (
        "namespace Kueue creates for a team",
        lambda values: (
            values.update(kueue={"teams": [{"name": "llm", "quotas": [{"flavor": "cpu", "nominal": {"cpu": "8"}}]}]}),
            endpoint(namespace="llm")(values),
        ),
        'mlcluster:kserve.endpoints[0].namespace: "llm" is a Kueue team namespace (kueue.teams creates it)',
    ),
    (
        "endpoints without KServe",
        kserve(enabled=False),
        "mlcluster:kserve.endpoints: needs the serving layer: set kserve.enabled: true or remove them",
    ),
    (
        "deployments without the serving layer",
        kserve(enabled=False),
        "mlcluster:kserve.deployments: needs the serving layer: set kserve.enabled: true or remove them",
    ),
    (
        "Knative version the operator ships",
        kserve(knative={"operatorVersion": "1.21.0", "servingVersion": "1.17"}),
        'mlcluster:kserve.knative.servingVersion: "1.17" is not shipped by knative-operator 1.21.0: pick 1.18 to 1.21',
    ),
    (
        "Knative version syntax",
        kserve(knative={"servingVersion": "latest"}),
        'mlcluster:kserve.knative.servingVersion: "latest" is not a version such as 1.21',
    ),
    (
        "HPA cannot scale to zero",
        deployment(minReplicas=0),
        "mlcluster:kserve.deployments[0].minReplicas: 0 must be between 1 and 1000",
    ),
    (
        "external metric needs a name",
        deployment(autoscaling={"metric": "external", "target": 30}),
        "mlcluster:kserve.deployments[0].autoscaling.metricName: is required when metric is external",
    ),
    (
        "metric name only for custom metrics",
        deployment(autoscaling={"metric": "cpu", "target": 70, "metricName": "queue"}),
        "mlcluster:kserve.deployments[0].autoscaling.metricName: only applies to metric pods or external, not cpu",
    ),
    (
        "GPU deployment on a cluster without GPU nodes",
        lambda values: (values["nodes"].pop(2), values["kserve"]["deployments"][0].update(gpus=1)),
        "mlcluster:kserve.deployments[0].gpus: (1) per replica can never be scheduled: no node in nodes has a gpu",
    ),
]


@pytest.mark.parametrize(("rule", "change", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rule(rule: str, change: Callable[[dict[str, Any]], None], expected: str) -> None:
    values = serving_base()
    change(values)
    errors = errors_of(values)
    assert any(expected in e for e in errors), f"{rule}: {expected!r} not in {errors}"


def test_serving_base_is_valid_and_silent() -> None:
    spec, warnings = spec_and_warnings(serving_base(), lambda key: key == "ssh")
    assert [e.name for e in spec.kserve.endpoints] == ["chat"]
    assert serving_warnings(warnings) == []


def test_knative_mode_allows_scale_to_zero_and_says_what_it_costs() -> None:
    values = serving_base()
    values["kserve"]["deploymentMode"] = "Knative"
    values["kserve"]["endpoints"][0].update(minReplicas=0, autoscaling={"metric": "concurrency", "target": 4})
    spec, warnings = spec_and_warnings(values, lambda key: key == "ssh")
    assert spec.kserve.endpoints[0].min_replicas == 0
    (warning,) = serving_warnings(warnings)
    assert warning.startswith("mlcluster:kserve.deploymentMode: Knative installs at least eight more always-on")
    assert "cold start" in warning and "use deploymentMode Standard" in warning


def test_custom_metric_and_missing_metrics_server_are_warned_about() -> None:
    values = serving_base()
    values["kserve"]["metricsServer"] = False
    # Without monitoring nothing serves the custom metric (with it, prometheus-adapter does: test_monitoring.py).
    values["monitoring"] = {"enabled": False}
    values["kserve"]["deployments"].append(
        {
            "name": "ranker",
            "image": "example.org/ranker:2",
            "autoscaling": {"metric": "pods", "target": 5, "metricName": "queue"},
        }
    )
    _, warnings = spec_and_warnings(values, lambda key: key == "ssh")
    lines = serving_warnings(warnings)
    assert any(
        line.startswith("mlcluster:kserve.metricsServer: is false but HPAs scale on cpu/memory") for line in lines
    )
    assert any(
        line.startswith("mlcluster:kserve.deployments[1].autoscaling.metric: scales on queue, which a metrics adapter")
        for line in lines
    )


def test_gpu_counts_are_not_checked_without_node_inventory() -> None:
    values = {"cluster": {"mode": "existing", "kubeconfig": "apiVersion: v1"}, "kserve": serving_base()["kserve"]}
    values["kserve"]["endpoints"][0]["gpus"] = 16
    spec = parse(values, secret=("cluster",))
    assert spec.kserve.endpoints[0].gpus == 16
