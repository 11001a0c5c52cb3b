"""A fake GPU host for the preflight script: stub lspci / nvidia-smi on PATH and a fake root (sysfs, modprobe.d).

Shared by the local script tests and the fleet scenarios; everything lives under a temp directory.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

# Real lspci -nn line format; the device id (10de:2335, H200) and nvidia-smi line are from a real H200 host.
H200_LSPCI = "17:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] (rev a1)"
NVSWITCH_LSPCI = "05:00.0 Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] [10de:22a3] (rev a1)"
H200_SMI = "NVIDIA H200, 580.159.04, 143771 MiB"
SMI_FAILS = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
# Tools the preflight uses besides the stubs (and sha256sum, with which a node command checks its copy of the
# scripts); PATH holds only these, so the host's own lspci never leaks in.
TOOLS = ("bash", "sed", "awk", "grep", "tr", "uname", "timeout", "cat", "dirname", "head", "env", "sh", "sha256sum")


@dataclass
class FakeGpuHost:
    lspci: list[str] | None = None
    """Lines lspci -nn -d 10de: prints; None: lspci is not installed."""
    nvidia_smi: list[str] | None = None
    """Lines nvidia-smi prints; None: not installed."""
    nvidia_smi_fails: bool = False
    sysfs_gpus: list[str] = field(default_factory=list)
    """PCI device ids (e.g. 0x2335) of NVIDIA display controllers in the fake sysfs."""
    nouveau_loaded: bool = False
    nouveau_blacklisted: bool = False
    kernel_headers: bool = False
    operator_driver: bool = False
    rdma_ports: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    """(device, state, rate, link layer, netdev) of port 1 of each RDMA device, in the kernel's sysfs formats
    (`4: ACTIVE`, `400 Gb/sec (4X NDR)`, `InfiniBand`), as ibv_devinfo reads them."""
    peermem_loaded: bool = False

    def install(self, base: Path) -> dict[str, str]:
        """Writes the stubs and fake root under base; returns the environment the script runs with."""
        bin_dir, root = base / "bin", base / "root"
        bin_dir.mkdir(parents=True, exist_ok=True)
        for tool in TOOLS:
            found = shutil.which(tool)
            assert found, f"{tool} is needed to run the preflight"
            link = bin_dir / tool
            if not link.exists():
                link.symlink_to(found)
        if self.lspci is not None:
            _stub(bin_dir / "lspci", self.lspci, 0)
        if self.nvidia_smi is not None:
            _stub(bin_dir / "nvidia-smi", self.nvidia_smi, 9 if self.nvidia_smi_fails else 0)
        for i, device in enumerate(self.sysfs_gpus):
            dev = root / "sys/bus/pci/devices" / f"0000:{i + 0x17:02x}:00.0"
            dev.mkdir(parents=True, exist_ok=True)
            (dev / "vendor").write_text("0x10de\n")
            (dev / "class").write_text("0x030200\n")
            (dev / "device").write_text(f"{device}\n")
        (root / "sys/bus/pci/devices").mkdir(parents=True, exist_ok=True)
        if self.nouveau_loaded:
            (root / "sys/module/nouveau").mkdir(parents=True, exist_ok=True)
        if self.nouveau_blacklisted:
            (root / "etc/modprobe.d").mkdir(parents=True, exist_ok=True)
            (root / "etc/modprobe.d/blacklist-nouveau.conf").write_text(
                "blacklist nouveau\noptions nouveau modeset=0\n"
            )
        if self.kernel_headers:
            (root / "lib/modules" / os.uname().release / "build").mkdir(parents=True, exist_ok=True)
        for device, state, rate, link_layer, netdev in self.rdma_ports:
            port = root / "sys/class/infiniband" / device / "ports/1"
            port.mkdir(parents=True, exist_ok=True)
            (port / "state").write_text(f"{state}\n")
            (port / "rate").write_text(f"{rate}\n")
            (port / "link_layer").write_text(f"{link_layer}\n")
            (root / "sys/class/infiniband" / device / "device/net" / netdev).mkdir(parents=True, exist_ok=True)
        if self.peermem_loaded:
            (root / "sys/module/nvidia_peermem").mkdir(parents=True, exist_ok=True)
        if self.operator_driver:
            (root / "run/nvidia/driver/usr/bin").mkdir(parents=True, exist_ok=True)
            (root / "run/nvidia/driver/usr/bin/nvidia-smi").write_text("")
        return {"PATH": str(bin_dir), "PREFLIGHT_ROOT": str(root)}


def _stub(path: Path, lines: list[str], rc: int) -> None:
    body = "".join(
        f"printf '%s\\n' '{line.replace(chr(39), chr(39) + chr(92) + chr(39) + chr(39))}'\n" for line in lines
    )
    path.write_text(f"#!/bin/sh\n{body}exit {rc}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
