"""network.rdma: the Network Operator release and NicClusterPolicy checked against the pinned chart (its values,
its CRD, the Helm engine), the GPU Operator's GPUDirect RDMA values, the training pods' RDMA request, refusals."""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import pytest
import yaml

from components.config.network import DEFAULT_RDMA_RESOURCE, NETWORK_OPERATOR_VERSION
from components.config.spec import Spec
from components.render.gpu_operator import gpu_operator_values
from components.render.network import (
    CHART_OPERATOR_TOLERATIONS,
    COMPONENT_REPOSITORY,
    NIC_CLUSTER_POLICY,
    component_version,
    network_operator_release,
    network_operator_values,
    nic_cluster_policy,
)
from components.render.scheduling import pod_spec, tolerates
from components.render.workloads import pytorch_job, train_job, training_job

from .conftest import load_spec
from .helm_render import chart_path, render_chart
from .rendered_stack import variants
from .test_config_validation import base, errors_of, parse
from .upstream import ManifestLoader, chart_values, crd_errors, custom_resource_errors, unknown_value_keys

CHART = ("network-operator", NETWORK_OPERATOR_VERSION)
GPU_CHART = ("gpu-operator", "v26.7.0")
FOUR_NICS = ["ibp24s0", "ibp64s0", "ibp155s0", "ibp206s0"]
GPU_TAINT_PARSED = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def rdma_values(rdma: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    values = base()
    values["network"] = {"rdma": {"enabled": True, "nics": {"ifNames": FOUR_NICS}, **(rdma or {})}}
    values.update(top)
    return values


@cache
def _crd(name: str) -> dict[str, Any]:
    path = chart_path(*CHART) / "crds" / name
    return dict(yaml.load(path.read_text(), Loader=ManifestLoader))


def policy_errors(policy: dict[str, Any]) -> list[str]:
    return custom_resource_errors(policy, _crd("mellanox.com_nicclusterpolicies.yaml"), "NicClusterPolicy CRD")


def device_plugin_config(policy: dict[str, Any], key: str) -> dict[str, Any]:
    return dict(json.loads(policy["spec"][key]["config"]))


def with_subchart_values(upstream: dict[str, Any], subchart: str) -> dict[str, Any]:
    """The chart's values with a subchart's own under its key, as Helm hands them to the subchart."""
    own = yaml.safe_load((chart_path(*CHART) / "charts" / subchart / "values.yaml").read_text())

    def merged(below: Any, above: Any) -> Any:
        if not (isinstance(below, dict) and isinstance(above, dict)):
            return above
        return {**below, **{k: merged(below.get(k), v) for k, v in above.items()}}

    return {**upstream, subchart: merged(own, upstream.get(subchart, {}))}


# --- the NicClusterPolicy ------------------------------------------------------------------------------------------


def test_a_four_nic_node_gets_one_shared_rdma_resource_over_its_four_interfaces() -> None:
    policy = nic_cluster_policy(
        parse(rdma_values()).network, parse(rdma_values()).gpu_operator, parse(rdma_values()).upgrade
    )
    assert policy_errors(policy) == []
    assert policy["metadata"] == {"name": NIC_CLUSTER_POLICY}
    assert set(policy["spec"]) == {"tolerations", "rdmaSharedDevicePlugin"}
    assert device_plugin_config(policy, "rdmaSharedDevicePlugin") == {
        "configList": [
            {
                "resourceName": "rdma_shared_device_a",
                "resourcePrefix": "rdma",
                "rdmaHcaMax": 63,
                "selectors": {"ifNames": FOUR_NICS},
            }
        ]
    }
    # Its device plugin runs on the GPU nodes, which carry the GPU taint.
    assert tolerates(policy["spec"]["tolerations"], GPU_TAINT_PARSED)


def test_sriov_mode_advertises_the_pfs_vfs_with_their_rdma_devices() -> None:
    spec = parse(
        rdma_values({"mode": "sriov", "resourceName": "nvidia.com/sriov_rdma", "nics": {"deviceIds": ["101e"]}})
    )
    policy = nic_cluster_policy(spec.network, spec.gpu_operator, spec.upgrade)
    assert policy_errors(policy) == []
    assert "rdmaSharedDevicePlugin" not in policy["spec"]
    assert device_plugin_config(policy, "sriovDevicePlugin") == {
        "resourceList": [
            {
                "resourcePrefix": "nvidia.com",
                "resourceName": "sriov_rdma",
                "selectors": {"devices": ["101e"], "isRdma": True},
            }
        ]
    }


@pytest.mark.parametrize(("driver", "container"), [("host", False), ("operator", True)])
def test_the_driver_container_only_with_driver_operator(driver: str, container: bool) -> None:
    policy = nic_cluster_policy(
        parse(rdma_values({"driver": driver})).network,
        parse(rdma_values({"driver": driver})).gpu_operator,
        parse(rdma_values({"driver": driver})).upgrade,
    )
    assert policy_errors(policy) == []
    assert ("ofedDriver" in policy["spec"]) is container
    if container:
        ofed = policy["spec"]["ofedDriver"]
        assert (ofed["image"], ofed["repository"]) == ("doca-driver", COMPONENT_REPOSITORY)
        # A driver rollout waits for the Kueue-admitted jobs, as the GPU driver's does.
        assert ofed["upgradePolicy"]["waitForCompletion"]["podSelector"] == "kueue.x-k8s.io/podset"


def test_the_crd_check_catches_a_misspelled_field() -> None:
    policy = copy.deepcopy(
        nic_cluster_policy(
            parse(rdma_values()).network, parse(rdma_values()).gpu_operator, parse(rdma_values()).upgrade
        )
    )
    policy["spec"]["rdmaSharedDevicePlugin"]["imag"] = policy["spec"]["rdmaSharedDevicePlugin"].pop("image")
    assert policy_errors(policy) != []


def test_component_images_are_the_ones_the_chart_ships_with() -> None:
    """The chart's values name its release's component images (the SR-IOV subchart's): same place, same tag."""
    spec = parse(rdma_values())
    upstream = chart_values(*CHART)["sriov-network-operator"]["images"]["sriovDevicePlugin"]
    repository, _, tag = upstream.rpartition(":")
    assert repository == f"{COMPONENT_REPOSITORY}/sriov-network-device-plugin"
    assert tag == component_version(spec.network) == f"network-operator-v{NETWORK_OPERATOR_VERSION}"
    app_version = yaml.safe_load((chart_path(*CHART) / "Chart.yaml").read_text())["appVersion"]
    assert app_version == f"v{NETWORK_OPERATOR_VERSION}"


# --- the release's values ------------------------------------------------------------------------------------------


def test_release_values_exist_upstream_and_leave_nfd_to_the_gpu_operator() -> None:
    spec = parse(rdma_values())
    release = network_operator_release(spec)
    assert (release.chart, release.version, release.upstream_chart) == ("network-operator", "26.4.1", CHART[0])
    assert release.values == {"nfd": {"enabled": False, "deployNodeFeatureRules": True}}
    assert unknown_value_keys(dict(release.values), chart_values(*CHART)) == []
    alone = network_operator_values(parse(rdma_values(gpuOperator={"enabled": False})))
    assert alone["nfd"]["enabled"] is True


def test_on_an_all_gpu_cluster_the_operator_tolerates_the_gpu_taint_beside_the_charts_own() -> None:
    values, secret = copy.deepcopy(variants()["all-gpu-workers"])
    values["network"]["rdma"]["enabled"] = True
    # Without the GPU Operator, the chart's own NFD runs: its controllers need the toleration too.
    values["gpuOperator"] = {**values.get("gpuOperator", {}), "enabled": False}
    values["monitoring"]["faultHandling"] = {"mode": "off"}
    rendered = network_operator_values(load_spec(values, secret))
    upstream = with_subchart_values(chart_values(*CHART), "node-feature-discovery")
    assert list(CHART_OPERATOR_TOLERATIONS) == upstream["operator"]["tolerations"]
    assert rendered["operator"]["tolerations"][:2] == upstream["operator"]["tolerations"]
    assert tolerates(rendered["operator"]["tolerations"], GPU_TAINT_PARSED)
    for controller in ("master", "gc"):
        assert tolerates(rendered["node-feature-discovery"][controller]["tolerations"], GPU_TAINT_PARSED)
    assert unknown_value_keys(rendered, upstream) == []


@pytest.mark.render
@pytest.mark.parametrize("gpu_operator", [True, False], ids=["beside-the-gpu-operator", "alone"])
def test_the_chart_renders_with_our_values_and_every_object_validates(gpu_operator: bool) -> None:
    spec = parse(rdma_values(gpuOperator={"enabled": gpu_operator}))
    release = network_operator_release(spec)
    chart = render_chart(
        *CHART, release.values, release=release.name, namespace=release.namespace, kube_version="1.34.2"
    )
    crds = {(c["spec"]["group"], c["spec"]["names"]["kind"]): c for c in chart.crds}
    # Beside the GPU Operator, its NFD brings the NodeFeatureRule CRD the chart's rule needs.
    gpu_chart = render_chart(*GPU_CHART, {}, release="gpu-operator", namespace="gpu-operator", kube_version="1.34.2")
    crds.update({(c["spec"]["group"], c["spec"]["names"]["kind"]): c for c in gpu_chart.crds})
    assert ("mellanox.com", "NicClusterPolicy") in crds
    problems = []
    for document in chart.objects:
        group = document["apiVersion"].rpartition("/")[0]
        crd = crds.get((group, document["kind"]))
        if crd is not None:
            problems += custom_resource_errors(document, crd, document["kind"])
    assert problems == []
    kinds = {o["kind"] for o in chart.objects}
    assert "NodeFeatureRule" in kinds
    nfd_workers = [d for d in chart.of_kind("DaemonSet") if "node-feature-discovery" in d["metadata"]["name"]]
    assert bool(nfd_workers) is not gpu_operator, "one NFD in the cluster: the GPU Operator's when it is there"
    [operator] = [d for d in chart.of_kind("Deployment") if d["metadata"]["name"] == "network-operator"]
    assert "tolerations" in pod_spec(operator)
    assert policy_errors(nic_cluster_policy(spec.network, spec.gpu_operator, spec.upgrade)) == []


# --- the GPU Operator: GPUDirect RDMA ------------------------------------------------------------------------------


@pytest.mark.parametrize(("driver", "host_mofed"), [("host", True), ("operator", False)])
def test_gpu_operator_turns_gpudirect_rdma_on_over_the_chosen_mofed(driver: str, host_mofed: bool) -> None:
    values = gpu_operator_values(parse(rdma_values({"driver": driver})), True)
    assert values["driver"]["rdma"] == {"enabled": True, "useHostMofed": host_mofed}
    assert unknown_value_keys(values["driver"], chart_values(*GPU_CHART)["driver"]) == []
    assert "rdma" not in gpu_operator_values(parse(base()), True)["driver"]


# --- the training workloads ---------------------------------------------------------------------------------------


def training_spec(num_nodes: int, **rdma: Any) -> Spec:
    return parse(
        rdma_values(
            rdma,
            kueue={"enabled": False},
            kubeflow={"legacyTrainingOperator": True},
            workloads={"training": {"enabled": True, "numNodes": num_nodes, "storageClass": "shared-nfs"}},
        )
    )


def _containers(manifest: Any) -> list[dict[str, Any]]:
    if isinstance(manifest, list):
        return [c for item in manifest for c in _containers(item)]
    if not isinstance(manifest, dict):
        return []
    own = [c for c in manifest.get("containers", []) if isinstance(c, dict)]
    return own + [c for key, value in manifest.items() if key != "containers" for c in _containers(value)]


def test_multi_node_training_pods_request_the_rdma_device_and_may_lock_memory() -> None:
    spec = training_spec(4)
    job = train_job(spec)
    assert job["spec"]["trainer"]["resourcesPerNode"] == {"limits": {"nvidia.com/gpu": 1, DEFAULT_RDMA_RESOURCE: 1}}
    [node] = _containers(job["spec"]["runtimePatches"])
    assert node["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert crd_errors(job, "kubeflow-trainer/v2.3.0/trainer.kubeflow.org_trainjobs.yaml") == []
    legacy = pytorch_job(spec)
    containers = _containers(legacy["spec"]["pytorchReplicaSpecs"])
    assert len(containers) == 2  # Master and Worker
    for container in containers:
        assert container["resources"]["limits"] == {"nvidia.com/gpu": 1, DEFAULT_RDMA_RESOURCE: 1}
        assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert crd_errors(legacy, "kubeflow-training-operator/v1.9.4/kubeflow.org_pytorchjobs.yaml") == []
    # The batch Job is one pod: nothing of it crosses a node.
    [single] = _containers(training_job(spec))
    assert "securityContext" not in single and DEFAULT_RDMA_RESOURCE not in single["resources"]["limits"]


def test_a_named_sriov_resource_is_what_the_pods_request() -> None:
    spec = training_spec(2, mode="sriov", resourceName="nvidia.com/sriov_rdma")
    assert train_job(spec)["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/sriov_rdma"] == 1


@pytest.mark.parametrize("enabled", [True, False])
def test_a_one_node_run_or_rdma_off_requests_nothing(enabled: bool) -> None:
    values = rdma_values(
        kueue={"enabled": False},
        workloads={"training": {"enabled": True, "numNodes": 1 if enabled else 2, "storageClass": "shared-nfs"}},
    )
    values["network"]["rdma"]["enabled"] = enabled
    job = train_job(parse(values))
    assert job["spec"]["trainer"]["resourcesPerNode"] == {"limits": {"nvidia.com/gpu": 1}}
    assert all("securityContext" not in c for c in _containers(job))


# --- refusals and warnings -----------------------------------------------------------------------------------------


def _no_gpu_node(values: dict[str, Any]) -> None:
    values["nodes"][2].pop("gpu")


def _queued_multi_node_training(values: dict[str, Any]) -> None:
    values["kueue"] = {
        "enabled": True,
        "teams": [{"name": "vision", "quotas": [{"flavor": "h100-sxm-80gb", "nominal": {"nvidia.com/gpu": "8"}}]}],
    }
    values["workloads"] = {
        "namespace": "vision",
        "createNamespace": False,
        "queueName": "vision",
        "training": {"enabled": True, "numNodes": 2, "trainJob": False, "storageClass": "shared-nfs"},
    }


REFUSALS: list[tuple[str, dict[str, Any], Any, str]] = [
    # (case, network.rdma over the four-NIC declaration, a change to the rest, the error's start)
    (
        "no GPU node",
        {},
        _no_gpu_node,
        "mlcluster:network.rdma.enabled: needs a GPU node",
    ),
    (
        "sriov without PFs or device ids",
        {"mode": "sriov", "nics": {"vendors": ["15b3"]}},
        None,
        "mlcluster:network.rdma.nics: needs ifNames",
    ),
    ("no NIC declared", {"nics": {}}, None, "mlcluster:network.rdma.nics: declares no NIC"),
    (
        "empty selector lists",
        {"nics": {"ifNames": [], "deviceIds": []}},
        None,
        "mlcluster:network.rdma.nics: declares no NIC",
    ),
    (
        "resource without a domain",
        {"resourceName": "rdma_shared_device_a"},
        None,
        'mlcluster:network.rdma.resourceName: "rdma_shared_device_a" is not an extended resource name',
    ),
    (
        "resource in Kubernetes' domain",
        {"resourceName": "kubernetes.io/rdma"},
        None,
        'mlcluster:network.rdma.resourceName: "kubernetes.io/rdma" uses',
    ),
    (
        "resource with an uppercase domain",
        {"resourceName": "RDMA/hca"},
        None,
        'mlcluster:network.rdma.resourceName: "RDMA/hca" is not an extended',
    ),
    (
        "resource with a bad name part",
        {"resourceName": "rdma/a b"},
        None,
        'mlcluster:network.rdma.resourceName: "rdma/a b" has a name part',
    ),
    (
        "the GPUs' resource",
        {"resourceName": "nvidia.com/gpu"},
        None,
        'mlcluster:network.rdma.resourceName: "nvidia.com/gpu" is the GPUs',
    ),
    (
        "interface name too long",
        {"nics": {"ifNames": ["enp1s0f0np0-too-long"]}},
        None,
        "mlcluster:network.rdma.nics.ifNames: [\"enp1s0f0np0-too-long\"] item 'enp1s0f0np0-too-long' is not",
    ),
    (
        "PCI id not hex",
        {"nics": {"deviceIds": ["CX7"]}},
        None,
        "mlcluster:network.rdma.nics.deviceIds: [\"CX7\"] item 'CX7' is not a PCI id",
    ),
    ("unknown mode", {"mode": "shared"}, None, 'mlcluster:network.rdma.mode: "shared" must be one of'),
    (
        "a chart range",
        {"version": "26.x"},
        None,
        'mlcluster:network.rdma.version: "26.x" is not a pinned chart version',
    ),
    (
        "a hostile driver version",
        {"driverVersion": "doca3;reboot"},
        None,
        'mlcluster:network.rdma.driverVersion: "doca3;reboot" is not an image tag',
    ),
    (
        "a queue whose quota lacks the RDMA resource",
        {},
        _queued_multi_node_training,
        "mlcluster:kueue.teams[0].quotas: has no quota for rdma/rdma_shared_device_a",
    ),
]


@pytest.mark.parametrize(("case", "rdma", "change", "expected"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_each_refusal_names_its_key(case: str, rdma: dict[str, Any], change: Any, expected: str) -> None:
    values = rdma_values()
    values["network"]["rdma"].update(rdma)
    if change is not None:
        change(values)
    errors = errors_of(values)
    assert any(e.startswith(expected) for e in errors), (case, errors)


def test_every_refusal_is_reported_at_once() -> None:
    values = rdma_values({"mode": "sriov", "nics": {"vendors": ["15b3"]}, "resourceName": "rdma"})
    _no_gpu_node(values)
    errors = errors_of(values)
    for key in ("network.rdma.enabled", "network.rdma.nics", "network.rdma.resourceName"):
        assert any(e.startswith(f"mlcluster:{key}: ") for e in errors), (key, errors)


def test_a_quota_covering_the_rdma_resource_is_accepted() -> None:
    values = rdma_values()
    _queued_multi_node_training(values)
    values["kueue"]["teams"][0]["quotas"][0]["nominal"][DEFAULT_RDMA_RESOURCE] = "64"
    assert parse(values).network.rdma.enabled


def test_rdma_off_checks_nothing_beyond_the_values_themselves() -> None:
    values = rdma_values({"enabled": False, "nics": {}})
    _no_gpu_node(values)
    assert not parse(values).network.rdma.enabled


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"gpuOperator": {"driver": "preinstalled"}}, "gpuOperator.driver"),
        ({"gpuOperator": {"enabled": False}}, "gpuOperator.enabled"),
    ],
)
def test_a_host_gpu_driver_or_no_gpu_operator_is_warned_about_gpudirect(change: dict[str, Any], path: str) -> None:
    from components.config.load import spec_and_warnings

    def gpudirect(values: dict[str, Any]) -> list[Any]:
        _, warnings = spec_and_warnings(values, lambda key: key == "ssh")
        return [w for w in warnings if "nvidia-peermem" in w.message]

    assert [w.path for w in gpudirect(rdma_values(**change))] == [path]
    assert gpudirect(rdma_values()) == []
    node_driver = rdma_values()
    node_driver["nodes"][2]["gpu"]["driver"] = "preinstalled"
    assert [w.path for w in gpudirect(node_driver)] == ["nodes[2].gpu.driver"]


# --- the program ---------------------------------------------------------------------------------------------------


def test_the_program_installs_the_operator_after_the_gpu_operator_only_when_asked(run_stack) -> None:
    values, secret = copy.deepcopy(variants()["rdma"])
    run = run_stack("onprem", values=values, secret=secret)
    [layer] = run.of_type("mlcluster:network:NetworkOperator")
    releases = {r.name: r for r in run.of_type("kubernetes:helm.sh/v3:Release")}
    release, gpu = releases["network-operator"], releases["gpu-operator"]
    # The GPU Operator's release first: its NFD brings the NodeFeatureRule CRD the chart's rule needs.
    assert gpu.urn in release.depends_on
    assert release.parent == layer.urn and release.inputs["version"] == NETWORK_OPERATOR_VERSION
    [policy] = run.of_type("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    assert policy.parent == layer.urn and release.urn in policy.depends_on
    assert policy_errors(policy.raw_inputs) == []
    assert gpu.raw_inputs["values"]["driver"]["rdma"] == {"enabled": True, "useHostMofed": True}
    off = run_stack("onprem")
    assert not [r for r in off.resources if r.type == "mlcluster:network:NetworkOperator"]


def test_roce_is_refused_by_its_key_with_the_reason() -> None:
    """InfiniBand only: a RoCE pod needs a secondary network beside the RDMA device (the pinned Network Operator
    ships the MacvlanNetwork CRD for it), which the stack does not create."""
    assert (chart_path(*CHART) / "crds" / "mellanox.com_macvlannetworks.yaml").is_file()
    refused = errors_of(rdma_values({"linkType": "roce"}))
    assert [e.split(": ", 1)[0] for e in refused] == ["mlcluster:network.rdma.linkType"], refused
    assert "secondary network" in refused[0] and "MacvlanNetwork" in refused[0]
    assert parse(rdma_values({"linkType": "infiniband"})).network.rdma.link_type == "infiniband"
