"""AI conformance by construction (issue 34): the evidence pack against the upstream checklists, Kueue's gang
scheduling (waitForPodsReady) and the GPU Operator's secure accelerator access, as values and as the charts render
them with the real Helm engine."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import conformance
from components.config.derived import lost_musts
from components.config.load import spec_and_warnings
from components.config.schema import ConfigError
from components.render.gpu_operator import dra_driver_values, gpu_operator_values
from components.render.kueue import kueue_values, manager_configuration

from .conftest import load_spec, stack_values
from .helm_render import render_chart
from .upstream import UPSTREAM, chart_values, custom_resource_errors, unknown_value_keys

TEMPLATES = UPSTREAM / "conformance" / "cncf-k8s-ai-conformance"
STACKS = ("onprem", "cloud", "lab", "platform")
STATUSES = {"Implemented", "Not Implemented", "Partially Implemented", "N/A"}


def variant(stack: str, **changes: Any) -> Any:
    values, secret = stack_values(stack)
    values = copy.deepcopy(values)
    for key, change in changes.items():
        values[key] = {**values.get(key, {}), **change}
    return load_spec(values, secret)


SPECS = {
    **{name: (lambda name=name: load_spec(*stack_values(name))) for name in STACKS},
    "onprem-dra": lambda: variant("onprem", gpuOperator={"dra": True}),
    # KServe off, and what needs it with it (its deployments; NVSentinel's cordoning takes cert-manager from it).
    "onprem-no-kserve": lambda: variant(
        "onprem",
        kserve={"enabled": False, "deployments": [], "endpoints": []},
        monitoring={"faultHandling": {"mode": "observe"}},
    ),
}


def upstream_items(path: Path) -> list[dict[str, Any]]:
    document = yaml.safe_load(path.read_text())
    return [item for items in document["spec"].values() for item in items]


def pack(spec: Any, minor: int, stack: str = "test") -> dict[str, Any]:
    return conformance.evidence_pack(spec, conformance.templates(TEMPLATES)[minor], stack=stack)


@pytest.mark.parametrize("name", list(SPECS))
def test_pack_keeps_every_upstream_field_and_fills_every_status(name: str) -> None:
    spec = SPECS[name]()
    files = conformance.pack_files(spec, TEMPLATES, stack=name)
    minor = conformance.stack_minor(spec)
    assert next(iter(files)) == f"ai-conformance-v1.{minor}.yaml"
    for file_name, text in files.items():
        filled = yaml.safe_load(text)
        source = TEMPLATES / file_name.replace("ai-conformance-v", "AIConformance-")
        upstream = yaml.safe_load(source.read_text())
        # Same categories in the same order, same items in the same order, id/description/level as upstream.
        assert list(filled["spec"]) == list(upstream["spec"])
        for category, items in upstream["spec"].items():
            got = filled["spec"][category]
            assert [(i["id"], i["description"], i["level"]) for i in got] == [
                (i["id"], i["description"], i["level"]) for i in items
            ]
            for item in got:
                assert item["status"] in STATUSES, (file_name, item["id"])
                assert isinstance(item["evidence"], list)
                if item["status"] != "Not Implemented":
                    assert item["evidence"], (file_name, item["id"])
                if item["status"] == "N/A":
                    assert item["notes"], "N/A needs a justification (instructions.md, faq.md)"
        assert filled["metadata"]["kubernetesVersion"] == upstream["metadata"]["kubernetesVersion"]
        # Each description reads back byte for byte from the YAML we write.
        for item in upstream_items(source):
            assert f"description: {item['description']}\n" in text or repr(item["description"]) in text


def statuses(spec: Any, minor: int) -> dict[str, str]:
    return {i["id"]: i["status"] for items in pack(spec, minor)["spec"].values() for i in items}


def test_onprem_meets_every_must() -> None:
    found = statuses(SPECS["onprem"](), 34)
    musts = [i["id"] for i in upstream_items(TEMPLATES / "AIConformance-1.34.yaml") if i["level"] == "MUST"]
    assert {m: found[m] for m in musts if found[m] not in ("Implemented", "N/A")} == {}
    assert found["cluster_autoscaling"] == "N/A"
    assert lost_musts(SPECS["onprem"]()) == []


def test_na_only_for_cluster_autoscaling_with_a_reason_that_is_not_a_missing_feature() -> None:
    for name, make in SPECS.items():
        for items in pack(make(), 35)["spec"].values():
            for item in items:
                if item["status"] == "N/A":
                    assert item["id"] == "cluster_autoscaling", (name, item["id"])
                    assert "not supported" not in item["notes"] and "don't support" not in item["notes"]


def test_kserve_off_loses_ai_inference_in_the_pack_and_in_a_warning() -> None:
    spec = SPECS["onprem-no-kserve"]()
    assert statuses(spec, 34)["ai_inference"] == "Not Implemented"
    assert [(m.requirement, m.path) for m in lost_musts(spec)] == [("ai_inference", "kserve.enabled")]
    # Still an operator with CRDs: Kubeflow Trainer.
    assert statuses(spec, 34)["robust_controller"] == "Implemented"


def test_warnings_name_the_lost_musts_at_config_time() -> None:
    values, secret = stack_values("lab")
    _, problems = spec_and_warnings(values, lambda key: key in secret)
    texts = [str(p) for p in problems.warnings] if hasattr(problems, "warnings") else [str(p) for p in problems]
    for requirement in ("ai_inference", "gang_scheduling", "robust_controller"):
        assert any(requirement in t for t in texts), texts


def test_dra_variant_evidence_names_the_dra_driver() -> None:
    item = next(i for i in pack(SPECS["onprem-dra"](), 34)["spec"]["accelerators"] if i["id"] == "dra_support")
    assert item["status"] == "Implemented"
    assert any("nvidia-dra-driver-gpu" in e for e in item["evidence"])
    secure = next(i for i in pack(SPECS["onprem-dra"](), 34)["spec"]["security"])
    assert any("ResourceClaims" in e for e in secure["evidence"])


def test_gang_scheduling_off_is_not_implemented() -> None:
    spec = variant("onprem", kueue={"waitForPodsReady": {"enabled": False}})
    assert statuses(spec, 34)["gang_scheduling"] == "Not Implemented"
    assert "waitForPodsReady" not in manager_configuration(spec.kueue, spec.kubeflow)


def test_1_36_shoulds_are_reported() -> None:
    found = statuses(SPECS["onprem"](), 36)
    for should in ("advanced_inference_ingress", "high_performance_networking", "disaggregated_inference"):
        assert found[should] in STATUSES


def test_cli_writes_the_pack_and_refuses_a_minor_without_a_checklist(tmp_path: Path) -> None:
    assert conformance.main(["--stack", "onprem", "--out", str(tmp_path / "pack"), "--templates", str(TEMPLATES)]) == 0
    assert (tmp_path / "pack" / "ai-conformance-v1.35.yaml").is_file()
    empty = tmp_path / "none"
    empty.mkdir()
    assert conformance.main(["--stack", "onprem", "--out", str(tmp_path / "x"), "--templates", str(empty)]) == 2


def test_cli_reports_a_config_error_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "Pulumi.broken.yaml"
    broken.write_text("config:\n  mlcluster:kueue:\n    waitForPodsReady:\n      timeout: soon\n")
    assert conformance.main(["--stack-file", str(broken)]) == 2
    assert "Traceback" not in capsys.readouterr().err


# --- gang scheduling: Kueue's waitForPodsReady ------------------------------------------------------------------


def test_wait_for_pods_ready_is_on_by_default_in_the_v1beta2_shape() -> None:
    configuration = manager_configuration(SPECS["onprem"]().kueue, SPECS["onprem"]().kubeflow)
    assert configuration["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    # v1beta2 has no `enable`: the section's presence turns it on; timeout is required.
    assert configuration["waitForPodsReady"] == {
        "timeout": "10m",
        "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
    }


def test_wait_for_pods_ready_settings_and_their_checks() -> None:
    spec = variant(
        "onprem",
        kueue={
            "waitForPodsReady": {
                "timeout": "20m",
                "recoveryTimeout": "5m",
                "requeuingTimestamp": "Creation",
                "backoffBaseSeconds": 30,
                "backoffMaxSeconds": 600,
                "backoffLimitCount": 5,
            }
        },
    )
    assert manager_configuration(spec.kueue, spec.kubeflow)["waitForPodsReady"] == {
        "timeout": "20m",
        "recoveryTimeout": "5m",
        "requeuingStrategy": {
            "timestamp": "Creation",
            "backoffBaseSeconds": 30,
            "backoffMaxSeconds": 600,
            "backoffLimitCount": 5,
        },
    }
    with pytest.raises(ConfigError) as raised:
        variant(
            "onprem", kueue={"waitForPodsReady": {"timeout": "0s", "backoffBaseSeconds": 900, "backoffMaxSeconds": 60}}
        )
    report = raised.value.report()
    assert "kueue.waitForPodsReady.timeout" in report and "kueue.waitForPodsReady.backoffBaseSeconds" in report


@pytest.mark.render
def test_kueue_chart_renders_wait_for_pods_ready_into_its_manager_config() -> None:
    spec = SPECS["onprem"]()
    chart = render_chart(
        "kueue",
        spec.kueue.version,
        kueue_values(spec),
        release="kueue",
        namespace="kueue-system",
        kube_version=spec.kubernetes_version,
    )
    config_map = chart.named("ConfigMap", "kueue-manager-config")
    configuration = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    assert configuration["waitForPodsReady"] == manager_configuration(spec.kueue, spec.kubeflow)["waitForPodsReady"]


# --- secure accelerator access --------------------------------------------------------------------------------------


SECURE_TOOLKIT = {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"}
CDI_STRATEGY = {"name": "DEVICE_LIST_STRATEGY", "value": "cdi-annotations,cdi-cri"}


def test_secure_access_values_exist_upstream_and_are_set_by_default() -> None:
    spec = SPECS["onprem"]()
    values = gpu_operator_values(spec, True)
    assert values["cdi"] == {"enabled": True}
    assert SECURE_TOOLKIT in values["toolkit"]["env"]
    assert values["devicePlugin"]["env"] == [CDI_STRATEGY]
    ours = {"cdi": values["cdi"], "toolkit": {"env": []}, "devicePlugin": {"env": []}}
    assert unknown_value_keys(ours, chart_values("gpu-operator", spec.gpu_operator.version)) == []
    dra = gpu_operator_values(variant("onprem", gpuOperator={"dra": True}), True)
    assert dra["devicePlugin"] == {"enabled": False} and SECURE_TOOLKIT in dra["toolkit"]["env"]
    # The DRA driver hands GPUs to containerd as CDI devices only: it has no environment-variable path to close.
    assert "env" not in str(dra_driver_values(variant("onprem", gpuOperator={"dra": True}), "/"))


@pytest.mark.render
def test_gpu_operator_chart_renders_the_secure_access_env_into_the_cluster_policy() -> None:
    spec = SPECS["onprem"]()
    chart = render_chart(
        "gpu-operator",
        spec.gpu_operator.version,
        gpu_operator_values(spec, True),
        release="gpu-operator",
        namespace="gpu-operator",
        kube_version=spec.kubernetes_version,
    )
    [policy] = chart.of_kind("ClusterPolicy")
    assert policy["spec"]["cdi"]["enabled"] is True
    assert SECURE_TOOLKIT in policy["spec"]["toolkit"]["env"]
    assert CDI_STRATEGY in policy["spec"]["devicePlugin"]["env"]
    [crd] = [c for c in chart.crds if c["spec"]["names"]["kind"] == "ClusterPolicy"]
    assert custom_resource_errors(policy, crd, "ClusterPolicy CRD") == []


def test_the_submission_is_product_yaml_in_its_version_folder_with_what_a_person_must_fill(tmp_path: Path) -> None:
    """cncf/k8s-ai-conformance instructions.md: a pull request holds vX.Y/<dir>/PRODUCT.yaml with the metadata fields
    of its table; the checklist's id, description and level unchanged."""
    spec = SPECS["onprem"]()
    files = conformance.submission_files(spec, TEMPLATES, stack="onprem")
    assert sorted(files) == [
        "submission/v1.35/mlcluster-onprem/EVIDENCE.md",
        "submission/v1.35/mlcluster-onprem/PRODUCT.yaml",
    ]
    product = yaml.safe_load(files["submission/v1.35/mlcluster-onprem/PRODUCT.yaml"])
    template = yaml.safe_load((TEMPLATES / "AIConformance-1.35.yaml").read_text())
    assert list(product["metadata"]) == list(template["metadata"])
    instructions = (TEMPLATES / "instructions.md").read_text()
    for key, value in product["metadata"].items():
        if key in ("kubernetesVersion", "platformName"):
            continue
        assert f"`{key}`" in instructions, key  # a field of the PRODUCT.yaml table
        assert str(value).startswith("FILL IN"), (key, value)
    assert product["metadata"]["kubernetesVersion"] == "v1.35"
    for section, items in template["spec"].items():
        mine = product["spec"][section]
        assert [(i["id"], i["description"], i["level"]) for i in mine] == [
            (i["id"], i["description"], i["level"]) for i in items
        ]
        assert all(i["status"] in STATUSES for i in mine)
    guide = files["submission/v1.35/mlcluster-onprem/EVIDENCE.md"]
    rows = [line for line in guide.splitlines() if line.startswith("| ") and not line.startswith("| id ")]
    assert len(rows) == sum(len(items) for items in template["spec"].values())
    assert all(row.count(" | ") == 4 for row in rows), [r for r in rows if r.count(" | ") != 4]
    musts = [row for row in rows if " | MUST | Implemented | " in row]
    assert musts and all("published as URLs" in row for row in musts)


@pytest.mark.parametrize(("minor", "asks_for_k8s_conformance"), [("1.35.8", True), ("1.36.4", False)])
def test_the_submission_asks_only_for_the_metadata_its_minors_template_has(
    tmp_path: Path, minor: str, asks_for_k8s_conformance: bool
) -> None:
    """The 1.36 template dropped k8sConformanceUrl (cncf/k8s-ai-conformance AIConformance-1.36.yaml metadata): the
    submission neither adds it nor asks for it."""
    values, secret = stack_values("onprem")
    spec = load_spec({**values, "kubernetesVersion": minor}, secret)
    files = conformance.submission_files(spec, conformance.templates_dir(None), stack="onprem")
    (product,) = [text for name, text in files.items() if name.endswith("PRODUCT.yaml")]
    (evidence,) = [text for name, text in files.items() if name.endswith("EVIDENCE.md")]
    assert ("k8sConformanceUrl" in yaml.safe_load(product)["metadata"]) is asks_for_k8s_conformance
    assert ("k8sConformanceUrl" in evidence) is asks_for_k8s_conformance
