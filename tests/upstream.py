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


class ManifestLoader(yaml.CSafeLoader):
    """The safe loader on libyaml's parser (the pure-Python one spent most of a chart render's time scanning; every
    upstream YAML file loads identically with both). PyYAML resolves a plain `=` to the YAML 1.1 "value" tag but has
    no constructor for it; the Prometheus Operator CRDs have `- =` in an enum. Read it as the string it is."""


ManifestLoader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


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
        # Below the root, `{}` is a free-form map; at the root it is a chart that takes no values.
        return [f"{k} (the chart takes no values)" for k in values] if not path else []
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


@cache
def _crd(path: str) -> dict[str, Any]:
    return yaml.load((require_upstream() / "crds" / path).read_text(), Loader=ManifestLoader)


def crd_errors(document: dict[str, Any], crd_path: str) -> list[str]:
    """Validate a custom resource against its CRD's schema for the document's apiVersion.

    crd_path is relative to crds/, e.g. "kueue/v0.19.2/kueue.x-k8s.io_clusterqueues.yaml".
    """
    return custom_resource_errors(document, _crd(crd_path), crd_path)


def custom_resource_errors(document: dict[str, Any], crd: dict[str, Any], source: str) -> list[str]:
    """Validate a custom resource against a CRD document (source names it in the errors)."""
    group, _, version = document["apiVersion"].rpartition("/")
    if group != crd["spec"]["group"] or document["kind"] != crd["spec"]["names"]["kind"]:
        return [f"<root>: {document['apiVersion']} {document['kind']} is not what {source} defines"]
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    if version not in versions:
        return [f"<root>: version {version} not served by {source} (has {sorted(versions)})"]
    schema = versions[version]["schema"]["openAPIV3Schema"]
    # Kubernetes prunes unknown fields; we reject them instead, so a typo cannot be silently dropped.
    return schema_errors(_closed(schema), document)


def _closed(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    out = {k: _closed(v) if k not in ("properties", "patternProperties") else v for k, v in schema.items()}
    if "properties" in schema:
        out["properties"] = {k: _closed(v) for k, v in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if "items" in schema:
        out["items"] = _closed(schema["items"])
    if isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = _closed(schema["additionalProperties"])
    return out


def kubernetes_errors(document: dict[str, Any], kubernetes_version: str) -> list[str]:
    """Strict validation of a core manifest (Job, Deployment, HPA, ...) for a Kubernetes version."""
    import kubernetes_validate
    import kubernetes_validate.utils

    if not hasattr(kubernetes_validate.utils.schema_contents, "cache_info"):
        # It reads and parses its schema files on every call (its ~2 MB _definitions.json included): most of a
        # rendered chart's validation time. The parsed schemas are only read, so one copy per file serves.
        kubernetes_validate.utils.schema_contents = cache(kubernetes_validate.utils.schema_contents)
    minor = ".".join(kubernetes_version.lstrip("v").split(".")[:2])
    try:
        kubernetes_validate.validate(document, minor, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [str(error.message)]
    return []
