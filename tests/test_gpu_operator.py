"""GPU Operator: expected documents (device-plugin configs, node labels), upstream values keys, validation,
and the preflight's output driving the release in one run of the program."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi.runtime import mocks as pulumi_mocks

from components.config.checks import parse_taint
from components.config.derived import GPU_TAINT
from components.config.nodes import GPU_MODEL_LABEL
from components.plan.engine import run_program
from components.render.gpu_operator import (
    config_warnings,
    device_plugin_configs,
    dra_driver_values,
    gpu_node_labels,
    gpu_operator_values,
    gpu_taint_toleration,
)
from components.render.kubeadm import node_labels, node_taints
from components.render.kueue import resource_flavors
from components.render.shell import STEP_MARKER, script_of_command, split_parts, stored_file

from .conftest import as_config, load_spec, stack_values
from .gpu_host import H200_LSPCI, H200_SMI, FakeGpuHost
from .helm_render import render_chart
from .test_chart_values import template_only_keys_read
from .test_config_validation import base, errors_of, parse
from .test_gpu_preflight import run_preflight
from .upstream import chart_values, custom_resource_errors, unknown_value_keys

UPSTREAM_GPU_OPERATOR = ("gpu-operator", "v26.7.0")


def gpu_values(**gpu_operator: Any) -> dict[str, Any]:
    values = base()
    values["gpuOperator"] = gpu_operator
    return values


def test_time_slicing_configmap_data_is_the_upstream_format() -> None:
    values = gpu_values(timeSlicingReplicas=4, migStrategy="single")
    values["nodes"][2]["gpu"]["timeSlicingReplicas"] = 8
    values["nodes"][2]["gpu"]["migConfig"] = "all-1g.18gb"
    spec = parse(values)
    data = device_plugin_configs(spec.gpu_operator, spec.nodes)
    assert {name: yaml.safe_load(text) for name, text in data.items()} == {
        "default": {
            "version": "v1",
            "flags": {"migStrategy": "single"},
            "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
        },
        "time-slicing-8": {
            "version": "v1",
            "flags": {"migStrategy": "single"},
            "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 8}]}},
        },
    }
    assert data["time-slicing-8"] == (
        "version: v1\nflags:\n  migStrategy: single\nsharing:\n  timeSlicing:\n    resources:\n"
        "    - name: nvidia.com/gpu\n      replicas: 8\n"
    )
    chart = gpu_operator_values(spec, True)
    assert chart["devicePlugin"] == {
        "env": [{"name": "DEVICE_LIST_STRATEGY", "value": "cdi-annotations,cdi-cri"}],
        "config": {"create": True, "name": "mlcluster-device-plugin-config", "default": "default", "data": data},
    }
    node = spec.nodes[2]
    assert gpu_node_labels(spec, node, "operator") == {
        "nvidia.com/mig.config": "all-1g.18gb",
        "nvidia.com/device-plugin.config": "time-slicing-8",
    }


def test_per_node_sharing_alone_keeps_a_no_sharing_default() -> None:
    values = gpu_values()
    values["nodes"][2]["gpu"]["timeSlicingReplicas"] = 2
    data = device_plugin_configs(parse(values).gpu_operator, parse(values).nodes)
    assert {name: yaml.safe_load(text) for name, text in data.items()} == {
        "default": {"version": "v1", "flags": {"migStrategy": "none"}},
        "time-slicing-2": {
            "version": "v1",
            "flags": {"migStrategy": "none"},
            "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}},
        },
    }


def test_no_sharing_sets_no_device_plugin_config() -> None:
    spec = parse(gpu_values())
    assert device_plugin_configs(spec.gpu_operator, spec.nodes) == {}
    assert "config" not in gpu_operator_values(spec, True)["devicePlugin"]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("preinstalled", {"nvidia.com/gpu.deploy.driver": "false"}), ("operator", {})],
)
def test_driver_label_per_node(mode, expected) -> None:
    spec = parse(gpu_values())
    assert gpu_node_labels(spec, spec.nodes[2], mode) == expected


def test_every_values_key_exists_upstream_with_every_option_on() -> None:
    values = gpu_values(
        driver="operator", driverVersion="580.95.05", migStrategy="single", timeSlicingReplicas=4, serviceMonitor=True
    )
    rendered = gpu_operator_values(parse(values), True)
    # dcgmExporter.config (the DCGM counters, with monitoring on) is read by a template, commented in values.yaml.
    unknown = unknown_value_keys(rendered, chart_values(*UPSTREAM_GPU_OPERATOR))
    assert template_only_keys_read(*UPSTREAM_GPU_OPERATOR, unknown) == []
    dra = gpu_operator_values(parse(gpu_values(dra=True)), True)
    assert dra["devicePlugin"] == {"enabled": False}
    unknown = unknown_value_keys(dra, chart_values(*UPSTREAM_GPU_OPERATOR))
    assert template_only_keys_read(*UPSTREAM_GPU_OPERATOR, unknown) == []


@pytest.mark.parametrize(
    ("path", "misspelled"),
    [
        (("devicePlugin", "config", "default"), "defualt"),
        (("dcgmExporter", "serviceMonitor"), "servicemonitor"),
        (("mig", "strategy"), "stratgy"),
        (("toolkit", "env"), "envs"),
    ],
)
def test_a_misspelled_key_in_our_values_fails_the_check(path, misspelled) -> None:
    rendered = copy.deepcopy(gpu_operator_values(parse(gpu_values(timeSlicingReplicas=4, serviceMonitor=True)), True))
    parent = rendered
    for key in path[:-1]:
        parent = parent[key]
    parent[misspelled] = parent.pop(path[-1])
    expected = ".".join([*path[:-1], misspelled])
    unknown = unknown_value_keys(rendered, chart_values(*UPSTREAM_GPU_OPERATOR))
    assert template_only_keys_read(*UPSTREAM_GPU_OPERATOR, unknown) == [expected]


def test_gpu_nodes_taint_and_label_match_what_the_operator_tolerates() -> None:
    spec = parse(gpu_values())
    gpu_node = spec.nodes[2]
    assert GPU_TAINT in node_taints(spec.nodes, gpu_node) and node_labels(gpu_node)[GPU_MODEL_LABEL] == "H100-SXM-80GB"
    upstream = chart_values(*UPSTREAM_GPU_OPERATOR)
    # The operator's DaemonSets and NFD's worker must run on tainted GPU nodes: their upstream tolerations do.
    assert gpu_taint_toleration() in upstream["daemonsets"]["tolerations"]
    assert gpu_taint_toleration() in upstream["node-feature-discovery"]["worker"]["tolerations"]
    assert dra_driver_values(parse(gpu_values()), "/")["kubeletPlugin"]["tolerations"] == [gpu_taint_toleration()]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda v: v.update(kubernetesVersion="1.33.5", gpuOperator={"dra": True}),
            "mlcluster:gpuOperator.dra: needs Kubernetes >= 1.34 (DRA is GA there); kubernetesVersion is 1.33.5",
        ),
        (
            lambda v: v.update(gpuOperator={"migStrategy": "mixed", "timeSlicingReplicas": 4}),
            "mlcluster:gpuOperator.timeSlicingReplicas: cannot be combined with migStrategy mixed"
            " (each MIG profile is its own resource there)",
        ),
        (
            lambda v: (v.update(gpuOperator={"dra": True}), v["nodes"][2]["gpu"].update(timeSlicingReplicas=4)),
            "mlcluster:nodes[2].gpu.timeSlicingReplicas: is a device-plugin setting: it does not apply with dra",
        ),
        (
            lambda v: v.update(gpuOperator={"serviceMonitor": True, "dcgmExporter": False}),
            "mlcluster:gpuOperator.serviceMonitor: needs dcgmExporter: true",
        ),
        (
            lambda v: (
                v.update(gpuOperator={"migStrategy": "single"}),
                v["nodes"][2]["gpu"].update(migConfig="1g 10gb"),
            ),
            'mlcluster:nodes[2].gpu.migConfig: "1g 10gb" is not a valid label value',
        ),
        (
            lambda v: v["nodes"][2]["gpu"].update(driver="host"),
            "mlcluster:nodes[2].gpu.driver:",
        ),
    ],
)
def test_gpu_validation(mutate, expected) -> None:
    values = base()
    mutate(values)
    errors = errors_of(values)
    assert any(e.startswith(expected) for e in errors), errors


def test_mig_profile_with_strategy_none_is_a_warning_not_an_error() -> None:
    values = base()
    values["nodes"][2]["gpu"]["migConfig"] = "all-1g.10gb"
    assert config_warnings(parse(values).nodes, parse(values).gpu_operator) == [
        "mlcluster:nodes[2].gpu.migConfig: all-1g.10gb partitions gpu-1's GPUs, but with gpuOperator.migStrategy"
        " none the device plugin still offers them as whole nvidia.com/gpu (set migStrategy single or mixed to"
        " schedule MIG slices)"
    ]
    values["gpuOperator"] = {"migStrategy": "single"}
    assert config_warnings(parse(values).nodes, parse(values).gpu_operator) == []


def test_dra_is_accepted_from_1_34() -> None:
    spec = parse(gpu_values(dra=True))
    assert spec.gpu_operator.dra and spec.kubernetes_version == "1.34.2"


# --- the preflight's output drives the release, in one (non-preview) run of the program -------------------


class PreflightMocks(pulumi_mocks.Mocks):
    """An engine where each node's GPU preflight printed what the real script printed on a fake host: a GPU
    node's in its own command, any other node's as the first part of its preparation (a merged command's output,
    each part after its step marker)."""

    def __init__(self, preflight_stdout: dict[str, str]) -> None:
        self.preflight_stdout = preflight_stdout

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        outputs = dict(args.inputs)
        if args.typ == "command:remote:Command":
            node = args.name.removesuffix("-gpu-preflight").removesuffix("-prepare")
            printed = self.preflight_stdout.get(node, "")
            if args.name.endswith("-prepare") and printed:
                printed = f"{STEP_MARKER}gpu-preflight\n{printed}{STEP_MARKER}os\nok: Ubuntu 24.04\n"
            outputs["stdout"] = printed if args.name.endswith(("-gpu-preflight", "-prepare")) else ""
            outputs["stderr"] = ""
        if args.typ == "kubernetes:helm.sh/v3:Release":
            outputs["status"] = {"status": "deployed"}
        return f"{args.name}-id", outputs

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


HOSTS = {
    "gpu-preinstalled": FakeGpuHost(lspci=[H200_LSPCI] * 8, nvidia_smi=[H200_SMI] * 8),
    "gpu-bare": FakeGpuHost(lspci=[H200_LSPCI] * 8),
    "cpu": FakeGpuHost(lspci=[]),
    "cpu-with-gpu": FakeGpuHost(lspci=[H200_LSPCI]),
}


def preflight_outputs(tmp_path: Path, hosts: dict[str, tuple[str, str]]) -> dict[str, str]:
    """node name -> stdout of the real preflight on the named fake host (expect: true/false)."""
    out = {}
    for node, (host, expect) in hosts.items():
        result = run_preflight(HOSTS[host], tmp_path / node, expect)
        assert result.returncode == 0, result.stderr
        out[node] = result.stdout
    return out


def run_with_preflight(values: dict[str, Any], stdout: dict[str, str]) -> Any:
    return run_program(as_config(values), ["mlcluster:ssh"], stack="gpu", preview=False, mocks=PreflightMocks(stdout))


def release_values(run: Any, name: str = "gpu-operator") -> dict[str, Any]:
    [release] = [r for r in run.resources if r.type == "kubernetes:helm.sh/v3:Release" and r.name == name]
    return release.raw_inputs["values"]


def node_patch_labels(run: Any, node: str) -> dict[str, str]:
    [patch] = [r for r in run.resources if r.name == f"{node}-gpu-labels"]
    return patch.raw_inputs["metadata"].get("labels") or {}


SCENARIOS = [
    ("preinstalled-driver", "gpu-preinstalled", "auto", False, {"nvidia.com/gpu.deploy.driver": "false"}),
    ("no-host-driver", "gpu-bare", "auto", True, {"nvidia.com/gpu.deploy.driver": "true"}),
    ("operator-forced-over-a-host-driver", "gpu-preinstalled", "operator", True, {}),
    (
        "preinstalled-forced-on-a-bare-host",
        "gpu-bare",
        "preinstalled",
        False,
        {"nvidia.com/gpu.deploy.driver": "false"},
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_preflight_output_decides_the_driver(tmp_path, scenario) -> None:
    _, host, driver, enabled, labels = scenario
    stdout = preflight_outputs(tmp_path, {"cp-1": ("cpu", "false"), "w-1": ("cpu", "false"), "gpu-1": (host, "true")})
    run = run_with_preflight(gpu_values(driver=driver), stdout)
    assert release_values(run)["driver"]["enabled"] is enabled
    assert node_patch_labels(run, "gpu-1") == labels
    assert run.outputs["gpu"].value == {
        "driverEnabled": enabled,
        "driverByNode": {"gpu-1": "operator" if enabled else "preinstalled"},
    }


def test_mixed_fleet_keeps_the_operator_driver_off_preinstalled_nodes(tmp_path) -> None:
    values = gpu_values()
    values["nodes"].append({**values["nodes"][2], "name": "gpu-2", "host": "198.18.0.13"})
    stdout = preflight_outputs(
        tmp_path,
        {
            "cp-1": ("cpu", "false"),
            "w-1": ("cpu", "false"),
            "gpu-1": ("gpu-preinstalled", "true"),
            "gpu-2": ("gpu-bare", "true"),
        },
    )
    run = run_with_preflight(values, stdout)
    assert release_values(run)["driver"]["enabled"] is True
    assert node_patch_labels(run, "gpu-1") == {"nvidia.com/gpu.deploy.driver": "false"}
    assert node_patch_labels(run, "gpu-2") == {"nvidia.com/gpu.deploy.driver": "true"}


def test_cpu_node_with_an_nvidia_gpu_is_reported_by_name(tmp_path, caplog) -> None:
    stdout = preflight_outputs(
        tmp_path, {"cp-1": ("cpu", "false"), "w-1": ("cpu-with-gpu", "false"), "gpu-1": ("gpu-bare", "true")}
    )
    with caplog.at_level(logging.INFO):
        run_with_preflight(gpu_values(), stdout)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w for w in warnings if "w-1 (198.18.0.11)" in w and "not marked as a GPU node" in w], warnings
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(m.startswith("gpu preflight: gpu-1 (gpu-1.lab.example): 8 NVIDIA GPU(s)") for m in infos), infos


def test_a_look_without_its_summary_line_warns_and_does_not_fail_the_up(tmp_path, caplog) -> None:
    """The look inside a CPU node's preparation feeds only a warning: output it cannot read (no summary line)
    is reported, not raised after the node was prepared."""
    stdout = preflight_outputs(tmp_path, {"cp-1": ("cpu", "false"), "gpu-1": ("gpu-bare", "true")})
    stdout["w-1"] = "ok: no NVIDIA PCI device\n"
    with caplog.at_level(logging.WARNING):
        run = run_with_preflight(gpu_values(), stdout)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [
        w
        for w in warnings
        if w.startswith("mlcluster:nodes[1]: gpu preflight: w-1: the look for GPUs printed no summary")
    ], warnings
    assert release_values(run)["driver"]["enabled"] is True


def test_dra_release_follows_the_driver_root(tmp_path) -> None:
    stdout = preflight_outputs(
        tmp_path, {"cp-1": ("cpu", "false"), "w-1": ("cpu", "false"), "gpu-1": ("gpu-preinstalled", "true")}
    )
    run = run_with_preflight(gpu_values(dra=True), stdout)
    assert release_values(run)["devicePlugin"] == {"enabled": False}
    dra = release_values(run, "nvidia-dra-driver-gpu")
    assert dra["nvidiaDriverRoot"] == "/" and dra["gpuResourcesEnabledOverride"] is True
    [release] = [r for r in run.resources if r.name == "nvidia-dra-driver-gpu"]
    assert release.raw_inputs["repositoryOpts"]["repo"] == "https://helm.ngc.nvidia.com/nvidia"


# --- preview: what waits on the preflight is [computed], everything else is visible ---------------------


def test_preview_shows_the_driver_as_computed_only_when_it_waits_on_the_preflight(run_stack) -> None:
    from components.plan.engine import COMPUTED

    auto = run_stack("onprem")
    [release] = [r for r in auto.of_type("kubernetes:helm.sh/v3:Release") if r.name == "gpu-operator"]
    assert release.inputs["values"]["driver"]["enabled"] == COMPUTED
    assert release.inputs["values"]["mig"] == {"strategy": "none"}
    # Only the driver label waits on the preflight, and the node's annotation says so.
    assert auto.named("gpu-1-gpu-labels").inputs["metadata"] == {
        "name": "gpu-1",
        "labels": {"nvidia.com/gpu.deploy.driver": COMPUTED},
        "annotations": {"mlcluster.io/decided-by-gpu-preflight": "nvidia.com/gpu.deploy.driver (gpu-1-gpu-preflight)"},
    }
    # GPU nodes run the preflight as their own command; the others look for GPUs inside their preparation.
    assert sorted(c.name for c in auto.of_type("command:remote:Command") if c.name.endswith("-gpu-preflight")) == [
        f"{n}-gpu-preflight" for n in ("gpu-1", "gpu-2", "gpu-3", "gpu-4")
    ]
    for node in ("cp-1", "cp-2", "cp-3", "cpu-1", "cpu-2"):
        parts = split_parts(script_of_command(auto.named(f"{node}-prepare").inputs["create"]) or "")
        assert parts[0][0] == "gpu-preflight" and "EXPECT_GPU=false" in parts[0][1], node
    values, secret = stack_values("onprem")
    values["gpuOperator"] = {**values["gpuOperator"], "driver": "operator"}
    forced = run_stack(values=values, secret=secret)
    [release] = [r for r in forced.of_type("kubernetes:helm.sh/v3:Release") if r.name == "gpu-operator"]
    assert release.inputs["values"]["driver"]["enabled"] is True
    assert forced.named("gpu-1-gpu-labels").inputs["metadata"] == {"name": "gpu-1", "labels": {}}
    cloud = run_stack("cloud")
    [release] = [r for r in cloud.of_type("kubernetes:helm.sh/v3:Release") if r.name == "gpu-operator"]
    assert release.inputs["values"]["driver"]["enabled"] is False
    assert not [c for c in cloud.resources if c.name.endswith("-gpu-preflight")]


def test_mig_and_time_slicing_labels_are_planned_values_beside_a_driver_label_that_waits(run_stack) -> None:
    from components.plan.engine import COMPUTED

    values, secret = stack_values("onprem")
    gpu_1 = next(n for n in values["nodes"] if n["name"] == "gpu-1")
    gpu_1["gpu"] = {**gpu_1["gpu"], "migConfig": "all-1g.10gb", "timeSlicingReplicas": 4}
    gpu_2 = next(n for n in values["nodes"] if n["name"] == "gpu-2")
    gpu_2["gpu"] = {**gpu_2["gpu"], "migConfig": "all-3g.40gb", "driver": "preinstalled"}
    run = run_stack(values=values, secret=secret)
    assert run.named("gpu-1-gpu-labels").inputs["metadata"]["labels"] == {
        "nvidia.com/mig.config": "all-1g.10gb",
        "nvidia.com/device-plugin.config": "time-slicing-4",
        "nvidia.com/gpu.deploy.driver": COMPUTED,
    }
    # A node whose driver the stack fixes waits on nothing, beside nodes that do.
    assert run.named("gpu-2-gpu-labels").inputs["metadata"] == {
        "name": "gpu-2",
        "labels": {"nvidia.com/mig.config": "all-3g.40gb", "nvidia.com/gpu.deploy.driver": "false"},
    }


def tolerates(toleration: dict[str, str], taint: str) -> bool:
    parsed = parse_taint(taint)
    if toleration["key"] != parsed["key"] or toleration.get("effect", parsed["effect"]) != parsed["effect"]:
        return False
    return toleration.get("operator") == "Exists" or toleration.get("value") == parsed.get("value")


def test_kueue_flavors_select_and_tolerate_the_gpu_nodes_we_label_and_taint() -> None:
    """One GPU node contract for three layers: the node (kubeadm), Kueue's flavors, the operator's pods."""
    spec = load_spec(*stack_values("onprem"))
    flavors = [f for f in resource_flavors(spec) if f["spec"].get("nodeLabels")]
    assert flavors, "the onprem stack has GPU flavors"
    upstream = chart_values(*UPSTREAM_GPU_OPERATOR)
    for node in (n for n in spec.nodes if n.gpu is not None):
        labels, taints = node_labels(node), node_taints(spec.nodes, node)
        assert GPU_TAINT in taints
        selecting = [f for f in flavors if f["spec"]["nodeLabels"].items() <= labels.items()]
        assert len(selecting) == 1, node.name
        assert any(tolerates(t, GPU_TAINT) for t in selecting[0]["spec"]["tolerations"])
        assert any(tolerates(t, GPU_TAINT) for t in upstream["daemonsets"]["tolerations"])
    for node in (n for n in spec.nodes if n.gpu is None):
        assert not [f for f in flavors if f["spec"]["nodeLabels"].items() <= node_labels(node).items()], node.name


# --- driver upgradePolicy: rendered by the real Helm engine into a ClusterPolicy the CRD accepts -----------------


def rendered_upgrade_policy(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The ClusterPolicy's spec.driver.upgradePolicy as Helm renders it, and what the chart's CRD says of it."""
    chart = render_chart(
        *UPSTREAM_GPU_OPERATOR, values, release="gpu-operator", namespace="gpu-operator", kube_version="1.34.2"
    )
    [policy] = chart.of_kind("ClusterPolicy")
    [crd] = [c for c in chart.crds if c["spec"]["names"]["kind"] == "ClusterPolicy"]
    return policy["spec"]["driver"]["upgradePolicy"], custom_resource_errors(policy, crd, "ClusterPolicy CRD")


CHART_POD_DELETION = {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False}
CHART_DRAIN = {"enable": False, "force": False, "timeoutSeconds": 300, "deleteEmptyDir": False}


@pytest.mark.render
@pytest.mark.parametrize(
    ("upgrade", "policy", "expected"),
    [
        pytest.param(
            {},
            {},
            {
                "autoUpgrade": True,
                "maxParallelUpgrades": 1,
                "maxUnavailable": "25%",
                "waitForCompletion": {"timeoutSeconds": 0, "podSelector": "kueue.x-k8s.io/podset"},
                "podDeletion": CHART_POD_DELETION,
                "drain": CHART_DRAIN,
            },
            id="default-waits-for-kueue-jobs",
        ),
        pytest.param(
            {"gpuJobs": "evict"},
            {},
            {
                "autoUpgrade": True,
                "maxParallelUpgrades": 1,
                "maxUnavailable": "25%",
                "waitForCompletion": {"timeoutSeconds": 0},
                "podDeletion": CHART_POD_DELETION,
                "drain": CHART_DRAIN,
            },
            id="gpuJobs-evict-waits-for-none",
        ),
        pytest.param(
            {"gpuJobs": "evict"},
            {
                "autoUpgrade": False,
                "maxParallelUpgrades": 0,
                "maxUnavailable": 2,
                "waitForCompletion": {"podSelector": "team in (a, b),!preemptible", "timeoutSeconds": 3600},
                "gpuPodDeletion": {"force": True, "timeoutSeconds": 0, "deleteEmptyDir": True},
                "drain": {"enable": True, "podSelector": "app!=keep", "timeoutSeconds": 600, "deleteEmptyDir": True},
            },
            {
                "autoUpgrade": False,
                "maxParallelUpgrades": 0,
                "maxUnavailable": 2,
                "waitForCompletion": {"timeoutSeconds": 3600, "podSelector": "team in (a, b),!preemptible"},
                "podDeletion": {"force": True, "timeoutSeconds": 0, "deleteEmptyDir": True},
                "drain": {
                    "enable": True,
                    "force": False,
                    "podSelector": "app!=keep",
                    "timeoutSeconds": 600,
                    "deleteEmptyDir": True,
                },
            },
            id="everything-given",
        ),
    ],
)
def test_driver_upgrade_policy_reaches_the_cluster_policy(upgrade, policy, expected) -> None:
    values = gpu_values(driver="operator", driverUpgradePolicy=policy)
    values["upgrade"] = upgrade
    rendered, errors = rendered_upgrade_policy(gpu_operator_values(parse(values), True))
    assert errors == []
    assert rendered == expected
    unknown = unknown_value_keys(gpu_operator_values(parse(values), True), chart_values(*UPSTREAM_GPU_OPERATOR))
    assert template_only_keys_read(*UPSTREAM_GPU_OPERATOR, unknown) == []


@pytest.mark.render
@pytest.mark.parametrize(
    ("key", "value", "broken"),
    [
        # What validation refuses, forced past it: the CRD check or the text read back catches each one.
        (("waitForCompletion", "timeoutSeconds"), -1, "minimum"),
        (("drain", "timeoutSeconds"), -5, "minimum"),
        (("waitForCompletion", "podSelector"), "true", "not of type 'string'"),
        (("drain", "podSelector"), "!spot,team=a", "read back"),
    ],
)
def test_a_policy_that_validation_refuses_breaks_the_rendered_cluster_policy(key, value, broken) -> None:
    values = copy.deepcopy(gpu_operator_values(parse(gpu_values(driver="operator")), True))
    values["driver"]["upgradePolicy"][key[0]][key[1]] = value
    try:
        rendered, errors = rendered_upgrade_policy(values)
    except yaml.YAMLError as error:  # the rendered text no longer parses
        errors = [f"read back: {error}"]
    else:
        if rendered[key[0]].get(key[1]) != value and isinstance(value, str):
            errors.append(f"read back as {rendered[key[0]].get(key[1])!r}")
    assert any(broken in e for e in errors), errors


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({"maxUnavailable": "0"}, 'driverUpgradePolicy.maxUnavailable: "0" is not a node count'),
        ({"maxUnavailable": "0%"}, 'driverUpgradePolicy.maxUnavailable: "0%" is not a node count'),
        ({"maxUnavailable": "150%"}, 'driverUpgradePolicy.maxUnavailable: "150%" is not a node count'),
        ({"maxUnavailable": "half"}, 'driverUpgradePolicy.maxUnavailable: "half" is not a node count'),
        ({"maxParallelUpgrades": -1}, "driverUpgradePolicy.maxParallelUpgrades: -1 must be 0 or more"),
        ({"waitForCompletion": {"timeoutSeconds": -1}}, "waitForCompletion.timeoutSeconds: -1 must be 0 or more"),
        ({"gpuPodDeletion": {"timeoutSeconds": -1}}, "gpuPodDeletion.timeoutSeconds: -1 must be 0 or more"),
        ({"drain": {"timeoutSeconds": -1}}, "drain.timeoutSeconds: -1 must be 0 or more"),
        ({"drain": {"timeoutSeconds": "5m"}}, 'drain.timeoutSeconds: must be an integer, got "5m"'),
        ({"drain": {"enable": "yes"}}, 'drain.enable: must be true or false, got "yes"'),
        ({"gpuPodDeletion": {"forse": True}}, 'gpuPodDeletion.forse: unknown key (did you mean "force"?)'),
        ({"waitForCompletion": {"podSelector": "a in ()"}}, "needs at least one value"),
        ({"waitForCompletion": {"podSelector": "team=a b"}}, "not a label selector term"),
        ({"waitForCompletion": {"podSelector": "-x"}}, "is not a valid label key"),
        ({"drain": {"podSelector": "app=-bad"}}, "is not a valid label value"),
        ({"drain": {"podSelector": "a notin (x,-y)"}}, "is not a valid label value"),
        ({"drain": {"podSelector": "!spot"}}, "is written unquoted into the ClusterPolicy"),
        ({"waitForCompletion": {"podSelector": "true"}}, "is written unquoted into the ClusterPolicy"),
    ],
)
def test_driver_upgrade_policy_validation(policy, expected) -> None:
    errors = errors_of(gpu_values(driverUpgradePolicy=policy))
    assert any(e.startswith("mlcluster:gpuOperator.driverUpgradePolicy.") and expected in e for e in errors), errors


def test_every_driver_upgrade_policy_error_is_reported_at_once() -> None:
    policy = {
        "maxUnavailable": "0",
        "waitForCompletion": {"podSelector": "!x"},
        "drain": {"podSelector": "a in ()", "timeoutSeconds": -1},
    }
    errors = [e.split(":")[1] for e in errors_of(gpu_values(driverUpgradePolicy=policy))]
    assert sorted(errors) == [
        "gpuOperator.driverUpgradePolicy.drain.podSelector",
        "gpuOperator.driverUpgradePolicy.drain.timeoutSeconds",
        "gpuOperator.driverUpgradePolicy.maxUnavailable",
        "gpuOperator.driverUpgradePolicy.waitForCompletion.podSelector",
    ]


def test_operator_on_without_gpu_nodes_runs_no_preflight_command_and_every_node_looks(run_stack) -> None:
    """No node has a `gpu` section yet (GPU nodes come later): no preflight command at all, every preparation
    starts with the look for undeclared GPUs (after the node's copy of the scripts)."""
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    for node in values["nodes"]:
        node.pop("gpu", None)
    for layer in ("kserve", "workloads"):
        values.pop(layer, None)
    values["kueue"] = {"enabled": False}
    run = run_stack(values=values, secret=secret)
    assert not [r for r in run.resources if r.name.endswith("-gpu-preflight")]
    for node in values["nodes"]:
        script = script_of_command(run.named(f"{node['name']}-prepare").inputs["create"]) or ""
        assert split_parts(script)[0][0] == "gpu-preflight" and stored_file("gpu-preflight") in script, node["name"]
        assert run.urn_of(f"{node['name']}-scripts") in run.named(f"{node['name']}-prepare").depends_on
