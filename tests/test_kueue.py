"""Kueue: objects valid against the v1beta2 CRDs, chart values upstream, quotas checked against the GPUs."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from components.config.derived import gpu_flavors
from components.config.load import spec_from_values
from components.config.rules import kueue_inventory
from components.config.schema import ConfigError, Problems
from components.config.spec import Spec
from components.plan.writer import write_plan
from components.render.kueue import (
    FLAVOR_LABEL,
    KUEUE_API,
    LEGACY_PYTORCHJOB,
    QUEUE_NAME_LABEL,
    TOPOLOGY_NAME,
    cluster_queue,
    integrations,
    kueue_objects,
    kueue_release,
    manager_configuration,
)

from .cel_rules import crd_rule_errors
from .conftest import PROJECT, known, stack_values
from .upstream import (
    chart_crd,
    chart_values,
    crd_errors,
    custom_resource_errors,
    kubernetes_errors,
    kueue_crds,
    unknown_value_keys,
)

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG1sY2x1c3Rlci10ZXN0LWhvc3Qta2V5LTAwMDAwMDAw"
H100 = "H100-SXM-80GB"
FLAVOR = "h100-sxm-80gb"
CRDS = {
    kind: f"kueue/v0.19.2/kueue.x-k8s.io_{plural}.yaml"
    for kind, plural in (
        ("ResourceFlavor", "resourceflavors"),
        ("ClusterQueue", "clusterqueues"),
        ("LocalQueue", "localqueues"),
        ("WorkloadPriorityClass", "workloadpriorityclasses"),
        ("Cohort", "cohorts"),
    )
}
TOPOLOGY_CRD = ("kueue", "0.19.2", "kueue.x-k8s.io_topologies.yaml")
"""The shared CRD fixtures lack the Topology: the pinned chart's own template of it."""


def kueue_crd_errors(document: dict[str, Any]) -> list[str]:
    if document["kind"] == "Topology":
        return custom_resource_errors(document, chart_crd(*TOPOLOGY_CRD), "/".join(TOPOLOGY_CRD))
    return crd_errors(document, CRDS[document["kind"]])


# --- stacks as data -------------------------------------------------------------------------------------------


def gpu_team(name: str, gpus: int, flavor: str = FLAVOR, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {
        "name": name,
        "quotas": [
            {"flavor": "cpu", "nominal": {"cpu": "16", "memory": "64Gi"}},
            {"flavor": flavor, "nominal": {"cpu": "64", "memory": "512Gi", resource: gpus}},
        ],
    }


GPU_DEPLOYMENT = {"name": "tgi", "image": "registry.example/tgi:1", "gpus": 2}
"""A GPU inference Deployment outside Kueue (minReplicas 1: it always holds 2 GPUs)."""


def lab(
    teams: list[dict[str, Any]],
    *,
    gpu_nodes: int = 4,
    gpu: dict[str, Any] | None = None,
    kueue: dict[str, Any] | None = None,
    gpu_operator: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A kubeadm stack: one control plane, one CPU worker, `gpu_nodes` workers with 8 H100 each."""
    nodes = [
        {"name": "cp-1", "host": "198.18.0.10", "roles": ["control-plane"], "hostKey": HOST_KEY},
        {"name": "cpu-1", "host": "198.18.0.11", "roles": ["worker"], "hostKey": HOST_KEY},
    ]
    for i in range(gpu_nodes):
        nodes.append(
            {
                "name": f"gpu-{i + 1}",
                "host": f"198.18.1.{i + 1}",
                "roles": ["worker"],
                "hostKey": HOST_KEY,
                "gpu": {"count": 8, "model": H100, **(gpu or {})},
            }
        )
    return {
        "cluster": {"mode": "kubeadm", "name": "lab"},
        "ssh": {"privateKey": "KEY"},
        "nodes": nodes,
        "gpuOperator": gpu_operator or {},
        "kueue": {"teams": teams, **(kueue or {})},
    }


def existing(kueue: dict[str, Any]) -> dict[str, Any]:
    return {"cluster": {"mode": "existing", "kubeconfig": "KUBECONFIG"}, "kueue": kueue}


SECRET_SECTIONS = ("ssh", "cluster")


def parse(values: dict[str, Any], secret: tuple[str, ...] | list[str] = SECRET_SECTIONS) -> Spec:
    return spec_from_values(values, lambda key: key in secret)


def findings(
    values: dict[str, Any], secret: tuple[str, ...] | list[str] = SECRET_SECTIONS
) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the whole config, as the user reads them."""
    try:
        spec = parse(values, secret)
    except ConfigError as error:
        # What the stack gives up of the AI conformance is tests/test_conformance.py's, not the inventory's.
        warned = [str(p) for p in error.problems.warnings if "AI Conformance" not in p.message]
        return [str(p) for p in error.problems.errors], warned
    problems = Problems()
    kueue_inventory(spec, problems)
    return [], [str(p) for p in problems.warnings]


# --- inventory checks: (stack, expected error fragments, expected warning fragments); [] means none ---------------

INVENTORY_CASES = {
    "4x8 H100, 16+16, no cohort: fits exactly": (lab([gpu_team("llm", 16), gpu_team("vision", 16)]), [], []),
    "4x8 H100, 24+16, no cohort: error naming both teams and the numbers": (
        lab([gpu_team("llm", 24), gpu_team("vision", 16)]),
        [
            "mlcluster:kueue.teams: nominal nvidia.com/gpu quotas of flavor h100-sxm-80gb add up to 40"
            " (llm 24 + vision 16), more than the 32 the nodes have (4 nodes × 8 H100-SXM-80GB):"
            " over-committed by 8 with no cohort"
        ],
        [],
    ),
    "4x8 H100, 24+16 in a cohort: a warning, not an error": (
        lab([gpu_team("llm", 24), gpu_team("vision", 16)], kueue={"cohort": "ml"}),
        [],
        ["add up to 40 (llm 24 + vision 16), more than the 32", "cohort ml may admit workloads"],
    ),
    "4x8 H100, 16+8: 8 unused": (
        lab([gpu_team("llm", 16), gpu_team("vision", 8)]),
        [],
        ["8 of the 32 nvidia.com/gpu of flavor h100-sxm-80gb (4 nodes × 8 H100-SXM-80GB) are in no team's"],
    ),
    "30 of 32 in quotas, 2 held by a Deployment outside Kueue: every GPU accounted for, no warning": (
        {**lab([gpu_team("llm", 30)]), "kserve": {"enabled": True, "deployments": [GPU_DEPLOYMENT]}},
        [],
        [],
    ),
    "32 of 32 in quotas and 2 held outside: one warning, to lower the quotas by 2 (not also 'unused')": (
        {**lab([gpu_team("llm", 32)]), "kserve": {"enabled": True, "deployments": [GPU_DEPLOYMENT]}},
        [],
        ["quotas promise 32 of the 32 GPUs, but 2 are held outside Kueue (deployment tgi 2)"],
    ),
    "24 of 32 and 2 held outside: 6 unused, the 2 named": (
        {**lab([gpu_team("llm", 24)]), "kserve": {"enabled": True, "deployments": [GPU_DEPLOYMENT]}},
        [],
        ["6 of the 32 nvidia.com/gpu of flavor h100-sxm-80gb (4 nodes × 8 H100-SXM-80GB), besides 2 held by pods"],
    ),
    "time-slicing 4 (cluster default): 128 devices, 64+64 fits": (
        lab([gpu_team("llm", 64), gpu_team("vision", 64)], gpu_operator={"timeSlicingReplicas": 4}),
        [],
        [],
    ),
    "time-slicing 4: 64+65 is over the 128": (
        lab([gpu_team("llm", 64), gpu_team("vision", 65)], gpu_operator={"timeSlicingReplicas": 4}),
        [
            "add up to 129 (llm 64 + vision 65), more than the 128 the nodes have"
            " (4 nodes × 8 H100-SXM-80GB × 4 time-slicing replicas)"
        ],
        [],
    ),
    "time-slicing per node overrides the cluster default": (
        lab([gpu_team("llm", 64)], gpu={"timeSlicingReplicas": 2}, gpu_operator={"timeSlicingReplicas": 4}),
        [],
        [],
    ),
    "quota for a GPU model no node has": (
        lab([gpu_team("llm", 16), gpu_team("vision", 8, flavor="a100-80gb")]),
        [
            'mlcluster:kueue.teams[1].quotas[1].flavor: "a100-80gb": no node in the stack has this GPU model'
            " (flavors: cpu, h100-sxm-80gb)"
        ],
        ["16 of the 32 nvidia.com/gpu of flavor h100-sxm-80gb"],
    ),
    "MIG mixed all-1g.10gb: 8 x 7 slices per node": (
        lab(
            [gpu_team("llm", 224, resource="nvidia.com/mig-1g.10gb")],
            gpu={"migConfig": "all-1g.10gb"},
            gpu_operator={"migStrategy": "mixed"},
        ),
        [],
        [],
    ),
    "MIG mixed: whole GPUs are not offered": (
        lab([gpu_team("llm", 8)], gpu={"migConfig": "all-1g.10gb"}, gpu_operator={"migStrategy": "mixed"}),
        [
            "mlcluster:kueue.teams[0].quotas[1].nominal.nvidia.com/gpu: (8): no node of flavor h100-sxm-80gb provides"
            " nvidia.com/gpu (they provide nvidia.com/mig-1g.10gb 224)"
        ],
        [
            "224 of the 224 nvidia.com/mig-1g.10gb of flavor h100-sxm-80gb"
            " (4 nodes × 8 H100-SXM-80GB × 7 1g.10gb slices)"
        ],
    ),
    "MIG single all-3g.40gb: 8 x 2 as nvidia.com/gpu": (
        lab([gpu_team("llm", 65)], gpu={"migConfig": "all-3g.40gb"}, gpu_operator={"migStrategy": "single"}),
        ["add up to 65 (llm 65), more than the 64 the nodes have (4 nodes × 8 H100-SXM-80GB × 2 3g.40gb slices)"],
        [],
    ),
    "custom MIG layout: warned, not checked": (
        lab([gpu_team("llm", 999)], gpu={"migConfig": "custom-1"}, gpu_operator={"migStrategy": "single"}),
        [],
        ['mlcluster:nodes[2].gpu.migConfig: "custom-1" is not a single-profile all-<profile> layout'],
    ),
    "custom MIG layout, mixed: its MIG resources are not checked either": (
        lab(
            [gpu_team("llm", 99, resource="nvidia.com/mig-2g.20gb")],
            gpu={"migConfig": "custom-1"},
            gpu_operator={"migStrategy": "mixed"},
        ),
        [],
        ['mlcluster:nodes[5].gpu.migConfig: "custom-1" is not a single-profile all-<profile> layout'],
    ),
    "GPUs in the cpu flavor": (
        lab([{"name": "llm", "quotas": [{"flavor": "cpu", "nominal": {"cpu": "8", "nvidia.com/gpu": 1}}]}]),
        ["mlcluster:kueue.teams[0].quotas[0].nominal.nvidia.com/gpu: (1): the cpu flavor has no GPUs"],
        ["32 of the 32 nvidia.com/gpu"],
    ),
    "existing cluster: declared inventory": (
        existing({"inventory": [{"model": "H100-80GB", "count": 16}], "teams": [gpu_team("llm", 8, "h100-80gb")]}),
        [],
        ["8 of the 16 nvidia.com/gpu of flavor h100-80gb (kueue.inventory[0]: 16 H100-80GB)"],
    ),
    "existing cluster: nothing declared": (
        existing({"teams": [gpu_team("llm", 8, "h100-80gb")]}),
        ['mlcluster:kueue.teams[0].quotas[1].flavor: "h100-80gb": is not in kueue.inventory (mode existing'],
        [],
    ),
    "inventory in mode kubeadm": (
        lab([gpu_team("llm", 32)], kueue={"inventory": [{"model": "H100", "count": 8}]}),
        ["mlcluster:kueue.inventory: is for mode existing"],
        [],
    ),
}


@pytest.mark.parametrize("case", INVENTORY_CASES, ids=list(INVENTORY_CASES))
def test_inventory(case: str) -> None:
    values, expected_errors, expected_warnings = INVENTORY_CASES[case]
    errors, warnings = findings(values)
    for fragment in expected_errors:
        assert any(fragment in e for e in errors), f"{fragment!r} not in {errors}"
    for fragment in expected_warnings:
        assert any(fragment in w for w in warnings), f"{fragment!r} not in {warnings}"
    assert bool(errors) == bool(expected_errors), errors
    assert bool(warnings) == bool(expected_warnings), warnings


@pytest.mark.parametrize(
    ("values", "capacity"),
    [
        (lab([]), {"nvidia.com/gpu": 32}),
        (lab([], gpu_operator={"timeSlicingReplicas": 4}), {"nvidia.com/gpu": 128}),
        (lab([], gpu={"timeSlicingReplicas": 2}, gpu_operator={"timeSlicingReplicas": 4}), {"nvidia.com/gpu": 64}),
        (lab([], gpu={"migConfig": "all-1g.10gb"}), {"nvidia.com/gpu": 32}),  # migStrategy none: whole GPUs
        (
            lab([], gpu={"migConfig": "all-1g.10gb"}, gpu_operator={"migStrategy": "mixed"}),
            {"nvidia.com/mig-1g.10gb": 224},
        ),
        (lab([], gpu_nodes=0), None),
        (lab([], gpu={"migConfig": "all-3g.71gb"}, gpu_operator={"migStrategy": "single"}), {"nvidia.com/gpu": 64}),
        (
            lab([], gpu={"migConfig": "all-1g.18gb"}, gpu_operator={"migStrategy": "mixed"}),
            {"nvidia.com/mig-1g.18gb": 224},
        ),
    ],
    ids=[
        "4x8",
        "4x8 time-sliced x4",
        "per-node x2 over cluster x4",
        "MIG, strategy none",
        "MIG mixed",
        "no GPUs",
        "H200 MIG single 3g.71gb (2 per GPU)",
        "H200 MIG mixed 1g.18gb (7 per GPU)",
    ],
)
def test_capacity(values: dict[str, Any], capacity: dict[str, int] | None) -> None:
    flavors = gpu_flavors(parse(values))
    if capacity is None:
        assert flavors == {}
    else:
        assert dict(flavors[FLAVOR].capacity) == capacity


# --- config rules, one case each ---------------------------------------------------------------------------------

RULES = [
    (
        lab(
            [
                {
                    **gpu_team("llm", 16),
                    "quotas": [
                        {"flavor": FLAVOR, "nominal": {"nvidia.com/gpu": 8}, "borrowingLimit": {"nvidia.com/gpu": 4}}
                    ],
                }
            ]
        ),
        "mlcluster:kueue.teams[0].quotas[0].borrowingLimit: needs kueue.cohort",
    ),
    (
        lab(
            [
                {
                    "name": "llm",
                    "quotas": [
                        {"flavor": FLAVOR, "nominal": {"nvidia.com/gpu": 8}, "lendingLimit": {"nvidia.com/gpu": 9}}
                    ],
                }
            ],
            kueue={"cohort": "ml"},
        ),
        "mlcluster:kueue.teams[0].quotas[0].lendingLimit.nvidia.com/gpu: (9) is more than the nominal quota (8)",
    ),
    (
        lab(
            [
                {
                    "name": "llm",
                    "quotas": [
                        {"flavor": FLAVOR, "nominal": {"nvidia.com/gpu": 8}, "borrowingLimit": {"memory": "1Gi"}}
                    ],
                }
            ],
            kueue={"cohort": "ml"},
        ),
        "mlcluster:kueue.teams[0].quotas[0].borrowingLimit.memory: has no nominal quota to limit",
    ),
    (lab([gpu_team("llm", 16), gpu_team("llm", 16)]), 'mlcluster:kueue.teams[1].name: "llm" is already used'),
    (
        lab([gpu_team("llm", 16), {**gpu_team("vision", 16), "namespace": "llm"}]),
        'mlcluster:kueue.teams[1].namespace: "llm" is already used by teams[0]',
    ),
    (
        lab([{"name": "llm", "quotas": [{"flavor": FLAVOR, "nominal": {"nvidia.com/gpu": "0.5"}}]}]),
        'mlcluster:kueue.teams[0].quotas[0].nominal.nvidia.com/gpu: "0.5": devices are counted in whole units',
    ),
    (
        lab([{"name": "llm", "quotas": [{"flavor": FLAVOR, "nominal": {"memory": "lots"}}]}]),
        'mlcluster:kueue.teams[0].quotas[0].nominal.memory: "lots" is not a quantity',
    ),
    (
        lab(
            [
                {
                    "name": "llm",
                    "quotas": [{"flavor": "cpu", "nominal": {"cpu": "1"}}, {"flavor": "cpu", "nominal": {"cpu": "1"}}],
                }
            ]
        ),
        'mlcluster:kueue.teams[0].quotas[1].flavor: "cpu" is already given in quotas[0]',
    ),
    (
        lab(
            [
                {
                    **gpu_team("llm", 32),
                    "preemption": {"reclaimWithinCohort": "Never", "borrowWithinCohort": "LowerPriority"},
                }
            ]
        ),
        'mlcluster:kueue.teams[0].preemption.borrowWithinCohort: "LowerPriority" needs reclaimWithinCohort',
    ),
    (
        lab([{**gpu_team("llm", 32), "namespace": "kube-system"}]),
        'mlcluster:kueue.teams[0].namespace: "kube-system" is a namespace the team cannot own',
    ),
    (lab([gpu_team("default", 32)]), 'mlcluster:kueue.teams[0].name: "default" is a namespace the team cannot own'),
    (
        lab([{**gpu_team("llm", 32), "namespace": "Team_A"}]),
        'mlcluster:kueue.teams[0].namespace: "Team_A" is not a valid name',
    ),
    (lab([{"name": "llm", "quotas": []}]), "mlcluster:kueue.teams[0].quotas: must give at least one"),
    (lab([gpu_team("llm", 32)], kueue={"cohort": "Not A Name"}), 'mlcluster:kueue.cohort: "Not A Name" is not'),
    (lab([gpu_team("llm", 32)], kueue={"priorityClasses": {"Prod": 10}}), "has an invalid name 'Prod'"),
    (lab([gpu_team("llm", 32)], kueue={"teamz": []}), 'mlcluster:kueue.teamz: unknown key (did you mean "teams"?)'),
]


@pytest.mark.parametrize(("values", "expected"), RULES, ids=[expected for _, expected in RULES])
def test_config_rules(values: dict[str, Any], expected: str) -> None:
    errors, _ = findings(values)
    assert any(expected in e for e in errors), f"{expected!r} not in {errors}"


# --- every object against the upstream CRDs ----------------------------------------------------------------------

OBJECT_STACKS = {
    "onprem example": None,
    "no cohort, MIG mixed": lab(
        [gpu_team("llm", 224, resource="nvidia.com/mig-1g.10gb")],
        gpu={"migConfig": "all-1g.10gb"},
        gpu_operator={"migStrategy": "mixed"},
    ),
    "existing cluster with declared GPUs": existing(
        {
            "inventory": [{"model": "L4", "count": 8, "nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-l4"}}],
            "teams": [gpu_team("serving", 8, "l4")],
        }
    ),
}


def stack_spec(name: str) -> Spec:
    values = OBJECT_STACKS[name]
    if values is None:
        onprem, secret = stack_values("onprem")
        return parse(onprem, secret)
    return parse(values)


def cel_errors(document: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """The pinned CRD's x-kubernetes-validations (CEL) on a create, or on an update of `old` (tests/cel_rules.py)."""
    group = str(document.get("apiVersion", KUEUE_API)).rpartition("/")[0]
    crd = kueue_crds().get((group, document["kind"]))
    return crd_rule_errors(crd, {"apiVersion": KUEUE_API, **document}, old) if crd else []


@pytest.mark.parametrize("stack", OBJECT_STACKS)
def test_objects_validate_against_upstream(stack: str) -> None:
    spec = stack_spec(stack)
    objects = kueue_objects(spec)
    kinds = {o["kind"] for o in objects}
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "Namespace"} <= kinds
    for document in objects:
        if document["apiVersion"] == KUEUE_API:
            assert kueue_crd_errors(document) == [], document["metadata"]
            assert cel_errors(document) == [], document["metadata"]
        else:
            assert kubernetes_errors(document, spec.kubernetes_version) == [], document


def test_crd_check_can_fail() -> None:
    queue = cluster_queue(stack_spec("onprem example").kueue, stack_spec("onprem example").kueue.teams[0])
    broken = copy.deepcopy(queue)
    broken["spec"]["cohort"] = broken["spec"].pop("cohortName")  # the v1beta1 spelling
    broken["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    assert any("cohort" in e for e in crd_errors(broken, CRDS["ClusterQueue"]))
    assert any(
        "flavors must have the same number of resources as the coveredResources" in e for e in cel_errors(broken)
    )
    v1beta1 = {**queue, "apiVersion": "kueue.x-k8s.io/v1beta1"}
    assert any("cohortName" in e for e in crd_errors(v1beta1, CRDS["ClusterQueue"]))


def test_gpu_flavor_matches_the_nodes() -> None:
    spec = stack_spec("onprem example")
    flavors = {
        o["metadata"]["labels"][FLAVOR_LABEL]: o["spec"] for o in kueue_objects(spec) if o["kind"] == "ResourceFlavor"
    }
    assert flavors["cpu"] == {}
    gpu = flavors[FLAVOR]
    assert gpu["nodeLabels"] == {"mlcluster.io/gpu-model": H100}
    assert gpu["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    # The same labels and taints kubeadm registers the GPU nodes with.
    from components.render.kubeadm import node_registration

    registration = node_registration(spec.kueue, spec.nodes, next(n for n in spec.nodes if n.gpu))
    assert f"mlcluster.io/gpu-model={H100}" in registration["kubeletExtraArgs"][0]["value"]
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in registration["taints"]


def test_existing_cluster_flavor_uses_declared_labels() -> None:
    spec = stack_spec("existing cluster with declared GPUs")
    flavor = next(o for o in kueue_objects(spec) if o["metadata"]["name"] == "l4")
    assert flavor["spec"]["nodeLabels"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}


# --- the release ---------------------------------------------------------------------------------------------------


def test_chart_values_keys_exist_upstream() -> None:
    release = kueue_release(stack_spec("onprem example"))
    upstream = chart_values("kueue", release.version)
    assert unknown_value_keys(dict(release.values), upstream) == []
    assert unknown_value_keys({"managerConfig": {"controllerManagerYml": ""}}, upstream) == [
        "managerConfig.controllerManagerYml"
    ]


@pytest.mark.parametrize(("legacy", "pytorchjob"), [(False, False), (True, True)])
def test_manager_configuration_integrations(legacy: bool, pytorchjob: bool) -> None:
    values = lab([gpu_team("llm", 32)])
    values["kubeflow"] = {"legacyTrainingOperator": legacy}
    spec = parse(values)
    configuration = yaml.safe_load(kueue_release(spec).values["managerConfig"]["controllerManagerConfigYaml"])
    assert configuration == manager_configuration(spec.kueue, spec.kubeflow)
    frameworks = configuration["integrations"]["frameworks"]
    assert {"batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"} <= set(frameworks)
    assert (LEGACY_PYTORCHJOB in frameworks) is pytorchjob
    # Every framework is one the pinned chart knows (enabled or commented out in its default configuration).
    default = chart_values("kueue", spec.kueue.version)["managerConfig"]["controllerManagerConfigYaml"]
    known_frameworks = set(re.findall(r'^\s*#?\s*-\s*"([^"]+)"', default, re.MULTILINE))
    assert set(integrations(spec.kubeflow)) <= known_frameworks
    # The chart's own defaults we must repeat when replacing its configuration.
    upstream = yaml.safe_load(default)
    for key in ("apiVersion", "kind", "health", "metrics", "webhook", "leaderElection"):
        assert configuration[key] == upstream[key]


def test_fair_sharing_turns_on_the_configuration_section() -> None:
    off = manager_configuration(parse(lab([gpu_team("llm", 32)])).kueue, parse(lab([gpu_team("llm", 32)])).kubeflow)
    on = manager_configuration(
        parse(lab([gpu_team("llm", 32)], kueue={"fairSharing": True})).kueue,
        parse(lab([gpu_team("llm", 32)], kueue={"fairSharing": True})).kubeflow,
    )
    assert "fairSharing" not in off and on["fairSharing"]["preemptionStrategies"]


# --- the program and the plan --------------------------------------------------------------------------------------


def test_program_creates_the_objects_after_the_release(run_stack) -> None:
    run = run_stack("onprem")
    release = next(r for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.name == "kueue")
    counts = {}
    for kind in ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"):
        resources = run.of_type(f"kubernetes:{KUEUE_API}:{kind}")
        counts[kind] = len(resources)
        for resource in resources:
            assert release.urn in resource.depends_on, resource.name
            assert kueue_crd_errors(resource.raw_inputs) == []
    assert counts == {
        "Topology": 1,
        "ResourceFlavor": 2,
        "ClusterQueue": 3,
        "LocalQueue": 3,
        "WorkloadPriorityClass": 3,
    }
    namespaces = {r.name: r for r in run.of_type("kubernetes:core/v1:Namespace")}
    for queue in run.of_type(f"kubernetes:{KUEUE_API}:LocalQueue"):
        namespace = known(queue.inputs["metadata"]["namespace"])
        assert namespaces[namespace].urn in queue.depends_on
    priorities = {
        r.name: known(r.inputs["value"]) for r in run.of_type(f"kubernetes:{KUEUE_API}:WorkloadPriorityClass")
    }
    assert priorities["production"] > priorities["research"] > priorities["best-effort"]


def test_plan_writes_readable_manifests(run_stack, tmp_path) -> None:
    run = run_stack("onprem")
    spec = stack_spec("onprem example")
    write_plan(run.run, tmp_path, project="mlcluster", stack="onprem", spec=spec)
    for document in kueue_objects(spec):
        metadata = document["metadata"]
        # Files are named after the Pulumi resource, which keeps its name when the object's follows its immutable
        # fields (the Topology, a flavor with a topology).
        stable = TOPOLOGY_NAME if document["kind"] == "Topology" else (metadata.get("labels") or {}).get(FLAVOR_LABEL)
        name = "-".join(filter(None, [metadata.get("namespace"), stable or metadata["name"]]))
        written = yaml.safe_load((tmp_path / "manifests" / f"{document['kind']}-{name}.yaml").read_text())
        assert written == document
    values = (tmp_path / "releases" / "kueue.values.yaml").read_text()
    assert "controllerManagerConfigYaml: |" in values and "- trainer.kubeflow.org/trainjob" in values


def test_kueue_disabled_creates_nothing(run_stack) -> None:
    values, secret = stack_values("onprem")
    values = {**values, "kueue": {**values["kueue"], "enabled": False}}
    run = run_stack(values=values, secret=secret)
    assert not [r for r in run.resources if r.type.startswith(f"kubernetes:{KUEUE_API}")]


# --- the guide ------------------------------------------------------------------------------------------------------


def guide_blocks() -> list[Any]:
    text = (PROJECT / "docs" / "kueue.md").read_text()
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)]


def test_guide_job_submits_to_an_example_queue() -> None:
    job = next(b for b in guide_blocks() if b.get("kind") == "Job")
    spec = stack_spec("onprem example")
    assert kubernetes_errors(job, spec.kubernetes_version) == []
    team = next(t for t in spec.kueue.teams if t.name == job["metadata"]["labels"][QUEUE_NAME_LABEL])
    assert job["metadata"]["namespace"] == team.queue_namespace
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] in spec.kueue.priority_classes
    pod = job["spec"]["template"]["spec"]
    assert job["spec"]["backoffLimit"] == 2 and pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["image"] == "ultralytics/ultralytics:latest"
    assert container["command"] == [
        "yolo",
        "predict",
        "model=yolo26n.pt",
        "source=https://ultralytics.com/images/bus.jpg",
    ]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}
    flavor = next(o for o in kueue_objects(spec) if o["metadata"].get("labels", {}).get(FLAVOR_LABEL) == FLAVOR)
    assert pod["tolerations"] == flavor["spec"]["tolerations"]


def test_guide_config_examples_parse() -> None:
    # The Topology section's example (nodes and kueue together) is checked in test_topology.py.
    blocks = [b for b in guide_blocks() if "mlcluster:kueue" in b and "mlcluster:nodes" not in b]
    assert len(blocks) == 2
    onprem, secret = stack_values("onprem")
    kubeadm_example = {**onprem, "kueue": blocks[0]["mlcluster:kueue"]}
    errors, _ = findings(kubeadm_example, secret)
    assert errors == []
    errors, _ = findings(existing(blocks[1]["mlcluster:kueue"]))
    assert errors == []


def test_preview_shows_the_inventory_warnings(run_stack, caplog) -> None:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["kueue"]["teams"][0]["quotas"][1]["nominal"]["nvidia.com/gpu"] = 8
    with caplog.at_level("WARNING"):
        run_stack(values=values, secret=secret)
    assert any(
        # 8 not in quotas, 2 of them held by the example's inference (chat-tgi, chat) outside Kueue.
        "mlcluster:kueue.teams: 6 of the 32 nvidia.com/gpu of flavor h100-sxm-80gb" in record.getMessage()
        and "besides 2 held by pods outside Kueue" in record.getMessage()
        for record in caplog.records
    ), [r.getMessage() for r in caplog.records]
