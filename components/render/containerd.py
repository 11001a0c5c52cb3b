"""containerd's config.toml: config version 2 (containerd 1.6/1.7) and version 3 (containerd 2.x).

One node's file: the pull deadline where the line has it (1.7: CRI plugin table, 2.x: images plugin table;
1.6 has none), `root` on the node's image disk when it has one, and the registry settings mirrors need.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.images import ImagesSpec
from ..config.kubelet import KubeletSpec, effective_kubelet
from ..config.nodes import NodeSpec
from . import toml_text
from .images import containerd_root, registry_settings
from .kubelet_placement import CONTAINERD_CONFIG_VERSION, ContainerdLine

DROP_IN_GLOB = "/etc/containerd/conf.d/*.toml"
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"


def _merged(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


def containerd_config(
    kubelet: KubeletSpec, images: ImagesSpec, line: ContainerdLine, node: NodeSpec | None = None
) -> dict[str, Any]:
    """The file for one node (its merged tuning, its image disk), or the cluster's when node is None."""
    tuning = effective_kubelet(kubelet, node.kubelet if node else None)
    root = containerd_root(node) if node is not None and node.image_disk is not None else None
    return _merged(_base_config(tuning, line, root), registry_settings(images, CONTAINERD_CONFIG_VERSION[line]))


def _base_config(tuning: KubeletSpec, line: ContainerdLine, root: str | None) -> dict[str, Any]:
    runc = {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}
    deadline = tuning.image_pull_progress_deadline
    top: dict[str, Any] = {"version": CONTAINERD_CONFIG_VERSION[line]}
    if root is not None:
        top["root"] = root
    top["imports"] = [DROP_IN_GLOB]
    if line in ("1.6", "1.7"):
        cri: dict[str, Any] = {"sandbox_image": SANDBOX_IMAGE}
        if line == "1.7":
            cri["image_pull_progress_timeout"] = deadline
        cri["containerd"] = {"runtimes": {"runc": runc}}
        return top | {"plugins": {"io.containerd.grpc.v1.cri": cri}}
    return top | {
        "plugins": {
            "io.containerd.cri.v1.images": {
                "image_pull_progress_timeout": deadline,
                "pinned_images": {"sandbox": SANDBOX_IMAGE},
            },
            "io.containerd.cri.v1.runtime": {"containerd": {"runtimes": {"runc": runc}}},
        },
    }


def containerd_config_toml(
    kubelet: KubeletSpec, images: ImagesSpec, line: ContainerdLine, node: NodeSpec | None = None
) -> str:
    return toml_text.dumps(containerd_config(kubelet, images, line, node))
