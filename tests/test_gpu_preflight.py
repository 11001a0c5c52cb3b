"""The GPU preflight script on fake hosts (stubbed lspci/nvidia-smi, fake sysfs), and parsing its summary line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.render.gpu_operator import parse_preflight
from components.render.shell import SCRIPTS

from .gpu_host import H200_LSPCI, H200_SMI, NVSWITCH_LSPCI, SMI_FAILS, FakeGpuHost

FIXTURES = Path(__file__).parent / "fixtures"

# (case, host, EXPECT_GPU, expected exit code, expected fields of the summary, a warning that must appear)
CASES: list[tuple[str, FakeGpuHost, str, int, dict[str, Any], str | None]] = [
    (
        "gpu-with-host-driver",
        FakeGpuHost(lspci=[H200_LSPCI], nvidia_smi=[H200_SMI], nouveau_blacklisted=True, kernel_headers=True),
        "true",
        0,
        {
            "gpuCount": 1,
            "driverInstalled": True,
            "driverVersion": "580.159.04",
            "pciSource": "lspci",
            "gpus": ["NVIDIA Corporation GH100 [H200 SXM 141GB]"],
            "nouveauBlacklisted": True,
            "kernelHeaders": True,
        },
        None,
    ),
    (
        "eight-gpus-and-nvswitches-no-driver",
        FakeGpuHost(lspci=[H200_LSPCI] * 8 + [NVSWITCH_LSPCI] * 4),
        "true",
        0,
        {
            "gpuCount": 8,
            "otherNvidiaFunctions": 4,
            "driverInstalled": False,
            "driverVersion": "",
            "kernelHeaders": False,
        },
        None,
    ),
    (
        "nvidia-smi-installed-but-failing",
        FakeGpuHost(lspci=[H200_LSPCI], nvidia_smi=[SMI_FAILS], nvidia_smi_fails=True),
        "true",
        0,
        {"gpuCount": 1, "driverInstalled": False},
        "nvidia-smi is installed but fails: NVIDIA-SMI has failed",
    ),
    (
        "nouveau-loaded-on-a-gpu-host",
        FakeGpuHost(lspci=[H200_LSPCI], nouveau_loaded=True),
        "true",
        0,
        {"nouveauLoaded": True, "nouveauBlacklisted": False},
        "nouveau is loaded",
    ),
    (
        "no-pciutils-sysfs-fallback",
        FakeGpuHost(sysfs_gpus=["0x2335", "0x2335"], nvidia_smi=[H200_SMI, H200_SMI]),
        "true",
        0,
        {"gpuCount": 2, "pciSource": "sysfs", "driverGpus": [H200_SMI, H200_SMI]},
        None,
    ),
    (
        "operator-driver-container-is-not-a-host-driver",
        FakeGpuHost(lspci=[H200_LSPCI], operator_driver=True),
        "true",
        0,
        {"operatorDriver": True, "driverInstalled": False},
        None,
    ),
    (
        "cpu-host-with-an-nvidia-gpu",
        FakeGpuHost(lspci=[H200_LSPCI]),
        "false",
        0,
        {"gpuCount": 1, "expectGpu": "false", "status": "ok"},
        "has 1 NVIDIA GPU(s) but is not marked as a GPU node",
    ),
    (
        "gpu-node-without-a-gpu-fails",
        FakeGpuHost(lspci=[NVSWITCH_LSPCI]),
        "true",
        1,
        {"gpuCount": 0, "status": "error"},
        None,
    ),
    ("standalone-cpu-host", FakeGpuHost(lspci=[]), "auto", 0, {"gpuCount": 0, "warnings": [], "rdmaPorts": []}, None),
    (
        # Four NDR InfiniBand NICs, one of them without link: reported next to the GPUs, the dead one warned.
        "gpu-node-four-rdma-nics-one-down",
        FakeGpuHost(
            lspci=[H200_LSPCI],
            rdma_ports=[
                *((f"mlx5_{i}", "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", f"ibp{24 + i}s0") for i in range(3)),
                ("mlx5_3", "1: DOWN", "10 Gb/sec (4X SDR)", "InfiniBand", "ibp27s0"),
            ],
            peermem_loaded=True,
        ),
        "true",
        0,
        {
            "rdmaPorts": [
                "mlx5_0 port 1: ACTIVE, 400 Gb/sec (4X NDR), InfiniBand, netdev ibp24s0",
                "mlx5_1 port 1: ACTIVE, 400 Gb/sec (4X NDR), InfiniBand, netdev ibp25s0",
                "mlx5_2 port 1: ACTIVE, 400 Gb/sec (4X NDR), InfiniBand, netdev ibp26s0",
                "mlx5_3 port 1: DOWN, 10 Gb/sec (4X SDR), InfiniBand, netdev ibp27s0",
            ],
            "peermemLoaded": True,
        },
        "RDMA port mlx5_3/1 is DOWN (not ACTIVE)",
    ),
    (
        "roce-port",
        FakeGpuHost(
            lspci=[H200_LSPCI], rdma_ports=[("mlx5_0", "4: ACTIVE", "200 Gb/sec (2X HDR)", "Ethernet", "ens1f0np0")]
        ),
        "true",
        0,
        {"rdmaPorts": ["mlx5_0 port 1: ACTIVE, 200 Gb/sec (2X HDR), Ethernet, netdev ens1f0np0"], "warnings": []},
        None,
    ),
]


def run_preflight(host: FakeGpuHost, base: Path, expect_gpu: str | None) -> subprocess.CompletedProcess[str]:
    return run_installed(host.install(base), expect_gpu)


def run_installed(env: dict[str, str], expect_gpu: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(env)
    if expect_gpu is not None:
        env["EXPECT_GPU"] = expect_gpu
    bash = shutil.which("bash")
    assert bash
    script = SCRIPTS / "gpu-preflight.sh"
    return subprocess.run([bash, str(script)], env=env, capture_output=True, text=True, check=False, timeout=60)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_preflight_on_fake_hosts(tmp_path, case) -> None:
    _, host, expect_gpu, rc, fields, warning = case
    result = run_preflight(host, tmp_path, expect_gpu)
    assert result.returncode == rc, result.stderr
    summary_lines = [line for line in result.stdout.splitlines() if line.startswith("mlcluster-gpu-preflight: ")]
    assert len(summary_lines) == 1 and result.stdout.splitlines()[-1] == summary_lines[0]
    summary = json.loads(summary_lines[0].split(": ", 1)[1])
    assert {k: summary[k] for k in fields} == fields
    if warning is not None:
        assert any(warning in w for w in summary["warnings"]), summary["warnings"]
        assert any(line.startswith("warning: ") and warning in line for line in result.stdout.splitlines())
    # Read-only: it reports with ok:/warning: lines and never claims a change.
    assert not [line for line in result.stdout.splitlines() if line.startswith("changed:")]
    parsed = parse_preflight(result.stdout)
    assert parsed.gpu_count == summary["gpuCount"]
    assert list(parsed.rdma_ports) == summary["rdmaPorts"] and parsed.summary()["rdmaPorts"] == summary["rdmaPorts"]


def test_preflight_runs_standalone_with_no_settings(tmp_path) -> None:
    result = run_preflight(FakeGpuHost(lspci=[H200_LSPCI], nvidia_smi=[H200_SMI]), tmp_path, None)
    assert result.returncode == 0, result.stderr
    assert '"expectGpu":"auto"' in result.stdout.splitlines()[-1]
    assert result.stdout.splitlines()[0].startswith("ok: 1 NVIDIA GPU(s)")


def test_preflight_changes_nothing_under_its_root(tmp_path) -> None:
    host = FakeGpuHost(lspci=[H200_LSPCI], nouveau_loaded=True, kernel_headers=True, operator_driver=True)
    env = host.install(tmp_path)
    before = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    assert run_installed(env, "true").returncode == 0
    assert sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before
    assert env["PREFLIGHT_ROOT"].startswith(str(tmp_path))


def test_real_h200_output_parses_to_a_preinstalled_driver() -> None:
    result = parse_preflight((FIXTURES / "gpu-preflight.h200.txt").read_text())
    assert (result.gpu_count, result.driver_version, result.host_driver) == (1, "580.159.04", True)
    assert result.status == "ok" and result.warnings == ()


def test_parse_refuses_output_without_a_summary() -> None:
    with pytest.raises(ValueError, match="mlcluster-gpu-preflight"):
        parse_preflight("ok: something\n")


def test_rdma_nics_the_preflight_did_not_find_ready_are_reported(tmp_path) -> None:
    from components.render.gpu_operator import preflight_report

    from .test_config_validation import base, parse

    values = base()
    values["network"] = {"rdma": {"enabled": True, "nics": {"ifNames": ["ibp24s0", "ibp99s0"]}}}
    spec = parse(values)
    ports = [("mlx5_0", "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand", "ibp24s0")]
    found = parse_preflight(
        run_preflight(FakeGpuHost(lspci=[H200_LSPCI], rdma_ports=ports), tmp_path / "a", "true").stdout
    )
    _, _, warnings = preflight_report(spec.nodes, spec.gpu_operator, spec.network, {"gpu-1": found})
    assert [w for w in warnings if "RDMA" in w or "rdma" in w] == [
        "gpu-1 (gpu-1.lab.example): network.rdma.nics.ifNames ibp99s0 not on any RDMA port of the host"
        " (its RDMA netdevs: ibp24s0)"
    ]
    down = [("mlx5_0", "1: DOWN", "10 Gb/sec (4X SDR)", "InfiniBand", "ibp24s0")]
    dead = parse_preflight(
        run_preflight(FakeGpuHost(lspci=[H200_LSPCI], rdma_ports=down), tmp_path / "b", "true").stdout
    )
    _, _, warnings = preflight_report(spec.nodes, spec.gpu_operator, spec.network, {"gpu-1": dead})
    assert "gpu-1 (gpu-1.lab.example): network.rdma is on but the host has no ACTIVE RDMA port (1 found)" in warnings
    values["network"]["rdma"]["enabled"] = False
    _, _, warnings = preflight_report(
        parse(values).nodes, parse(values).gpu_operator, parse(values).network, {"gpu-1": dead}
    )
    assert not [w for w in warnings if "network.rdma" in w]
