"""GPU nodes over SSH: the real preflight on fleet hosts decides the GPU Operator's driver mode, a forgotten
GPU host is reported by name, and the NVIDIA toolkit's containerd drop-in survives re-runs of our steps."""

from __future__ import annotations

import fnmatch
import logging
import tomllib
from typing import Any

import pytest

from components.render.containerd import containerd_config_toml

from ..gpu_host import H200_LSPCI, H200_SMI, NVSWITCH_LSPCI
from ..test_config_validation import parse
from ..upstream import containerd_errors
from .engine import FleetEngine
from .gpu import give_gpus
from .hosts import HostSpec
from .steps import prepared, step_output, step_outputs

pytestmark = pytest.mark.fleet

# What the container toolkit writes for containerd config version 2 (RUNTIME_DROP_IN_CONFIG).
TOOLKIT_DROP_IN = """version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "nvidia"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
          runtime_type = "io.containerd.runc.v2"
          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
            BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
            SystemdCgroup = true
"""
DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
NO_ACCEPTANCE = {"enabled": False}
"""Acceptance has its own fleet tests (test_acceptance.py): here its Jobs would wait out the wave timeout for GPUs
the stand-in API was not told about."""


def gpu_operator_values(run: Any) -> dict[str, Any]:
    [release] = [r for r in run.program.resources if r.name == "gpu-operator" and r.type.endswith(":Release")]
    return release.raw_inputs["values"]


def labels_of(run: Any, node: str) -> dict[str, str]:
    [patch] = [r for r in run.program.resources if r.name == f"{node}-gpu-labels"]
    return patch.raw_inputs["metadata"].get("labels") or {}


def imports_drop_in(config_text: str) -> bool:
    imports = tomllib.loads(config_text).get("imports", [])
    return any(fnmatch.fnmatch(DROP_IN, pattern) for pattern in imports)


def test_preflight_decides_the_driver_reports_forgotten_gpus_and_keeps_the_toolkit_drop_in(
    fleet, fleet_engine, caplog
) -> None:
    hosts = fleet(HostSpec("cp-1"), HostSpec("w-cpu", os="ubuntu-24.04"), HostSpec("gpu-a"), HostSpec("gpu-b"))
    give_gpus(hosts["cp-1"], [], None)
    give_gpus(hosts["w-cpu"], [H200_LSPCI], None)  # a GPU nobody marked
    give_gpus(hosts["gpu-a"], [H200_LSPCI] * 8 + [NVSWITCH_LSPCI] * 4, [H200_SMI] * 8)  # preinstalled driver
    give_gpus(hosts["gpu-b"], [H200_LSPCI] * 8, None)  # bare: the operator must bring the driver
    gpu = {"count": 8, "model": "H200-SXM-141GB"}
    nodes = [hosts["cp-1"].node("control-plane"), hosts["w-cpu"].node(), hosts["gpu-a"].node(gpu=gpu)]
    values, secret = hosts.stack_values(nodes, gpuOperator={"enabled": True}, acceptance=NO_ACCEPTANCE)

    # 1. Only a host with a working driver among the GPU nodes: the operator installs none.
    with caplog.at_level(logging.INFO):
        first = fleet_engine.up(values, secret)
    first.raise_error()
    assert gpu_operator_values(first)["driver"]["enabled"] is False
    assert labels_of(first, "gpu-a") == {"nvidia.com/gpu.deploy.driver": "false"}
    assert first.program.outputs["gpu"].value == {"driverEnabled": False, "driverByNode": {"gpu-a": "preinstalled"}}
    preflight = first.step("gpu-a-gpu-preflight")
    assert "ok: host driver 580.159.04 works" in (preflight.stdout or "")
    assert '"gpuCount":8' in (preflight.stdout or "") and '"otherNvidiaFunctions":4' in (preflight.stdout or "")
    # Each preflight is one SSH session and asked nvidia-smi once; the CPU host has no nvidia-smi at all.
    assert [c["argv"][0] for c in hosts["gpu-a"].calls("nvidia-smi")] == [
        "--query-gpu=name,driver_version,memory.total"
    ]
    assert hosts["w-cpu"].calls("lspci") and not hosts["w-cpu"].calls("nvidia-smi")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    forgotten = [w for w in warnings if f"w-cpu ({hosts['w-cpu'].address})" in w]
    assert len(forgotten) == 1 and "1 NVIDIA GPU(s) but is not marked as a GPU node" in forgotten[0], warnings
    assert not [w for w in warnings if "cp-1" in w or "gpu-a" in w], warnings

    # 2. The container toolkit drops its runtime config in; our config imports it, untouched by a re-run.
    hosts["gpu-a"].run(f"mkdir -p /etc/containerd/conf.d && cat > {DROP_IN} <<'EOF'\n{TOOLKIT_DROP_IN}EOF")
    ours = hosts["gpu-a"].read("/etc/containerd/config.toml")
    assert imports_drop_in(ours)
    # A bare GPU host joins: it gets the operator's driver, the preinstalled one keeps its own.
    values["nodes"] = [*nodes, hosts["gpu-b"].node(gpu=gpu)]
    second = fleet_engine.up(values, secret)
    second.raise_error()
    assert gpu_operator_values(second)["driver"]["enabled"] is True
    assert second.program.outputs["gpu"].value["driverByNode"] == {"gpu-a": "preinstalled", "gpu-b": "operator"}
    assert labels_of(second, "gpu-a") == {"nvidia.com/gpu.deploy.driver": "false"}
    assert labels_of(second, "gpu-b") == {"nvidia.com/gpu.deploy.driver": "true"}
    # containerd's config is the kubelet-tuning step's (docs/kubelet-tuning.md), inside gpu-a-prepare; its
    # inputs did not change, so Pulumi did not run it again.
    assert "gpu-a-prepare" not in {s.resource for s in second.steps}
    assert hosts["gpu-a"].read(DROP_IN) == TOOLKIT_DROP_IN
    assert hosts["gpu-a"].read("/etc/containerd/config.toml") == ours

    # 3. Even when something rewrote config.toml without the import, the step restores it when it runs again
    # (Pulumi runs it when its inputs change, or, as here, when the state is lost); the drop-in stays.
    hosts["gpu-a"].run("printf 'version = 2\\n' > /etc/containerd/config.toml")
    restarts_before = len([c for c in hosts["gpu-a"].calls("systemctl") if c["argv"][:2] == ["restart", "containerd"]])
    state_lost = FleetEngine()
    try:
        third = state_lost.up(values, secret)
    finally:
        state_lost.close()
    third.raise_error()
    assert "changed: /etc/containerd/config.toml written" in step_output(third, "gpu-a", "kubelet-tuning")
    restored = hosts["gpu-a"].read("/etc/containerd/config.toml")
    assert restored == ours and imports_drop_in(restored)
    assert hosts["gpu-a"].read(DROP_IN) == TOOLKIT_DROP_IN
    restarts = [c for c in hosts["gpu-a"].calls("systemctl") if c["argv"][:2] == ["restart", "containerd"]]
    assert len(restarts) == restarts_before + 1
    # The GPU node runs its preflight as its own command; the others look for GPUs as the first part of their
    # preparation (one resource less each), which printed the same summary line.
    assert not [s for s in first.steps if s.resource in ("cp-1-gpu-preflight", "w-cpu-gpu-preflight")]
    for name in ("cp-1", "w-cpu"):
        assert next(iter(step_outputs(prepared(first, name)))) == "gpu-preflight", name
        assert "mlcluster-gpu-preflight: " in step_output(first, name, "gpu-preflight"), name
    preflights = [first.step("gpu-a-gpu-preflight"), prepared(first, "cp-1"), prepared(first, "w-cpu")]
    # Read-only and first: the GPU node's preflight overlaps the other hosts' preparations.
    assert max(p.started for p in preflights) < min(p.ended for p in preflights)
    print(
        "gpu fleet:",
        {
            "up seconds (3, 4, 4 hosts)": [round(r.wall_seconds, 2) for r in (first, second, third)],
            "preflight seconds per host (first up)": {p.resource: round(p.ended - p.started, 2) for p in preflights},
        },
    )


def test_toolkit_drop_in_is_a_valid_containerd_config_that_our_configs_import() -> None:
    """The drop-in used above is a real containerd v2 config, and both our config versions import conf.d."""
    assert containerd_errors(tomllib.loads(TOOLKIT_DROP_IN), 2) == []
    from ..test_config_validation import base

    spec = parse(base())
    for line in ("1.6", "1.7", "2"):
        assert imports_drop_in(containerd_config_toml(spec.kubelet, spec.images, line))


def test_gpu_node_without_a_gpu_fails_its_preflight_by_name(fleet, fleet_engine) -> None:
    hosts = fleet(HostSpec("cp-1"), HostSpec("gpu-x"))
    give_gpus(hosts["cp-1"], [], None)
    give_gpus(hosts["gpu-x"], [NVSWITCH_LSPCI], None)
    nodes = [hosts["cp-1"].node("control-plane"), hosts["gpu-x"].node(gpu={"count": 1, "model": "H200"})]
    values, secret = hosts.stack_values(nodes, gpuOperator={"enabled": True}, acceptance=NO_ACCEPTANCE)
    run = fleet_engine.up(values, secret)
    assert run.error is not None
    message = str(run.error)
    assert "gpu-x-gpu-preflight" in message and "marked as a GPU node but has no NVIDIA GPU" in message
