"""GPUs on fleet hosts: the lspci / nvidia-smi stubs (stubs/gpu.py) on a host's PATH, answering per host."""

from __future__ import annotations

import sys
from typing import Any

from components.config.kueue import CPU_FLAVOR, flavor_name

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


def acceptance_health(cluster: dict[str, Any], model: str, **nodes: dict[str, Any]) -> None:
    """What each GPU node shows an acceptance test in the kubectl stand-in (stubs/acceptance_objects.py): 8 GPUs
    of `model`, a passing diagnostic and 360 GB/s unless given, over what an earlier call set."""
    fixture = cluster.setdefault("acceptance", {}).setdefault("nodes", {})
    for name, state in nodes.items():
        fixture[name] = {"gpus": 8, "model": model, "diag": "pass", "busbw": 360.0, **fixture.get(name, {}), **state}


def kueue_flavors(cluster: dict[str, Any], model: str) -> None:
    """The ResourceFlavors the Kueue layer creates through the Kubernetes provider (which the fleet only records)."""
    objects = cluster.setdefault("objects", {})
    for name in (CPU_FLAVOR, flavor_name(model)):
        objects[f"ResourceFlavor//{name}"] = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": {},
        }
