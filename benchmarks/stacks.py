"""Generated stacks of any size, for benchmarks: 3 control planes behind an endpoint, the rest workers
(one in four a GPU node with 8 GPUs), addresses in 198.18.0.0/15 (never a real network)."""

from __future__ import annotations

import ipaddress
from typing import Any

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
