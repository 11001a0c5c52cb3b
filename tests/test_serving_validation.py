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
        "mlcluster:kserve.endpoints[0].minReplicas: 0 (scale-to-zero) needs Knative, or KEDA with metric external (a"
        " queue outside the model server): switch kserve.deploymentMode to Knative, scale on metric external, or set"
        " minReplicas to 1 or more",
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
        'mlcluster:kserve.endpoints[0].autoscaling.metric: "gpu" is not an endpoint metric (cpu, memory, concurrency,'
        " rps, queue, external): to scale an InferenceService on a queue length (e.g. vLLM's"
        " vllm:num_requests_waiting) use metric: queue with metricName (KEDA, deploymentMode Standard)",
    ),
    (
        "a deployment's metric on an endpoint points to queue",
        endpoint(autoscaling={"metric": "pods", "metricName": "tgi_queue_size"}),
        'mlcluster:kserve.endpoints[0].autoscaling.metric: "pods" is not an endpoint metric (cpu, memory, concurrency,'
        " rps, queue, external): to scale an InferenceService on a queue length",
    ),
    (
        "a queue from the model server cannot wake an endpoint at zero",
        endpoint(minReplicas=0, autoscaling={"metric": "queue"}),
        "mlcluster:kserve.endpoints[0].minReplicas: 0 with metric queue never scales up again: the queue's series comes"
        " from the endpoint's own pods",
    ),
    (
        "external queue needs its series",
        endpoint(autoscaling={"metric": "external"}),
        "mlcluster:kserve.endpoints[0].autoscaling.metricName: is required when metric is external",
    ),
    (
        "endpoint metric name only for queues",
        endpoint(autoscaling={"metric": "cpu", "metricName": "vllm:num_requests_waiting"}),
        "mlcluster:kserve.endpoints[0].autoscaling.metricName: only applies to metric queue or external, not cpu",
    ),
    (
        "endpoint metric name is a Prometheus name",
        endpoint(autoscaling={"metric": "queue", "metricName": "vllm num waiting"}),
        'mlcluster:kserve.endpoints[0].autoscaling.metricName: "vllm num waiting"',
    ),
    (
        "queue scaling needs Prometheus",
        lambda values: (
            values.update(monitoring={"enabled": False}),
            endpoint(autoscaling={"metric": "queue"})(values),
        ),
        "mlcluster:kserve.endpoints[0].autoscaling.metric: queue scales through KEDA on a Prometheus query, and"
        " Prometheus comes with monitoring",
    ),
    (
        "KEDA and prometheus-adapter both want the external metrics API",
        lambda values: (
            endpoint(autoscaling={"metric": "queue"})(values),
            deployment(autoscaling={"metric": "external", "metricName": "rabbitmq_queue_messages_ready"})(values),
        ),
        "mlcluster:kserve.deployments[0].autoscaling.metric: external needs prometheus-adapter to serve the external"
        " metrics API, which KEDA serves for kserve.endpoints[0] (metric queue)",
    ),
    (
        "queue scaling in Knative mode",
        lambda values: (
            values["kserve"].update(deploymentMode="Knative"),
            endpoint(autoscaling={"metric": "queue"})(values),
        ),
        'mlcluster:kserve.endpoints[0].autoscaling.metric: "queue" scales through KEDA, which KServe offers in'
        " deploymentMode Standard only",
    ),
    (
        "canary weights add up to 100",
        endpoint(versions=[{"name": "v1", "weight": 90}, {"name": "v2", "weight": 20}]),
        "mlcluster:kserve.endpoints[0].versions: weights add up to 110, not 100: v1 90, v2 20",
    ),
    (
        "canary weight is a percentage",
        endpoint(versions=[{"name": "v1", "weight": 150}, {"name": "v2", "weight": -50}]),
        "mlcluster:kserve.endpoints[0].versions[0].weight: 150 must be between 0 and 100",
    ),
    (
        "version named twice",
        endpoint(versions=[{"name": "v1", "weight": 50}, {"name": "v1", "weight": 50}]),
        'mlcluster:kserve.endpoints[0].versions[1].name: "v1" is already versions[0]',
    ),
    (
        "version name makes a Service name too long",
        endpoint(versions=[{"name": "v" * 50, "weight": 100}]),
        f"mlcluster:kserve.endpoints[0].versions[0].name: makes KServe's Service name chat-{'v' * 50}-predictor (65"
        " characters) longer than 63",
    ),
    (
        "a version takes another endpoint's name",
        lambda values: (
            endpoint(versions=[{"name": "v1", "weight": 100}])(values),
            values["kserve"]["endpoints"].append(
                {"name": "chat-v1", "modelFormat": "sklearn", "storageUri": "gs://bucket/model"}
            ),
        ),
        "mlcluster:kserve.endpoints[0].versions: make an InferenceService chat-v1 in namespace models, which"
        " kserve.endpoints[1] is too",
    ),
    (
        "header route to a version that does not exist",
        endpoint(versions=[{"name": "v1", "weight": 100}], headerRoutes=[{"value": "qwen-14b", "version": "v3"}]),
        'mlcluster:kserve.endpoints[0].headerRoutes[0].version: "v3" is not one of this endpoint\'s versions (v1)',
    ),
    (
        "header routes need versions",
        endpoint(headerRoutes=[{"value": "qwen-14b", "version": "v2"}]),
        "mlcluster:kserve.endpoints[0].headerRoutes: route to versions: declare versions",
    ),
    (
        "header name is an RFC 7230 token",
        endpoint(
            versions=[{"name": "v1", "weight": 100}],
            headerRoutes=[{"header": "x model", "value": "a", "version": "v1"}],
        ),
        'mlcluster:kserve.endpoints[0].headerRoutes[0].header: "x model" is not an HTTP header name (an RFC 7230 token',
    ),
    (
        "header value without line breaks",
        endpoint(
            versions=[{"name": "v1", "weight": 100}], headerRoutes=[{"value": "a\r\nx-admin: 1", "version": "v1"}]
        ),
        "mlcluster:kserve.endpoints[0].headerRoutes[0].value: ",
    ),
    (
        "the same header match twice",
        endpoint(
            versions=[{"name": "v1", "weight": 50}, {"name": "v2", "weight": 50}],
            headerRoutes=[
                {"header": "x-model", "value": "big", "version": "v1"},
                {"header": "X-Model", "value": "big", "version": "v2"},
            ],
        ),
        'mlcluster:kserve.endpoints[0].headerRoutes[1].value: X-Model: "big" is already matched by headerRoutes[0]',
    ),
    (
        "canary with the gateway off",
        lambda values: (
            values["kserve"].update(gateway={"enabled": False}),
            endpoint(versions=[{"name": "v1", "weight": 100}])(values),
        ),
        "mlcluster:kserve.endpoints[0].versions: routes through Gateway API: set kserve.gateway.enabled: true",
    ),
    (
        "canary in Knative mode",
        lambda values: (
            values["kserve"].update(deploymentMode="Knative"),
            endpoint(versions=[{"name": "v1", "weight": 100}], autoscaling={"metric": "concurrency"})(values),
        ),
        "mlcluster:kserve.endpoints[0].versions: routes through Gateway API, which mlcluster sets up in deploymentMode"
        " Standard",
    ),
    (
        "Gateway API in Knative mode",
        lambda values: values["kserve"].update(deploymentMode="Knative", gateway={"enabled": True}),
        "mlcluster:kserve.gateway.enabled: Gateway API routing is for deploymentMode Standard",
    ),
    (
        "gateway domain",
        kserve(gateway={"domain": "not a domain"}),
        'mlcluster:kserve.gateway.domain: "not a domain"',
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
    # Knative mode also has no Gateway API routing, which the conformance evidence warns about on its own key.
    (warning,) = [w for w in serving_warnings(warnings) if not w.startswith("mlcluster:kserve.gateway")]
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


def test_routing_problems_are_reported_all_at_once() -> None:
    values = serving_base()
    values["kserve"]["endpoints"][0].update(
        versions=[{"name": "v1", "weight": 90}, {"name": "v1", "weight": 20}],
        headerRoutes=[
            {"header": "x model", "value": "big", "version": "v3"},
            {"header": "x-model", "value": "big", "version": "v1"},
            {"header": "X-MODEL", "value": "big", "version": "v1"},
        ],
    )
    errors = [e for e in errors_of(values) if "kserve.endpoints[0]" in e]
    assert errors == [
        'mlcluster:kserve.endpoints[0].headerRoutes[0].header: "x model" is not an HTTP header name (an RFC 7230 token'
        " such as x-model, at most 256 characters)",
        'mlcluster:kserve.endpoints[0].versions[1].name: "v1" is already versions[0]: each version names its own'
        " InferenceService",
        "mlcluster:kserve.endpoints[0].versions: weights add up to 110, not 100: v1 90, v1 20",
        'mlcluster:kserve.endpoints[0].headerRoutes[0].version: "v3" is not one of this endpoint\'s versions (v1)',
        'mlcluster:kserve.endpoints[0].headerRoutes[2].value: X-MODEL: "big" is already matched by headerRoutes[1]:'
        " the second route would never be taken",
    ]


def test_a_canary_scaled_on_a_queue_is_valid_and_silent() -> None:
    values = serving_base()
    values["kserve"]["endpoints"][0].update(
        versions=[{"name": "v1", "weight": 90}, {"name": "v2", "weight": 10}],
        headerRoutes=[{"value": "qwen2.5-14b-instruct", "version": "v2"}],
        autoscaling={"metric": "queue", "target": 4},
    )
    spec, warnings = spec_and_warnings(values, lambda key: key == "ssh")
    (chat,) = spec.kserve.endpoints
    assert chat.isvc_names() == ["chat-v1", "chat-v2"]
    assert chat.header_routes[0].header == "x-model"
    assert chat.autoscaling.queue_metric == "vllm:num_requests_waiting"
    assert serving_warnings(warnings) == []
