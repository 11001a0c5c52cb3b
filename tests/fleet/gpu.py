"""GPUs on fleet hosts: the lspci / nvidia-smi stubs (stubs/gpu.py) on a host's PATH, answering per host."""

from __future__ import annotations

import sys

from .hosts import STUBS, FleetHost


def give_gpus(host: FleetHost, lspci: list[str], nvidia_smi: list[str] | None) -> None:
    """The host shows these NVIDIA PCI functions; nvidia_smi None means no host driver (no nvidia-smi)."""
    host.set(gpu={"lspci": lspci, "nvidiaSmi": nvidia_smi or []})
    tools = ["lspci", *(["nvidia-smi"] if nvidia_smi is not None else [])]
    for tool in tools:
        # The host's /usr/local/bin (its own directory), first on the PATH sshd sets.
        launcher = host.dir / "bin" / tool
        launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -s {STUBS / "gpu.py"} {tool} "$@"\n')
        launcher.chmod(0o755)
