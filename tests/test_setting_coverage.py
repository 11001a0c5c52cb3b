"""Every configuration key is exercised by a test, and the keys no other test set reach what they configure.

The first test holds the whole suite to the generated config reference: each key appears in a test or a test
fixture, by its full path or as a quoted field under its parent's name. The rows below are the keys that appeared
nowhere before: each is set to a value other than its default on a stack where it takes effect, and the program's
preview must change exactly the resources the row names (what a reviewer would see move in the plan).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pulumi.runtime import mocks as pulumi_mocks

from components.acceptance.waves import plan_waves
from components.cluster import clock
from components.config.schema import reference_rows
from components.config.spec import Spec
from components.plan.engine import SECRET, STACK_REFERENCE, run_program, stack_reference

from .conftest import PROJECT, as_config, load_spec, stack_values

TESTS = PROJECT / "tests"


def _quoted(name: str, text: str) -> bool:
    return re.search(rf"""(["']){re.escape(name)}\1|\b{re.escape(name)}:""", text) is not None


def uncovered_keys(texts: Mapping[Path, str]) -> list[str]:
    """Keys of the reference that no text names: by full path (`nodes[3].gpu` names `nodes[].gpu`), or as a quoted
    field (or a YAML key) beside its parent's name or full path."""
    paths = [re.sub(r"\[\d+\]", "[]", text) for text in texts.values()]
    missing = []
    for row in reference_rows(Spec):
        parts = row.key.replace("[]", "").split(".")
        parent_path = row.key.rsplit(".", 1)[0] if "." in row.key else None
        covered = any(
            row.key in path
            or (
                _quoted(parts[-1], text)
                and (parent_path is None or _quoted(parts[-2], text) or f"{parent_path}" in path)
            )
            for text, path in zip(texts.values(), paths, strict=True)
        )
        if not covered:
            missing.append(row.key)
    return missing


def test_every_key_of_the_config_reference_appears_in_a_test() -> None:
    texts = {
        path: path.read_text()
        for path in TESTS.rglob("*")
        if path.is_file() and path.suffix in (".py", ".yaml", ".yml", ".json")
    }
    assert uncovered_keys(texts) == [], "a key no test sets: add a row below, or a test of its own"


def test_the_coverage_check_misses_a_key_no_test_names() -> None:
    texts = {Path("a.py"): 'values["acceptance"] = {"maxWaveNodes": 2}', Path("b.yaml"): "cluster:\n  name: x\n"}
    missing = uncovered_keys(texts)
    assert "acceptance.maxWaveNodes" not in missing and "cluster.name" not in missing
    assert "acceptance.maxFleetFraction" in missing and "kserve.kedaNamespace" in missing


# --- each key reaches the resources it configures ------------------------------------------------------------------


def _rich_onprem() -> tuple[dict[str, Any], list[str]]:
    """The on-prem example with every layer these keys configure turned on."""
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["gpuOperator"]["dra"] = True
    values["kubeflow"].update(legacyTrainingOperator=True, notebooks=True)
    values["network"]["rdma"]["enabled"] = True
    endpoint = values["kserve"]["endpoints"][0]
    endpoint["versions"] = [
        {"name": "v1", "weight": 90},
        {"name": "v2", "weight": 10, "storageUri": "hf://Qwen/Qwen2.5-7B-Instruct"},
    ]
    endpoint["autoscaling"] = {"metric": "queue", "target": 4}  # KEDA is installed for it
    return values, secret


def _knative(values: dict[str, Any]) -> None:
    values["kserve"]["deploymentMode"] = "Knative"
    endpoint = values["kserve"]["endpoints"][0]
    endpoint.pop("versions")  # versions and KEDA need deploymentMode Standard
    endpoint["autoscaling"] = {"metric": "concurrency", "target": 4}


def _without_spegel(values: dict[str, Any]) -> None:
    values["images"]["spegel"] = {"enabled": False}  # Spegel takes mirrors as plain URLs only


@dataclass(frozen=True)
class Row:
    key: str
    value: Any
    changes: tuple[str, ...]
    """What moves in the plan: `Type::name` of each resource (the URN's last two parts)."""
    base: Callable[[dict[str, Any]], None] | None = None


HELM = "kubernetes:helm.sh/v3:Release"
ROWS = (
    Row("nodes[5].imageDisk.filesystem", "ext4", ("command:remote:Command::gpu-1-prepare",)),
    Row("gpuOperator.draDriverVersion", "25.3.0", (f"{HELM}::nvidia-dra-driver-gpu",)),
    Row("gpuOperator.driverUpgradePolicy.autoUpgrade", False, (f"{HELM}::gpu-operator",)),
    Row("gpuOperator.driverUpgradePolicy.maxParallelUpgrades", 3, (f"{HELM}::gpu-operator",)),
    Row(
        "gpuOperator.driverUpgradePolicy.gpuPodDeletion",
        {"force": True, "timeoutSeconds": 123},
        (f"{HELM}::gpu-operator",),
    ),
    Row("gpuOperator.timeoutMinutes", 55, (f"{HELM}::gpu-operator",)),
    Row("kueue.teams[0].queueingStrategy", "StrictFIFO", ("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue::llm",)),
    Row(
        "kueue.teams[1].preemption",
        {"withinClusterQueue": "Never"},
        ("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue::vision",),
    ),
    Row("kserve.certManagerVersion", "v1.19.0", (f"{HELM}::cert-manager",)),
    Row(
        "kserve.knative",
        {"operatorVersion": "1.20.0", "servingVersion": "1.20"},
        (f"{HELM}::knative-operator", "kubernetes:operator.knative.dev/v1beta1:KnativeServing::knative-serving"),
        base=_knative,
    ),
    Row("kserve.metricsServerVersion", "3.12.2", (f"{HELM}::metrics-server",)),
    Row("kserve.kedaVersion", "2.19.0", (f"{HELM}::keda",)),
    Row("kserve.kedaNamespace", "autoscaling", (f"{HELM}::keda",)),
    Row(
        "kserve.endpoints[0].versions[1].runtime",
        "kserve-huggingfaceserver",
        ("kubernetes:serving.kserve.io/v1beta1:InferenceService::isvc-models-chat-v2",),
    ),
    Row("kubeflow.installJobSet", False, (f"{HELM}::kubeflow-trainer",)),
    Row("kubeflow.defaultRuntimes", False, (f"{HELM}::kubeflow-trainer",)),
    Row(
        "kubeflow.legacyTrainingOperatorVersion",
        "v1.9.3",
        ("kubernetes:kustomize/v2:Directory::training-operator",),
    ),
    Row("kubeflow.notebooksVersion", "v1.10.0", ("kubernetes:kustomize/v2:Directory::notebook-controller",)),
    Row(
        "images.mirrors[0].skipVerify",
        True,
        tuple(f"command:remote:Command::{node}-prepare" for node in ("cp-1", "cp-2", "cp-3", "cpu-1", "cpu-2"))
        + tuple(f"command:remote:Command::gpu-{i}-prepare" for i in range(1, 5)),
        base=_without_spegel,
    ),
    Row("images.spegel.mirroredRegistries", ["https://docker.io"], (f"{HELM}::spegel",)),
    Row(
        "images.capacityCheck",
        False,
        tuple(f"command:remote:Command::gpu-{i}-prepare" for i in range(1, 5)),
    ),
    Row(
        "workloads.training.pytorchJob",
        False,
        (
            "kubernetes:core/v1:PersistentVolumeClaim::vision-pytorch-train-pytorchjob-checkpoints",
            "kubernetes:kubeflow.org/v1:PyTorchJob::vision-pytorch-train",
        ),
    ),
    Row(
        "network.rdma.nics.drivers",
        ["mlx5_core"],
        ("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy::nic-cluster-policy",),
    ),
    Row("network.rdma.hcaMax", 31, ("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy::nic-cluster-policy",)),
    Row("network.rdma.timeoutMinutes", 25, (f"{HELM}::network-operator",)),
)


def _set(values: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node: Any = values
    for part in parents:
        name, _, index = part.partition("[")
        node = node.setdefault(name, {})
        if index:
            node = node[int(index.rstrip("]"))]
    node[last] = value


MOMENT = datetime(2026, 12, 5, 12, tzinfo=UTC)


@cache
def _preview(config_json: str, secret: tuple[str, ...]) -> dict[str, str]:
    """`Type::name` -> the recorded inputs and options of each resource of a preview."""
    with clock.fixed_at(MOMENT):
        run = run_program(json.loads(config_json), [f"mlcluster:{k}" for k in secret], stack="onprem", preview=True)
    return {
        resource.urn.split("::", 2)[-1].split("$")[-1]: json.dumps([resource.inputs, resource.options], sort_keys=True)
        for resource in run.resources
    }


def groups(rows: tuple[Row, ...]) -> list[tuple[Row, ...]]:
    """Rows set together in one preview: a row with a base of its own alone; the others in the fewest groups whose
    rows name no resource in common, so that every resource that moves in a group is one row's (a preview is
    0.4 s of CPU, and the loop that runs these has two cores)."""
    alone = [(row,) for row in rows if row.base is not None]
    together: list[list[Row]] = []
    for row in (row for row in rows if row.base is None):
        for group in together:
            if not any(set(row.changes) & set(other.changes) for other in group):
                group.append(row)
                break
        else:
            together.append([row])
    return alone + [tuple(group) for group in together]


def moved(values: dict[str, Any], secret: list[str], rows: tuple[Row, ...]) -> list[str]:
    base = copy.deepcopy(values)
    for row in rows:
        if row.base:
            row.base(base)
    changed = copy.deepcopy(base)
    for row in rows:
        _set(changed, row.key, row.value)
    before = _preview(json.dumps(as_config(base), sort_keys=True), tuple(secret))
    after = _preview(json.dumps(as_config(changed), sort_keys=True), tuple(secret))
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


GROUPS = groups(ROWS)


@pytest.mark.parametrize("rows", GROUPS, ids=[" + ".join(row.key for row in group) for group in GROUPS])
def test_settings_move_the_resources_they_configure(rows: tuple[Row, ...]) -> None:
    values, secret = _rich_onprem()
    expected = sorted(name for row in rows for name in row.changes)
    assert moved(values, secret, rows) == expected, "\n".join(f"{row.key}: {row.changes}" for row in rows)


def test_grouped_rows_name_no_resource_in_common() -> None:
    assert sorted(row.key for group in GROUPS for row in group) == sorted(row.key for row in ROWS)
    for group in GROUPS:
        named = [name for row in group for name in row.changes]
        assert len(named) == len(set(named)), group


def test_the_setting_check_fails_for_a_setting_that_moves_nothing() -> None:
    values, secret = _rich_onprem()
    # The version pinned by the example is the default: setting it to itself moves nothing.
    still = Row("kserve.kedaVersion", Spec().kserve.keda_version, (f"{HELM}::keda",))
    assert moved(values, secret, (still,)) == []


@pytest.mark.parametrize(
    ("settings", "sizes"),
    [
        ({}, [1, 1, 1, 1]),  # 10% of four GPU nodes is none: never fewer than one
        ({"maxFleetFraction": 0.5}, [2, 2]),
        ({"maxFleetFraction": 1.0}, [4]),
        ({"maxFleetFraction": 1.0, "maxWaveNodes": 3}, [3, 1]),
    ],
)
def test_acceptance_wave_limits_size_the_waves(settings: dict[str, Any], sizes: list[int]) -> None:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["acceptance"] = settings
    spec = load_spec(values, secret)
    gpu_nodes = [node.name for node in spec.nodes if node.gpu is not None]
    waves = plan_waves(gpu_nodes, spec.acceptance.acceptance_spec()).waves
    assert [len(wave.nodes) for wave in waves] == sizes


class _DeployedClusterStack(pulumi_mocks.Mocks):
    """An up where the stack named by cluster.kubeconfigFrom was deployed with one output, `adminKubeconfig`."""

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == STACK_REFERENCE:
            return stack_reference(args, {"adminKubeconfig": "apiVersion: v1\nkind: Config\n"})
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


@pytest.mark.parametrize(("output", "reads"), [("adminKubeconfig", True), (None, False)])
def test_kubeconfig_output_names_the_output_read_from_the_cluster_stack(output: str | None, reads: bool) -> None:
    values, secret = stack_values("cloud")
    values = copy.deepcopy(values)
    values["cluster"].pop("kubeconfig")
    values["cluster"]["kubeconfigFrom"] = "acme/nodes/prod"
    if output is not None:
        values["cluster"]["kubeconfigOutput"] = output
    secret = [key for key in secret if key != "cluster"]
    config, keys = as_config(values), [f"mlcluster:{k}" for k in secret]
    if reads:
        run = run_program(config, keys, stack="cloud", preview=False, mocks=_DeployedClusterStack())
        [provider] = [r for r in run.resources if r.type == "pulumi:providers:kubernetes"]
        assert provider.inputs["kubeconfig"] == SECRET  # read, and kept secret
    else:
        # The default name, `kubeconfig`, is not among that stack's outputs: the up stops naming it.
        with pytest.raises(Exception, match="kubeconfig"):
            run_program(config, keys, stack="cloud", preview=False, mocks=_DeployedClusterStack())
