"""containerd's config.toml, in config version 2 (containerd 1.6/1.7) and version 3 (containerd 2.x)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.spec import Spec
from . import toml_text
from .images import registry_settings

DROP_IN_GLOB = "/etc/containerd/conf.d/*.toml"
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"


def _merged(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


def containerd_config(spec: Spec, config_version: int) -> dict[str, Any]:
    return _merged(_base_config(spec, config_version), registry_settings(spec, config_version))


def _base_config(spec: Spec, config_version: int) -> dict[str, Any]:
    runc = {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}
    deadline = spec.kubelet.image_pull_progress_deadline
    if config_version == 2:
        return {
            "version": 2,
            "imports": [DROP_IN_GLOB],
            "plugins": {
                "io.containerd.grpc.v1.cri": {
                    "sandbox_image": SANDBOX_IMAGE,
                    "image_pull_progress_timeout": deadline,
                    "containerd": {"runtimes": {"runc": runc}},
                }
            },
        }
    if config_version == 3:
        return {
            "version": 3,
            "imports": [DROP_IN_GLOB],
            "plugins": {
                "io.containerd.cri.v1.images": {
                    "image_pull_progress_timeout": deadline,
                    "pinned_images": {"sandbox": SANDBOX_IMAGE},
                },
                "io.containerd.cri.v1.runtime": {"containerd": {"runtimes": {"runc": runc}}},
            },
        }
    raise ValueError(f"containerd config version {config_version} is not supported (2 or 3)")


def containerd_config_toml(spec: Spec, config_version: int) -> str:
    return toml_text.dumps(containerd_config(spec, config_version))
