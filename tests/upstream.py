"""Access to the shared upstream fixtures (../shared/fixtures/upstream), read in place, never copied."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

PROJECT = Path(__file__).resolve().parents[1]
UPSTREAM = PROJECT.parent / "shared" / "fixtures" / "upstream"


def require_upstream() -> Path:
    if not UPSTREAM.is_dir():
        raise AssertionError(f"upstream fixtures not found at {UPSTREAM}: the checkout needs ../shared beside it")
    return UPSTREAM


@cache
def config_schema(name: str) -> dict[str, Any]:
    return json.loads((require_upstream() / "config-schemas" / name).read_text())


def schema_errors(schema: dict[str, Any], document: Any) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(document)]


def kubeadm_errors(document: dict[str, Any]) -> list[str]:
    return schema_errors(config_schema("kubeadm-v1beta4.json")["kinds"][document["kind"]], document)


def kubelet_errors(document: dict[str, Any]) -> list[str]:
    return schema_errors(config_schema("kubelet-config-v1beta1.json")["kinds"]["KubeletConfiguration"], document)


def containerd_errors(document: dict[str, Any], config_version: int) -> list[str]:
    return schema_errors(config_schema(f"containerd-cri-v{config_version}.json")["schema"], document)


@cache
def chart_values(chart: str, version: str) -> Any:
    return yaml.safe_load((require_upstream() / "charts" / chart / version / "values.yaml").read_text()) or {}


def unknown_value_keys(values: Any, upstream: Any, path: str = "") -> list[str]:
    """Keys we set that the pinned chart does not have; an upstream `{}` accepts anything below it."""
    if not isinstance(values, dict):
        return []
    if isinstance(upstream, dict) and not upstream:
        return []
    if not isinstance(upstream, dict):
        return [f"{path or '<root>'} (upstream is not a map)"] if values else []
    missing = []
    for key, value in values.items():
        key_path = f"{path}.{key}" if path else key
        if key not in upstream:
            missing.append(key_path)
        else:
            missing += unknown_value_keys(value, upstream[key], key_path)
    return missing
