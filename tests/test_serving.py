"""Serving: release order, chart names and values, endpoints validated against KServe's CRD and Kubernetes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components.config.serving import KserveSpec, metrics_server_wanted
from components.render.endpoints import (
    deployment_service,
    horizontal_pod_autoscaler,
    inference_deployment,
)
from components.render.serving import (
    cert_manager_release,
    deployment_mode_value,
    kserve_chart_names,
    kserve_releases,
)

from .conftest import load_spec, stack_values
from .upstream import UPSTREAM, chart_values, crd_errors, kubernetes_errors, schema_errors, unknown_value_keys

ISVC_CRD = "kserve/v0.20.0/serving.kserve.io_inferenceservices.yaml"
RELEASE = "kubernetes:helm.sh/v3:Release"
ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"
CORE_TYPES = (
    "kubernetes:apps/v1:Deployment",
    "kubernetes:core/v1:Service",
    "kubernetes:autoscaling/v2:HorizontalPodAutoscaler",
)


def knative_values() -> tuple[dict[str, Any], list[str]]:
    """The on-prem example switched to Knative, with a scale-to-zero endpoint scaled on concurrency."""
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    kserve = values["kserve"]
    kserve["deploymentMode"] = "Knative"
    # Knative's own autoscaler scales on requests; leaving the metric out takes its default (concurrency).
    del kserve["endpoints"][0]["autoscaling"]
    kserve["endpoints"].append(
        {
            "name": "sklearn-iris",
            "namespace": "demo",
            "modelFormat": "sklearn",
            "storageUri": "gs://kfserving-examples/models/sklearn/1.0/model",
            "minReplicas": 0,
            "maxReplicas": 3,
            "autoscaling": {"metric": "concurrency", "target": 10},
        }
    )
    return values, secret


@pytest.fixture(scope="module")
def onprem_run() -> Any:
    from components.plan.engine import run_program

    from .conftest import Run, as_config

    values, secret = stack_values("onprem")
    return Run(run_program(as_config(values), [f"mlcluster:{k}" for k in secret], stack="onprem"))


@pytest.fixture(scope="module")
def knative_run() -> Any:
    from components.plan.engine import run_program

    from .conftest import Run, as_config

    values, secret = knative_values()
    return Run(run_program(as_config(values), [f"mlcluster:{k}" for k in secret], stack="onprem"))


def document(resource: Any) -> dict[str, Any]:
    """The object as the provider would send it: JSON numbers that are whole become integers again."""
    text = json.dumps({k: resource.raw_inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")})
    return json.loads(text, parse_float=lambda s: int(float(s)) if float(s).is_integer() else float(s))


# --- chart names across KServe's v0.17 split ---------------------------------------------------------

CHART_NAMES = [
    ("v0.15.2", ("kserve-crd", "kserve")),
    ("v0.16.0", ("kserve-crd", "kserve")),
    ("v0.17.0", ("kserve-crd", "kserve-resources", "kserve-runtime-configs")),
    ("v0.17.0-rc.1", ("kserve-crd", "kserve-resources", "kserve-runtime-configs")),
    ("v0.20.0", ("kserve-crd", "kserve-resources", "kserve-runtime-configs")),
    ("1.0.0", ("kserve-crd", "kserve-resources", "kserve-runtime-configs")),
]


@pytest.mark.parametrize(("version", "charts"), CHART_NAMES)
def test_kserve_chart_names_follow_the_pinned_version(version: str, charts: tuple[str, ...]) -> None:
    assert kserve_chart_names(version) == charts
    spec = load_spec({"kserve": {"version": version}, "cluster": {"mode": "existing", "kubeconfig": "x"}}, ["cluster"])
    releases = kserve_releases(spec)
    assert [r.name for r in releases] == list(charts)
    assert [r.chart for r in releases] == [f"oci://ghcr.io/kserve/charts/{c}" for c in charts]


@pytest.mark.parametrize(
    ("mode", "version", "value"),
    [
        ("Standard", "v0.20.0", "Standard"),
        ("Knative", "v0.20.0", "Knative"),
        ("Standard", "v0.16.0", "RawDeployment"),
        ("Knative", "v0.16.0", "Serverless"),
    ],
)
def test_deployment_mode_uses_the_names_the_version_knows(mode: str, version: str, value: str) -> None:
    assert deployment_mode_value(mode, version) == value


def test_standard_mode_is_set_explicitly_because_the_chart_defaults_to_knative() -> None:
    upstream = chart_values("kserve-resources", "v0.20.0")
    assert upstream["kserve"]["controller"]["deploymentMode"] == "Knative"
    spec = load_spec(*stack_values("onprem"))
    resources = {r.name: r for r in kserve_releases(spec)}["kserve-resources"]
    assert resources.values["kserve"]["controller"]["deploymentMode"] == "Standard"


@pytest.mark.parametrize("values_of", [stack_values, lambda _: knative_values()], ids=["standard", "knative"])
def test_kserve_values_exist_in_the_pinned_charts(values_of: Any) -> None:
    spec = load_spec(*values_of("onprem"))
    checked = 0
    for release in kserve_releases(spec):
        assert unknown_value_keys(dict(release.values), chart_values(release.upstream_chart, release.version)) == []
        checked += 1
    assert checked == 3


def test_cert_manager_values_fit_its_values_schema() -> None:
    spec = load_spec(*stack_values("onprem"))
    release = cert_manager_release(spec)
    folder = UPSTREAM / "charts" / "cert-manager" / release.version
    schema = json.loads((folder / "values.schema.json").read_text())
    assert release.values == {"crds": {"enabled": True}}
    assert schema_errors(schema, dict(release.values)) == []
    assert unknown_value_keys(dict(release.values), chart_values("cert-manager", release.version)) == []
    # The same check rejects a wrong type, so the pass above means something.
    assert schema_errors(schema, {"crds": {"enabled": "yes"}}) != []


# --- order, through the recorded dependsOn -------------------------------------------------------------


def test_standard_mode_order(onprem_run: Any) -> None:
    run = onprem_run
    names = {r.name for r in run.of_type(RELEASE)}
    assert not {"knative-operator"} & names
    assert run.urn_of("cert-manager") in run.named("kserve-crd").depends_on
    assert run.urn_of("kserve-crd") in run.named("kserve-resources").depends_on
    assert run.urn_of("kserve-resources") in run.named("kserve-runtime-configs").depends_on
    for isvc in run.of_type(ISVC):
        assert run.urn_of("kserve-runtime-configs") in isvc.depends_on
        assert run.urn_of("metrics-server") in isvc.depends_on
        annotations = isvc.raw_inputs["metadata"]["annotations"]
        assert annotations == {
            "serving.kserve.io/deploymentMode": "Standard",
            "serving.kserve.io/autoscalerClass": "hpa",
        }


def test_knative_mode_installs_knative_before_kserve(knative_run: Any) -> None:
    run = knative_run
    operator = run.named("knative-operator")
    assert operator.raw_inputs["repositoryOpts"]["repo"] == "https://knative.github.io/operator"
    serving = run.named("knative-serving")
    assert serving.type == "kubernetes:operator.knative.dev/v1beta1:KnativeServing"
    assert run.urn_of("knative-operator") in serving.depends_on
    crd_deps = run.named("kserve-crd").depends_on
    assert run.urn_of("knative-serving") in crd_deps and run.urn_of("cert-manager") in crd_deps
    spec = serving.raw_inputs["spec"]
    assert spec["ingress"]["kourier"]["enabled"] is True
    assert spec["config"]["network"]["ingress-class"] == "kourier.ingress.networking.knative.dev"
    assert spec["config"]["features"]["kubernetes.podspec-tolerations"] == "enabled"
    assert serving.raw_inputs["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Ready"
    values = run.named("kserve-resources").raw_inputs["values"]["kserve"]["controller"]
    assert values == {"deploymentMode": "Knative", "gateway": {"disableIstioVirtualHost": True}}
    zero = run.named("isvc-demo-sklearn-iris")
    assert zero.raw_inputs["spec"]["predictor"]["minReplicas"] == 0
    assert zero.raw_inputs["metadata"]["annotations"] == {"serving.kserve.io/deploymentMode": "Knative"}
    chat = run.named("isvc-models-chat").raw_inputs["spec"]["predictor"]
    assert chat["scaleMetric"] == "concurrency" and "scaleTarget" not in chat
    assert run.urn_of("kserve-runtime-configs") in zero.depends_on


# --- every object validates upstream ---------------------------------------------------------------------


def test_every_inference_service_validates_against_the_kserve_crd(onprem_run: Any, knative_run: Any) -> None:
    checked = 0
    for run in (onprem_run, knative_run):
        for isvc in run.of_type(ISVC):
            assert crd_errors(document(isvc), ISVC_CRD) == [], isvc.name
            checked += 1
    assert checked == 3


def test_crd_check_rejects_a_bad_inference_service(onprem_run: Any) -> None:
    bad = document(onprem_run.named("isvc-models-chat"))
    bad["spec"]["predictor"]["scaleMetric"] = "gpu"
    bad["spec"]["predictor"]["model"]["storageURI"] = "s3://typo"
    errors = crd_errors(bad, ISVC_CRD)
    assert any("scaleMetric" in e for e in errors) and any("storageURI" in e for e in errors), errors


def test_deployments_services_and_hpas_validate_for_the_stack_kubernetes(onprem_run: Any) -> None:
    spec = load_spec(*stack_values("onprem"))
    checked = 0
    for type_ in CORE_TYPES:
        for resource in onprem_run.of_type(type_):
            assert kubernetes_errors(document(resource), spec.kubernetes_version) == [], resource.name
            checked += 1
    # Deployment, Service and HPA per inference deployment (embeddings on cpu, chat-tgi on its queue length).
    assert checked == 3 * len(spec.kserve.deployments) == 6


AUTOSCALING = [
    ({"metric": "cpu", "target": 70}, {"type": "Resource"}),
    ({"metric": "memory", "target": 80}, {"type": "Resource"}),
    ({"metric": "pods", "target": 5, "metricName": "inference_queue_length"}, {"type": "Pods"}),
    ({"metric": "external", "target": 30, "metricName": "rabbitmq_queue_messages"}, {"type": "External"}),
]


@pytest.mark.parametrize(("autoscaling", "expected"), AUTOSCALING, ids=[a[0]["metric"] for a in AUTOSCALING])
def test_hpa_metrics_validate(autoscaling: dict[str, Any], expected: dict[str, str]) -> None:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["kserve"]["deployments"][0]["autoscaling"] = autoscaling
    values["kserve"]["deployments"][0]["gpus"] = 1
    spec = load_spec(values, secret)
    item = spec.kserve.deployments[0]
    hpa = horizontal_pod_autoscaler(item)
    assert hpa["spec"]["metrics"][0]["type"] == expected["type"]
    for manifest in (hpa, inference_deployment(item), deployment_service(item)):
        assert kubernetes_errors(manifest, spec.kubernetes_version) == [], manifest["kind"]


def test_kubernetes_check_rejects_a_bad_hpa() -> None:
    spec = load_spec(*stack_values("onprem"))
    hpa = horizontal_pod_autoscaler(spec.kserve.deployments[0])
    hpa["spec"]["metrics"][0]["resource"]["target"]["type"] = "Percent"
    hpa["spec"]["minReplica"] = 1
    assert kubernetes_errors(hpa, spec.kubernetes_version) != []


# --- GPUs, metrics-server --------------------------------------------------------------------------------


def test_gpu_endpoints_tolerate_the_gpu_taint_and_request_gpus(onprem_run: Any, knative_run: Any) -> None:
    gpu_toleration = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    chat = onprem_run.named("isvc-models-chat").raw_inputs["spec"]["predictor"]
    assert chat["tolerations"] == [gpu_toleration]
    assert chat["model"]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    cpu_only = knative_run.named("isvc-demo-sklearn-iris").raw_inputs["spec"]["predictor"]
    assert "tolerations" not in cpu_only
    assert "nvidia.com/gpu" not in cpu_only["model"]["resources"]["limits"]
    embeddings = onprem_run.named("deploy-models-embeddings").raw_inputs["spec"]["template"]["spec"]
    assert "tolerations" not in embeddings


def test_the_hpa_owns_the_replica_count(onprem_run: Any) -> None:
    deployment = onprem_run.named("deploy-models-embeddings")
    assert deployment.options["ignoreChanges"] == ["spec.replicas"]
    hpa = onprem_run.named("hpa-models-embeddings")
    assert onprem_run.urn_of("deploy-models-embeddings") in hpa.depends_on
    assert onprem_run.urn_of("metrics-server") in hpa.depends_on


@pytest.mark.parametrize(
    ("mode", "provider", "flag", "wanted"),
    [
        ("kubeadm", "generic", None, True),
        ("existing", "generic", None, True),
        ("existing", "eks", None, True),
        ("existing", "gke", None, False),
        ("existing", "aks", None, False),
        ("existing", "gke", True, True),
        ("kubeadm", "generic", False, False),
    ],
)
def test_metrics_server_default_follows_the_provider(mode: str, provider: str, flag: bool | None, wanted: bool) -> None:
    assert metrics_server_wanted(KserveSpec(metrics_server=flag), mode, provider) is wanted


def test_metrics_server_on_kubeadm_but_not_on_gke(onprem_run: Any, run_stack: Any) -> None:
    release = onprem_run.named("metrics-server")
    assert release.raw_inputs["values"] == {"args": ["--kubelet-insecure-tls"]}
    cloud = run_stack("cloud")
    assert "metrics-server" not in {r.name for r in cloud.of_type(RELEASE)}


def test_the_knative_cost_reaches_the_engine_as_a_warning(run_stack: Any, caplog: pytest.LogCaptureFixture) -> None:
    values, secret = knative_values()
    with caplog.at_level("WARNING"):
        run_stack(values=values, secret=secret)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(
        w.startswith("mlcluster:kserve.deploymentMode: Knative installs at least eight more always-on")
        for w in warnings
    )
