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
    ("standalone-cpu-host", FakeGpuHost(lspci=[]), "auto", 0, {"gpuCount": 0, "warnings": []}, None),
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
