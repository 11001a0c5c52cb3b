"""Taint rules and platform tolerations per stack shape, refusals with key paths, and awaits sized by images."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.config.derived import CONTROL_PLANE_TAINT, GPU_TAINT, node_taints, platform_tolerations
from components.config.load import spec_and_warnings
from components.config.schema import ConfigError
from components.render.gpu_operator import gpu_operator_values
from components.render.images import pull_await_seconds
from components.render.serving import cert_manager_release, kserve_releases
from components.render.training import kubeflow_trainer_release

from .conftest import load_spec
from .rendered_stack import variants

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def spec_of(variant: str) -> Any:
    return load_spec(*variants()[variant])


def test_one_node_lab_is_left_untainted_and_needs_no_tolerations() -> None:
    spec = spec_of("one-node-lab")
    [node] = spec.nodes
    assert node.gpu is not None and node_taints(spec.nodes, node) == []
    assert platform_tolerations(spec) == []


def test_all_gpu_workers_give_the_platform_the_gpu_toleration() -> None:
    spec = spec_of("all-gpu-workers")
    assert all(GPU_TAINT in node_taints(spec.nodes, n) for n in spec.nodes if n.gpu is not None)
    assert platform_tolerations(spec) == [GPU_TOLERATION]
    cert_manager = cert_manager_release(spec).values
    for path in ("tolerations", "webhook", "cainjector", "startupapicheck"):
        section = cert_manager if path == "tolerations" else cert_manager[path]
        assert section["tolerations"] == [GPU_TOLERATION], path
    trainer = kubeflow_trainer_release(spec).values
    assert trainer["manager"]["tolerations"] == [GPU_TOLERATION]
    assert trainer["jobset"]["controller"]["tolerations"] == [GPU_TOLERATION]
    assert trainer["runtimes"]["installer"]["tolerations"] == [GPU_TOLERATION]
    resources = next(r for r in kserve_releases(spec) if r.name == "kserve-resources").values
    assert resources["kserve"]["controller"]["tolerations"] == [GPU_TOLERATION]


def test_a_stack_with_an_untainted_node_adds_no_tolerations() -> None:
    spec = spec_of("onprem")
    assert platform_tolerations(spec) == []
    assert "tolerations" not in cert_manager_release(spec).values


def _refusal(change: Any) -> str:
    values, secret = copy.deepcopy(variants()["one-node-lab"])
    change(values)
    with pytest.raises(ConfigError) as error:
        load_spec(values, secret)
    return error.value.report()


CONTROL_PLANE_TOLERATION = {
    "key": "node-role.kubernetes.io/control-plane",
    "operator": "Exists",
    "effect": "NoSchedule",
}


def test_a_dedicated_gpu_control_plane_alone_keeps_only_its_own_taint_and_the_platform_tolerates_it() -> None:
    values, secret = copy.deepcopy(variants()["one-node-lab"])
    values["nodes"][0]["roles"] = ["control-plane"]
    values["kueue"]["enabled"] = False  # GPUs of a control-plane-only node are in no Kueue flavor (docs/kueue.md)
    spec = load_spec(values, secret)
    assert node_taints(spec.nodes, spec.nodes[0]) == [CONTROL_PLANE_TAINT]
    assert platform_tolerations(spec) == [CONTROL_PLANE_TOLERATION]
    assert cert_manager_release(spec).values["webhook"]["tolerations"] == [CONTROL_PLANE_TOLERATION]


def test_gpu_workers_are_preferred_over_control_planes() -> None:
    spec = spec_of("all-gpu-workers")
    assert all(node_taints(spec.nodes, n) == [CONTROL_PLANE_TAINT] for n in spec.nodes if n.gpu is None)
    assert CONTROL_PLANE_TOLERATION not in platform_tolerations(spec)


def test_user_taints_on_every_node_are_refused() -> None:
    def tainted(values: dict[str, Any]) -> None:
        values["nodes"][0]["taints"] = ["dedicated=ml:NoSchedule"]

    assert "mlcluster:nodes: no node can run CoreDNS" in _refusal(tainted)


def test_await_grows_with_the_declared_sizes() -> None:
    assert pull_await_seconds([21.5, 9.8]) == 2220
    assert pull_await_seconds([9.8], 1200) == 2340
    assert pull_await_seconds([40.0]) > pull_await_seconds([21.5])
    assert pull_await_seconds([None]) == pull_await_seconds([20.0])


DAEMON_SET = "kubernetes:apps/v1:DaemonSet"


def test_plan_states_the_prepull_and_yolo_timeouts(run_stack: Any) -> None:
    run = run_stack("onprem")
    [prepull] = [
        r for r in run.resources if r.type == "kubernetes:apps/v1:DaemonSet" and r.name.endswith("prepull-ml-base")
    ]
    assert prepull.options["customTimeouts"] == {"create": "2220s", "update": "2220s"}
    [yolo] = [r for r in run.resources if r.type == "kubernetes:batch/v1:Job" and r.name.endswith("yolo26-predict")]
    assert yolo.options["customTimeouts"]["create"] == "2340s"


def test_a_bigger_declared_image_waits_longer(run_stack: Any) -> None:
    values, secret = copy.deepcopy(variants()["onprem"])
    values["images"]["prepull"][0]["images"][1]["sizeGiB"] = 19.6
    run = run_stack("onprem", values=values, secret=secret)
    [prepull] = [
        r for r in run.resources if r.type == "kubernetes:apps/v1:DaemonSet" and r.name.endswith("prepull-ml-base")
    ]
    assert prepull.options["customTimeouts"]["create"] == "2760s"
    [yolo] = [r for r in run.resources if r.type == "kubernetes:batch/v1:Job" and r.name.endswith("yolo26-predict")]
    assert yolo.options["customTimeouts"]["create"] == "2820s"


# --- quotas that add up; the toolkit per provider ------------------------------------------------------------------


def _warnings(values: dict[str, Any], secret: list[str]) -> list[str]:
    return [str(w) for w in spec_and_warnings(values, lambda key: key in secret)[1]]


def test_gpus_held_by_endpoints_are_not_also_promised_to_teams() -> None:
    values, secret = copy.deepcopy(variants()["onprem"])
    held = [w for w in _warnings(values, secret) if "held outside Kueue" in w]
    assert held == [
        "mlcluster:kueue.teams: nominal nvidia.com/gpu quotas promise 32 of the 32 GPUs, but 2 are held outside"
        " Kueue (deployment chat-tgi 1, endpoint chat 1): admitted jobs may wait for 2 GPUs; lower the quotas by"
        " that much"
    ]
    nominal = values["kueue"]["teams"][2]["quotas"][1]["nominal"]
    nominal["nvidia.com/gpu"] -= 1
    assert [w for w in _warnings(values, secret) if "held outside Kueue" in w] != [], "one GPU short is still short"
    nominal["nvidia.com/gpu"] -= 1
    assert [w for w in _warnings(values, secret) if "held outside Kueue" in w] == []


def test_toolkit_follows_the_provider_table_and_the_stack() -> None:
    def toolkit(variant: str, **gpu: Any) -> Any:
        values, secret = copy.deepcopy(variants()[variant])
        values["gpuOperator"].update(gpu)
        return gpu_operator_values(load_spec(values, secret), False)["toolkit"]["enabled"]

    assert toolkit("onprem") is True
    assert toolkit("existing-eks") is False and toolkit("existing-gke") is False
    assert toolkit("existing-eks", toolkit=True) is True
    assert toolkit("onprem", toolkit=False) is False


def test_a_control_plane_only_stack_without_the_platform_is_fine() -> None:
    values, secret = copy.deepcopy(variants()["one-node-lab"])
    node = values["nodes"][0]
    del node["gpu"]
    node["roles"] = ["control-plane"]
    for layer in ("gpuOperator", "kueue", "kserve", "kubeflow", "storage", "monitoring"):
        values[layer] = {"enabled": False}
    values["workloads"] = {}
    values["images"]["prepull"] = []
    assert load_spec(values, secret).nodes[0].roles == ("control-plane",)
