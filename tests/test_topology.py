"""Rack/block topology for Kueue's Topology-Aware Scheduling: node labels, the Topology, the GPU flavors'
topologyName and the training workloads' topology requests, all validated against the pinned CRDs; every refusal
with its key path."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest

from components.config import checks
from components.config.derived import topology_labels
from components.config.spec import Spec
from components.render.kueue import FLAVOR_LABEL, TOPOLOGY_NAME, kueue_objects, training_topology_annotations
from components.render.workloads import pytorch_job, train_job, training_job, workload_manifests

from .conftest import stack_values
from .test_kueue import FLAVOR, cel_errors, existing, findings, gpu_team, guide_blocks, kueue_crd_errors, parse
from .test_training import CRDS as TRAINING_CRDS
from .upstream import crd_errors, kubernetes_errors

RACK = "topology.mlcluster.io/rack"
BLOCK = "topology.mlcluster.io/block"
HOSTNAME = "kubernetes.io/hostname"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"

Change = Callable[[dict[str, Any]], None]


def onprem_values(change: Change | None = None) -> tuple[dict[str, Any], list[str]]:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    if change:
        change(values)
    return values, secret


def onprem(change: Change | None = None) -> Spec:
    values, secret = onprem_values(change)
    return parse(values, secret)


def legacy_operator_too(values: dict[str, Any]) -> None:
    values["kubeflow"]["legacyTrainingOperator"] = True


def node(values: dict[str, Any], name: str) -> dict[str, Any]:
    return next(n for n in values["nodes"] if n["name"] == name)


def topology(**settings: Any) -> Change:
    def change(values: dict[str, Any]) -> None:
        values["kueue"]["topology"] = {**values["kueue"]["topology"], **settings}

    return change


def no_topology(values: dict[str, Any]) -> None:
    values["kueue"].pop("topology")
    for entry in values["nodes"]:
        entry.pop("topology", None)


def pod_templates(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    kind = manifest["kind"]
    if kind == "Job":
        return [manifest["spec"]["template"]]
    if kind == "PyTorchJob":
        return [replica["template"] for replica in manifest["spec"]["pytorchReplicaSpecs"].values()]
    patch = manifest["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    return [job["template"]["spec"]["template"] for job in patch["replicatedJobs"]]


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """By the name the stack uses: a flavor's quota name (its object may carry a digest, render.kueue.named_after)."""
    return {
        (o["metadata"].get("labels") or {}).get(FLAVOR_LABEL, o["metadata"]["name"]): o
        for o in objects
        if o["kind"] == kind
    }


# --- the two-rack example, as rendered ----------------------------------------------------------------------------


def test_two_rack_stack_renders_a_topology_and_topology_flavor_valid_upstream() -> None:
    spec = onprem()
    objects = kueue_objects(spec)
    assert objects[0]["kind"] == "Topology", "created before the flavors that name it"
    (datacenter,) = by_kind(objects, "Topology").values()
    assert datacenter == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": datacenter["metadata"]["name"]},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]},
    }
    assert re.fullmatch(f"{TOPOLOGY_NAME}-[0-9a-f]{{6}}", datacenter["metadata"]["name"])
    flavors = by_kind(objects, "ResourceFlavor")
    assert flavors[FLAVOR]["spec"]["topologyName"] == datacenter["metadata"]["name"]
    assert re.fullmatch(f"{FLAVOR}-[0-9a-f]{{6}}", flavors[FLAVOR]["metadata"]["name"])
    queue = next(o for o in objects if o["kind"] == "ClusterQueue")
    listed = [f["name"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]]
    assert flavors[FLAVOR]["metadata"]["name"] in listed, "the queues name the flavor object"
    assert "topologyName" not in flavors["cpu"]["spec"], "CPU work is not placed by topology"
    for document in (datacenter, *flavors.values()):
        assert kueue_crd_errors(document) == [], document["metadata"]
        assert cel_errors(document) == [], document["metadata"]


def test_gpu_nodes_get_their_rack_and_block_as_labels_the_kubelet_may_set() -> None:
    spec = onprem()
    labels = {n.name: topology_labels(spec.kueue.topology, n) for n in spec.nodes}
    assert labels["gpu-1"] == labels["gpu-2"] == {BLOCK: "b1", RACK: "r07"}
    assert labels["gpu-3"] == labels["gpu-4"] == {BLOCK: "b1", RACK: "r08"}
    assert labels["cpu-1"] == labels["cp-1"] == {}
    for key, value in {k: v for node_labels in labels.values() for k, v in node_labels.items()}.items():
        assert checks.kubelet_may_set_label(key) and checks.labels({key: value}) is None


def test_training_workloads_ask_for_one_rack_and_validate_upstream() -> None:
    spec = onprem(legacy_operator_too)
    training = {m["kind"]: m for m in workload_manifests(spec) if m["metadata"]["name"] == "pytorch-train"}
    assert set(training) == {"Job", "TrainJob", "PyTorchJob"}
    for kind, manifest in training.items():
        for template in pod_templates(manifest):
            assert template["metadata"]["annotations"] == {PREFERRED: RACK}, kind
        errors = kubernetes_errors(manifest, spec.kubernetes_version) if kind == "Job" else None
        assert (errors if errors is not None else crd_errors(manifest, TRAINING_CRDS[kind])) == [], kind
    yolo = next(m for m in workload_manifests(spec) if m["metadata"]["name"] == "yolo26-predict")
    assert "metadata" not in yolo["spec"]["template"], "inference is one pod: no topology asked"


def test_trainjob_annotation_sits_where_the_trainer_crd_allows_it() -> None:
    manifest = train_job(onprem())
    (template,) = pod_templates(manifest)
    misplaced = copy.deepcopy(manifest)
    misplaced["spec"]["annotations"] = template["metadata"]["annotations"]
    assert crd_errors(misplaced, TRAINING_CRDS["TrainJob"]), "the CRD check can fail"
    assert crd_errors(manifest, TRAINING_CRDS["TrainJob"]) == []


@pytest.mark.parametrize(
    ("change", "annotations"),
    [
        (topology(trainingPlacement="required"), {REQUIRED: RACK}),
        (topology(trainingLevel="block"), {PREFERRED: BLOCK}),
        (topology(trainingLevel="hostname"), {PREFERRED: HOSTNAME}),
        (no_topology, {}),
    ],
    ids=["required", "block", "one node", "no topology"],
)
def test_training_placement_follows_the_config(change: Change, annotations: dict[str, str]) -> None:
    spec = onprem(change)
    assert training_topology_annotations(spec.kueue) == annotations
    for render in (training_job, train_job, pytorch_job):
        for template in pod_templates(render(spec)):
            assert template.get("metadata", {}).get("annotations", {}) == annotations


def test_without_kueue_topology_a_nodes_topology_is_labels_under_the_default_keys() -> None:
    """The two-stack split: the nodes' stack labels them; the platform stack's kueue.topology reads the labels."""

    def nodes_stack(values: dict[str, Any]) -> None:
        values["kueue"].pop("topology")

    spec = onprem(nodes_stack)
    assert topology_labels(spec.kueue.topology, next(n for n in spec.nodes if n.name == "gpu-3")) == {
        BLOCK: "b1",
        RACK: "r08",
    }
    assert not by_kind(kueue_objects(spec), "Topology")
    platform = parse(existing({"topology": {"levels": ["block", "rack"]}}))
    assert platform.kueue.topology is not None
    assert list(platform.kueue.topology.domain_levels().values()) == [BLOCK, RACK]


def test_no_topology_renders_no_topology_objects() -> None:
    spec = onprem(no_topology)
    objects = kueue_objects(spec)
    assert not by_kind(objects, "Topology")
    assert all("topologyName" not in f["spec"] for f in by_kind(objects, "ResourceFlavor").values())
    assert all(topology_labels(spec.kueue.topology, n) == {} for n in spec.nodes)


def test_kueue_off_asks_no_topology_of_the_workloads() -> None:
    def kueue_off(values: dict[str, Any]) -> None:
        values["kueue"]["enabled"] = False
        values["workloads"]["createNamespace"] = True

    assert training_topology_annotations(onprem(kueue_off).kueue) == {}


def test_custom_labels_and_a_hostname_level_given_last() -> None:
    def custom(values: dict[str, Any]) -> None:
        values["kueue"]["topology"] = {
            "levels": ["zone", "block", "rack", "hostname"],
            "nodeLabels": {"zone": "topology.kubernetes.io/zone", "rack": "example.com/rack"},
        }
        for entry in values["nodes"]:
            if "topology" in entry:
                entry["topology"] = {"zone": "dc1", **entry["topology"]}

    spec = onprem(custom)
    (datacenter,) = by_kind(kueue_objects(spec), "Topology").values()
    labels = [level["nodeLabel"] for level in datacenter["spec"]["levels"]]
    assert labels == ["topology.kubernetes.io/zone", BLOCK, "example.com/rack", HOSTNAME]
    assert kueue_crd_errors(datacenter) == [] and cel_errors(datacenter) == []
    gpu = next(n for n in spec.nodes if n.name == "gpu-3")
    assert topology_labels(spec.kueue.topology, gpu) == {
        "topology.kubernetes.io/zone": "dc1",
        BLOCK: "b1",
        "example.com/rack": "r08",
    }
    assert training_topology_annotations(spec.kueue) == {PREFERRED: "example.com/rack"}


def test_existing_cluster_maps_the_levels_to_the_providers_labels() -> None:
    values = existing(
        {
            "inventory": [{"model": "H100-80GB", "count": 16}],
            "teams": [gpu_team("llm", 16, "h100-80gb")],
            "topology": {
                "levels": ["block", "subblock"],
                "nodeLabels": {
                    "block": "cloud.google.com/gce-topology-block",
                    "subblock": "cloud.google.com/gce-topology-subblock",
                },
                "trainingLevel": "subblock",
            },
        }
    )
    assert findings(values)[0] == []
    objects = kueue_objects(parse(values))
    (datacenter,) = by_kind(objects, "Topology").values()
    assert [level["nodeLabel"] for level in datacenter["spec"]["levels"]] == [
        "cloud.google.com/gce-topology-block",
        "cloud.google.com/gce-topology-subblock",
        HOSTNAME,
    ]
    assert by_kind(objects, "ResourceFlavor")["h100-80gb"]["spec"]["topologyName"] == datacenter["metadata"]["name"]


def test_the_hand_run_crd_rules_can_fail() -> None:
    (datacenter,) = by_kind(kueue_objects(onprem()), "Topology").values()
    broken = copy.deepcopy(datacenter)
    broken["spec"]["levels"] = [{"nodeLabel": HOSTNAME}, {"nodeLabel": RACK}, {"nodeLabel": RACK}]
    assert cel_errors(broken) == [
        "spec.levels: Invalid value: must be unique",
        "spec.levels: Invalid value: the kubernetes.io/hostname label can only be used at the lowest level of topology",
    ]
    assert kueue_crd_errors({**datacenter, "spec": {"levels": []}})
    # Absent nodeLabels: the rule errs on the missing field, which refuses the object as a false rule would.
    (absent,) = cel_errors({"kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {"topologyName": "t"}})
    assert absent.startswith("spec: Invalid value: ") and "nodeLabels" in absent
    empty = {"kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {"topologyName": "t", "nodeLabels": {}}}
    assert cel_errors(empty) == ["spec: Invalid value: at least one nodeLabel is required when topology is set"]


# --- refusals: (change to the on-prem example, key path, message fragment); all in one pass -----------------------


def set_node(name: str, **settings: Any) -> Change:
    def change(values: dict[str, Any]) -> None:
        node(values, name).update(settings)

    return change


def drop_node_topology(name: str) -> Change:
    def change(values: dict[str, Any]) -> None:
        node(values, name).pop("topology")

    return change


REFUSALS: list[tuple[str, Change, str, str]] = [
    (
        "GPU node misses a level",
        set_node("gpu-2", topology={"block": "b1"}),
        "nodes[6].topology",
        "misses level(s) rack",
    ),
    (
        "GPU node has no topology",
        drop_node_topology("gpu-4"),
        "nodes[8].topology",
        "misses level(s) block, rack",
    ),
    (
        "node names an undeclared level",
        set_node("gpu-1", topology={"block": "b1", "rack": "r07", "row": "x"}),
        "nodes[5].topology.row",
        "is not a level of kueue.topology.levels (block, rack)",
    ),
    (
        "node names its hostname",
        set_node("gpu-1", topology={"block": "b1", "rack": "r07", "hostname": "gpu-1"}),
        "nodes[5].topology.hostname",
        "the kubelet sets kubernetes.io/hostname",
    ),
    (
        "domain is no label value",
        set_node("gpu-1", topology={"block": "b1", "rack": "rack 7"}),
        "nodes[5].topology.rack",
        "invalid value 'rack 7'",
    ),
    (
        "domain is empty",
        set_node("gpu-1", topology={"block": "b1", "rack": ""}),
        "nodes[5].topology.rack",
        "is empty",
    ),
    (
        "node label set twice",
        set_node("gpu-1", labels={RACK: "r07"}),
        f"nodes[5].labels.{RACK}",
        "is the node label of topology level rack",
    ),
    (
        "labels only, hostname",
        lambda values: (values["kueue"].pop("topology"), set_node("gpu-1", topology={"hostname": "x"})(values)),
        "nodes[5].topology.hostname",
        "the kubelet sets kubernetes.io/hostname",
    ),
    (
        "labels only, level name invalid",
        lambda values: (values["kueue"].pop("topology"), set_node("gpu-1", topology={"Rack_7": "x"})(values)),
        "nodes[5].topology.Rack_7",
        "is not a level name such as rack",
    ),
    ("no levels", topology(levels=[]), "kueue.topology.levels", "must name at least one level"),
    (
        "a level twice",
        topology(levels=["block", "rack", "block"]),
        "kueue.topology.levels[2]",
        '"block" is already levels[0]',
    ),
    (
        "two levels on one label",
        topology(nodeLabels={"rack": BLOCK}),
        "kueue.topology.nodeLabels.rack",
        f"'{BLOCK}' is already the node label of level 'block'",
    ),
    (
        "hostname not last",
        topology(levels=["hostname", "block", "rack"]),
        "kueue.topology.levels[0]",
        "which Kueue takes only as the last level",
    ),
    (
        "the hostname label on another level, not last",
        topology(nodeLabels={"block": HOSTNAME}),
        "kueue.topology.nodeLabels.block",
        "which Kueue takes only as the last level",
    ),
    (
        "hostname mapped elsewhere",
        topology(levels=["block", "rack", "hostname"], nodeLabels={"hostname": "example.com/host"}),
        "kueue.topology.nodeLabels.hostname",
        "is the node itself: always kubernetes.io/hostname",
    ),
    (
        "label of an undeclared level",
        topology(nodeLabels={"row": "example.com/row"}),
        "kueue.topology.nodeLabels.row",
        "is not a level in levels (block, rack)",
    ),
    (
        "label key invalid",
        topology(nodeLabels={"rack": "example.com/-rack"}),
        "kueue.topology.nodeLabels.rack",
        "is not a valid label key",
    ),
    (
        "label the kubelet may not set",
        topology(nodeLabels={"rack": "node-role.kubernetes.io/rack"}),
        "kueue.topology.nodeLabels.rack",
        "which the kubelet may not set on its own node",
    ),
    (
        "level name invalid",
        topology(levels=["block", "Rack_7"]),
        "kueue.topology.levels",
        "is not a valid name",
    ),
    (
        "training level undeclared",
        topology(trainingLevel="row"),
        "kueue.topology.trainingLevel",
        '"row" is not a level',
    ),
    (
        "placement unknown",
        topology(trainingPlacement="strict"),
        "kueue.topology.trainingPlacement",
        "must be one of",
    ),
    (
        "trainer older than TrainJob TAS",
        lambda values: values["kubeflow"].update(version="2.0.1"),
        "kubeflow.version",
        "needs Kubeflow Trainer >= 2.1",
    ),
    (
        "kueue older than TAS beta",
        lambda values: values["kueue"].update(version="0.13.4"),
        "kueue.topology",
        "needs Kueue >= 0.14",
    ),
]


@pytest.mark.parametrize(("change", "path", "fragment"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refusal(change: Change, path: str, fragment: str) -> None:
    errors, _ = findings(*onprem_values(change))
    prefix = f"mlcluster:{path}: "
    assert any(e.startswith(prefix) and fragment in e for e in errors), f"{prefix}…{fragment!r} not in {errors}"


ONE_PASS = [
    "GPU node misses a level",
    "node names an undeclared level",
    "node label set twice",
    "training level undeclared",
    "a level twice",
    "kueue older than TAS beta",
]


def test_the_refusals_come_in_one_pass() -> None:
    cases = {name: (change, path, fragment) for name, change, path, fragment in REFUSALS}

    def every_change(values: dict[str, Any]) -> None:
        for name in ONE_PASS:
            cases[name][0](values)

    errors, _ = findings(*onprem_values(every_change))
    for name in ONE_PASS:
        _, path, fragment = cases[name]
        assert any(e.startswith(f"mlcluster:{path}: ") and fragment in e for e in errors), (name, errors)


def test_cpu_nodes_need_no_topology() -> None:
    values, secret = onprem_values()
    assert all("topology" not in n for n in values["nodes"] if "gpu" not in n)
    assert findings(values, secret)[0] == []


# --- the guide -------------------------------------------------------------------------------------------------------


def test_guide_topology_example_parses_and_matches_the_onprem_stack() -> None:
    (block,) = [b for b in guide_blocks() if "mlcluster:nodes" in b]
    values, secret = onprem_values()
    values["kueue"]["topology"] = block["mlcluster:kueue"]["topology"]
    for example in block["mlcluster:nodes"]:
        assert node(values, example["name"])["topology"] == example["topology"]
    assert findings(values, secret)[0] == []
    annotation = next(b for b in guide_blocks() if "spec" in b and "template" in b["spec"] and "kind" not in b)
    assert set(annotation["spec"]["template"]["metadata"]["annotations"]) == {REQUIRED}


def test_topology_labels_are_reconciled_through_the_api_after_the_join(run_stack) -> None:
    """The kubelet applies its --node-labels only when the Node registers: a rack that changes later reaches the
    Node through a forced server-side patch, after the node's join, on the cluster's provider."""
    from .conftest import stack_values

    run = run_stack("onprem")
    patches = {r.name: r for r in run.resources if r.name.endswith("-topology-labels")}
    assert sorted(patches) == ["gpu-1-topology-labels", "gpu-2-topology-labels", "gpu-3-topology-labels",
                               "gpu-4-topology-labels"]  # fmt: skip
    gpu3 = patches["gpu-3-topology-labels"]
    assert gpu3.type == "kubernetes:core/v1:NodePatch"
    assert gpu3.inputs["metadata"] == {
        "name": "gpu-3",
        "labels": {"topology.mlcluster.io/block": "b1", "topology.mlcluster.io/rack": "r08"},
        "annotations": {"pulumi.com/patchForce": "true"},
    }
    assert run.urn_of("gpu-3-kubeadm-join") in gpu3.depends_on
    assert gpu3.options["provider"].startswith(run.named("kubernetes").urn)

    values, secret = stack_values("onprem")
    moved = copy.deepcopy(values)
    gpu3_index = next(i for i, n in enumerate(moved["nodes"]) if n["name"] == "gpu-3")
    moved["nodes"][gpu3_index]["topology"]["rack"] = "r09"
    moved["nodes"][gpu3_index - 1]["gone"] = True
    day2 = run_stack(values=moved, secret=secret)
    assert day2.named("gpu-3-topology-labels").inputs["metadata"]["labels"]["topology.mlcluster.io/rack"] == "r09"
    gone = moved["nodes"][gpu3_index - 1]["name"]
    assert not [r for r in day2.resources if r.name == f"{gone}-topology-labels"], "a gone node is patched"
