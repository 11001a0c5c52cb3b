"""Generated stacks of any size, for benchmarks: 3 control planes behind an endpoint, the rest workers
(one in four a GPU node with 8 GPUs), addresses in 198.18.0.0/15 (never a real network)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import yaml

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG1sY2x1c3Rlci1iZW5jaG1hcmstaG9zdC1rZXktMDAw"
BASE = ipaddress.ip_address("198.18.0.10")


def generated_values(nodes: int) -> dict[str, Any]:
    control_planes = min(3, nodes)
    entries: list[dict[str, Any]] = []
    for index in range(nodes):
        node: dict[str, Any] = {
            "name": f"cp-{index + 1}" if index < control_planes else f"node-{index + 1}",
            "host": str(BASE + index),
            "roles": ["control-plane"] if index < control_planes else ["worker"],
            "hostKey": HOST_KEY,
        }
        if index >= control_planes and index % 4 == 0:
            node["gpu"] = {"count": 8, "model": "H100-SXM-80GB"}
        entries.append(node)
    return {
        "kubernetesVersion": "1.34.2",
        "cluster": {"name": f"bench-{nodes}", "controlPlaneEndpoint": "198.18.255.1:6443"},
        "ssh": {"user": "root", "privateKey": "benchmark-placeholder-key"},
        "nodes": entries,
    }


ONPREM_STACK = Path(__file__).resolve().parents[1] / "stacks" / "Pulumi.onprem.yaml"


def scaled_onprem_config(nodes: int) -> dict[str, Any]:
    """The on-prem example (every layer on) with its control planes and `nodes` in all: the example's workers
    repeated in turn (CPU and GPU pools, image disks), each under a new name and address."""
    config: dict[str, Any] = yaml.safe_load(ONPREM_STACK.read_text())["config"]
    example = config["mlcluster:nodes"]
    control_planes = [n for n in example if "control-plane" in n["roles"]][:nodes]
    workers = [n for n in example if "control-plane" not in n["roles"]]
    scaled = list(control_planes)
    for index in range(nodes - len(control_planes)):
        template = workers[index % len(workers)]
        pool = template["name"].rsplit("-", 1)[0]
        scaled.append({**template, "name": f"{pool}-{index + 1}", "host": str(BASE + index)})
    config["mlcluster:nodes"] = scaled
    return config
