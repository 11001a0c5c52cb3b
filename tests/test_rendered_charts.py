"""Every Helm release of the example stacks and their variants, rendered by the real Helm engine and validated;
cross-layer contracts and scheduling asserted on the rendered objects, not on our values dicts."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import kubernetes_validate
import pytest
import yaml

from components.config.derived import GPU_TAINT
from components.config.nodes import GPU_MODEL_LABEL
from components.render.images import containerd_root
from components.render.kueue import integrations
from components.render.scheduling import (
    CONTROLLER_KINDS,
    OTHER_HOSTS_VARIANTS,
    Node,
    placement,
    pod_spec,
    stack_nodes,
    tolerates,
)

from .helm_render import FIXTURE_STANDS_IN, chart_path
from .rendered_stack import VARIANTS, RenderedStack, chart_directory, rendered_stack
from .upstream import UPSTREAM, ManifestLoader, custom_resource_errors, kubernetes_errors

# One worker renders the stacks once (rendered_stack caches them per process).
pytestmark = [pytest.mark.timeout(1800), pytest.mark.xdist_group("rendered-stacks")]

GPU_TAINT_PARSED = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


# --- every rendered object validates --------------------------------------------------------------------------


def _crd_index(documents: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (d["spec"]["group"], d["spec"]["names"]["kind"]): dict(d)
        for d in documents
        if d.get("kind") == "CustomResourceDefinition"
    }


@cache
def fixture_crds() -> dict[tuple[str, str], dict[str, Any]]:
    documents = [
        d
        for path in sorted((UPSTREAM / "crds").rglob("*.yaml"))
        for d in yaml.load_all(path.read_text(), Loader=ManifestLoader)
        if d
    ]
    return _crd_index(documents)


def stack_crds(stack: RenderedStack) -> dict[tuple[str, str], dict[str, Any]]:
    """CRDs of the stack's releases (templates and crds/ folders) over the shared CRD fixtures."""
    rendered = [o for r in stack.releases for o in (*r.chart.objects, *r.chart.crds)]
    return {**fixture_crds(), **_crd_index(rendered)}


def object_errors(document: dict[str, Any], crds: Mapping[tuple[str, str], dict[str, Any]], minor: str) -> list[str]:
    group = document["apiVersion"].rpartition("/")[0]
    crd = crds.get((group, document["kind"]))
    crd_text = json.dumps(crd, sort_keys=True) if crd is not None else ""
    return list(_object_errors(json.dumps(document, sort_keys=True), crd_text, minor))


@cache
def _object_errors(document_text: str, crd_text: str, minor: str) -> tuple[str, ...]:
    # Variants render most objects identically: each distinct object is validated once per test run.
    document = json.loads(document_text)
    if crd_text:
        crd = json.loads(crd_text)
        return tuple(custom_resource_errors(document, crd, f"CRD {crd['metadata']['name']}"))
    try:
        return tuple(kubernetes_errors(document, minor))
    except kubernetes_validate.SchemaNotFoundError:
        return (f"no schema for {document['apiVersion']} {document['kind']}: neither built in nor a CRD we have",)


def validation_report(stack: RenderedStack) -> tuple[int, list[str]]:
    crds = stack_crds(stack)
    checked, problems = 0, []
    for release in stack.releases:
        for document, source in zip(release.chart.objects, release.chart.sources, strict=True):
            name = f"{document['kind']}/{document.get('metadata', {}).get('name')}"
            problems += [
                f"{release.name}: {source}: {name}: {e}"
                for e in object_errors(document, crds, stack.spec.kubernetes_version)
            ]
            checked += 1
    return checked, problems


@pytest.mark.render
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_rendered_object_validates(variant: str, capsys: pytest.CaptureFixture[str]) -> None:
    stack = rendered_stack(variant)
    checked, problems = validation_report(stack)
    with capsys.disabled():
        names = sorted({r.name for r in stack.releases})
        print(
            f"\n{variant}: {len(names)} releases ({', '.join(names)}), {checked} objects validated,"
            f" {len(problems)} problems"
        )
    assert problems == []
    assert checked > 100, f"{variant}: only {checked} objects rendered"


@pytest.mark.render
def test_validation_rejects_an_unknown_field_and_a_bad_kind() -> None:
    stack = rendered_stack("onprem")
    crds = stack_crds(stack)
    minor = stack.spec.kubernetes_version
    deployment = copy.deepcopy(stack.release("cert-manager").chart.named("Deployment", "cert-manager"))
    deployment["spec"]["template"]["spec"]["tolerationz"] = []
    assert object_errors(deployment, crds, minor) != []
    installation = copy.deepcopy(stack.release("tigera-operator").chart.of_kind("Installation")[0])
    installation["spec"]["calicoNetwork"]["ipPoolz"] = []
    assert object_errors(installation, crds, minor) != []
    assert object_errors({"apiVersion": "example.com/v1", "kind": "Nothing"}, crds, minor) != []


# --- versions as published --------------------------------------------------------------------------------------


@pytest.mark.render
@pytest.mark.parametrize("variant", ["onprem", "knative", "dra"])
def test_every_chart_version_is_written_as_published(variant: str) -> None:
    stack = rendered_stack(variant)
    for resource in (r.resource for r in stack.releases):
        if (chart_directory(resource), resource.inputs["version"]) in FIXTURE_STANDS_IN:
            continue  # no source of the pinned release to compare with (tests/helm_render.py says why)
        path = chart_path(chart_directory(resource), str(resource.inputs["version"]))
        published = str(yaml.safe_load((path / "Chart.yaml").read_text())["version"])
        assert resource.inputs["version"] == published, f"{resource.name}: {resource.inputs['version']} != {published}"


# --- cross-layer contracts, on rendered objects ------------------------------------------------------------------


def gpu_operator_problems(stack: RenderedStack) -> list[str]:
    """The operator's DaemonSets (NFD worker and ClusterPolicy's operands) tolerate our GPU taint; the operands
    run where NFD finds NVIDIA PCI devices, which our GPU nodes are."""
    problems = []
    for release in (r for r in stack.releases if r.name == "gpu-operator"):
        for ds in release.chart.of_kind("DaemonSet"):
            if not tolerates((pod_spec(ds) or {}).get("tolerations") or [], GPU_TAINT_PARSED):
                problems.append(f"DaemonSet {ds['metadata']['name']} does not tolerate {GPU_TAINT}")
        [policy] = release.chart.of_kind("ClusterPolicy")
        if not tolerates(policy["spec"]["daemonsets"].get("tolerations") or [], GPU_TAINT_PARSED):
            problems.append(f"ClusterPolicy daemonsets do not tolerate {GPU_TAINT}")
    gpu_nodes = [n for n in stack_nodes(stack.spec) if GPU_MODEL_LABEL in n.labels]
    for node in gpu_nodes:
        if node.labels.get("feature.node.kubernetes.io/pci-10de.present") != "true":
            problems.append(f"{node.name}: not a node NFD labels as NVIDIA")
    return problems


def spegel_problems(stack: RenderedStack) -> list[str]:
    daemonsets = stack.release("spegel").chart.of_kind("DaemonSet")
    [container] = [c for ds in daemonsets for c in pod_spec(ds)["containers"] if c["name"] == "registry"]
    args = " ".join(container["args"])
    roots = {containerd_root(n) for n in stack.spec.nodes}
    return [
        f"spegel reads {args!r}, not {root}" for root in roots if f"{root}/io.containerd.content.v1.content" not in args
    ]


def calico_problems(stack: RenderedStack) -> list[str]:
    [installation] = stack.release("tigera-operator").chart.of_kind("Installation")
    cidrs = [p["cidr"] for p in installation["spec"]["calicoNetwork"]["ipPools"]]
    return [] if cidrs == [stack.spec.cluster.pod_cidr] else [f"Calico pools {cidrs} != {stack.spec.cluster.pod_cidr}"]


def kueue_problems(stack: RenderedStack) -> list[str]:
    config_map = stack.release("kueue").chart.named("ConfigMap", "kueue-manager-config")
    configuration = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    frameworks = configuration["integrations"]["frameworks"]
    wanted = integrations(stack.spec.kubeflow)
    return [] if frameworks == wanted else [f"Kueue integrations {frameworks} != {wanted}"]


def kserve_problems(stack: RenderedStack) -> list[str]:
    config_map = stack.release("kserve-resources").chart.named("ConfigMap", "inferenceservice-config")
    deploy = json.loads(config_map["data"]["deploy"])
    mode = stack.spec.kserve.deployment_mode
    return (
        []
        if deploy["defaultDeploymentMode"] == mode
        else [f"KServe deploys {deploy['defaultDeploymentMode']}, not {mode}"]
    )


def _depends_on(stack: RenderedStack, urn: str) -> set[str]:
    by_urn = {r.urn: r for r in stack.resources}
    seen: set[str] = set()
    todo = [urn]
    while todo:
        resource = by_urn.get(todo.pop())
        for dependency in getattr(resource, "depends_on", None) or []:
            if dependency not in seen:
                seen.add(dependency)
                todo.append(dependency)
    return seen


def cert_manager_problems(stack: RenderedStack) -> list[str]:
    """cert-manager's CRDs are rendered by its release, and every release using them waits for it."""
    cert_manager = stack.release("cert-manager")
    provided = {d["spec"]["group"] for d in cert_manager.chart.of_kind("CustomResourceDefinition")}
    problems = [] if "cert-manager.io" in provided else ["cert-manager renders no cert-manager.io CRDs"]
    for release in stack.releases:
        if release.name == "cert-manager":
            continue
        uses = any(o["apiVersion"].startswith("cert-manager.io/") for o in release.chart.objects)
        if uses and cert_manager.resource.urn not in _depends_on(stack, release.resource.urn):
            problems.append(f"{release.name} uses cert-manager.io objects but does not wait for cert-manager")
    return problems


CONTRACTS = {
    "gpu-operator": gpu_operator_problems,
    "spegel": spegel_problems,
    "calico": calico_problems,
    "kueue": kueue_problems,
    "kserve": kserve_problems,
    "cert-manager": cert_manager_problems,
}


@pytest.mark.render
@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize("variant", ["onprem", "knative", "dra"])
def test_cross_layer_contract_holds_on_rendered_objects(variant: str, contract: str) -> None:
    assert CONTRACTS[contract](rendered_stack(variant)) == []


def _broken(stack: RenderedStack, release: str, change: Any) -> RenderedStack:
    """The stack with one release's rendered objects changed (a deep copy: the cached render stays intact)."""
    releases = []
    for rendered in stack.releases:
        if rendered.name == release:
            objects = list(copy.deepcopy(rendered.chart.objects))
            change(objects)
            chart = dataclasses.replace(rendered.chart, objects=tuple(objects))
            releases.append(dataclasses.replace(rendered, chart=chart))
        else:
            releases.append(rendered)
    return dataclasses.replace(stack, releases=tuple(releases))


def _first(objects: Iterable[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name))


def _drop_gpu_toleration(objects: list[dict[str, Any]]) -> None:
    _first(objects, "ClusterPolicy")["spec"]["daemonsets"]["tolerations"] = []


def _other_content_path(objects: list[dict[str, Any]]) -> None:
    daemonsets = [o for o in objects if o["kind"] == "DaemonSet"]
    [container] = [c for ds in daemonsets for c in pod_spec(ds)["containers"] if c["name"] == "registry"]
    container["args"] = [a.replace("/var/lib/containerd", "/data/containerd") for a in container["args"]]


def _other_pool(objects: list[dict[str, Any]]) -> None:
    _first(objects, "Installation")["spec"]["calicoNetwork"]["ipPools"][0]["cidr"] = "192.168.0.0/16"


def _fewer_integrations(objects: list[dict[str, Any]]) -> None:
    config_map = _first(objects, "ConfigMap", "kueue-manager-config")
    configuration = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    configuration["integrations"]["frameworks"] = configuration["integrations"]["frameworks"][:-1]
    config_map["data"]["controller_manager_config.yaml"] = yaml.safe_dump(configuration)


def _other_mode(objects: list[dict[str, Any]]) -> None:
    config_map = _first(objects, "ConfigMap", "inferenceservice-config")
    config_map["data"]["deploy"] = config_map["data"]["deploy"].replace("Standard", "Knative")


def _no_crds(objects: list[dict[str, Any]]) -> None:
    objects[:] = [o for o in objects if o["kind"] != "CustomResourceDefinition"]


BREAKS = {
    "gpu-operator": ("gpu-operator", _drop_gpu_toleration),
    "spegel": ("spegel", _other_content_path),
    "calico": ("tigera-operator", _other_pool),
    "kueue": ("kueue", _fewer_integrations),
    "kserve": ("kserve-resources", _other_mode),
    "cert-manager": ("cert-manager", _no_crds),
}


@pytest.mark.render
@pytest.mark.parametrize("contract", CONTRACTS)
def test_each_contract_fails_when_broken_on_purpose(contract: str) -> None:
    release, change = BREAKS[contract]
    assert CONTRACTS[contract](_broken(rendered_stack("onprem"), release, change)) != []


# --- scheduling: every controller has a node ----------------------------------------------------------------------


def controllers_table(stack: RenderedStack) -> dict[str, list[str]]:
    """Every controller of the stack (charts and our own manifests) -> nodes it can run on."""
    objects = [o for r in stack.releases for o in r.chart.objects]
    manifests = [
        {"kind": kind, "metadata": r.raw_inputs.get("metadata") or {}, "spec": r.raw_inputs.get("spec") or {}}
        for r in stack.resources
        if r.type.startswith("kubernetes:") and (kind := r.type.split(":")[-1]) in CONTROLLER_KINDS
    ]
    return placement([*objects, *manifests], stack_nodes(stack.spec))


def without_a_node(table: dict[str, list[str]]) -> list[str]:
    """Controllers no node can run, less a host variant whose sibling runs (OTHER_HOSTS_VARIANTS)."""
    by_name = {key.rsplit("/", 1)[-1]: nodes for key, nodes in table.items()}

    def expected_empty(key: str) -> bool:
        sibling = OTHER_HOSTS_VARIANTS.get(key.rsplit("/", 1)[-1])
        return sibling is not None and bool(by_name.get(sibling))

    return [name for name, nodes in table.items() if not nodes and not expected_empty(name)]


@pytest.mark.render
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_controller_has_a_node(variant: str) -> None:
    table = controllers_table(rendered_stack(variant))
    assert len(table) > 10
    assert without_a_node(table) == []


@pytest.mark.render
def test_a_controller_without_its_toleration_has_no_node_on_an_all_gpu_cluster() -> None:
    stack = rendered_stack("all-gpu-workers")

    def untolerate(objects: list[dict[str, Any]]) -> None:
        pod_spec(_first(objects, "Deployment", "kueue-controller-manager"))["tolerations"] = []

    table = controllers_table(_broken(stack, "kueue", untolerate))
    assert table["Deployment/kueue-system/kueue-controller-manager"] == []


@pytest.mark.render
def test_scheduling_table_for_all_gpu_and_one_node(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the tables the issue asks to show (run with -s); each row names at least one node."""
    for variant in ("all-gpu-workers", "one-node-lab"):
        table = controllers_table(rendered_stack(variant))
        with capsys.disabled():
            print(f"\n{variant}:")
            for name, nodes in sorted(table.items()):
                print(f"  {name} -> {', '.join(nodes) or 'NOWHERE'}")
        assert without_a_node(table) == []


def test_placement_follows_taints_selectors_and_affinity() -> None:
    gpu = Node("gpu", {"kubernetes.io/os": "linux", GPU_MODEL_LABEL: "H100"}, (GPU_TAINT_PARSED,))
    cpu = Node("cpu", {"kubernetes.io/os": "linux"})

    def deployment(**spec: Any) -> dict[str, Any]:
        return {"kind": "Deployment", "metadata": {"name": "x"}, "spec": {"template": {"spec": spec}}}

    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": GPU_MODEL_LABEL, "operator": "Exists"}]}]
            }
        }
    }
    tolerate = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    cases = {
        "plain": (deployment(), ["cpu"]),
        "tolerating": (deployment(tolerations=tolerate), ["gpu", "cpu"]),
        "selecting GPUs": (deployment(tolerations=tolerate, affinity=affinity), ["gpu"]),
        "selecting without tolerating": (deployment(affinity=affinity), []),
        "nodeSelector": (deployment(nodeSelector={"kubernetes.io/os": "windows"}), []),
        "tolerate everything": (deployment(tolerations=[{"operator": "Exists"}]), ["gpu", "cpu"]),
        "wrong value": (deployment(tolerations=[{"key": "nvidia.com/gpu", "value": "absent"}]), ["cpu"]),
    }
    for case, (obj, nodes) in cases.items():
        assert placement([obj], [gpu, cpu]) == {"Deployment/x": nodes}, case
