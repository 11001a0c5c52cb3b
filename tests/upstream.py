"""Access to the shared upstream fixtures (../shared/fixtures/upstream), read in place, never copied."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from components.config.go_yaml import plain_scalar_value

PROJECT = Path(__file__).resolve().parents[1]
UPSTREAM = PROJECT.parent / "shared" / "fixtures" / "upstream"


GO_PLAIN = "tag:mlcluster,2026:go-plain"


class ManifestLoader(yaml.CSafeLoader):
    """Manifests as Kubernetes reads them: libyaml's parser (the pure-Python one spent most of a chart render's
    time scanning), then plain scalars resolved by sigs.k8s.io/yaml's rules (components/config/go_yaml.py), not
    PyYAML's YAML 1.1 ones: `y`, `on`, `1e3`, `0o17`, `1_000` are what Kubernetes makes of them, a date stays text,
    and keys are strings as in the JSON the API server receives. A stand-in reading kinder than the cluster would
    let a value a template writes unquoted pass every schema check here and fail on apply."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0] and value != "<<":
            return GO_PLAIN
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep=deep)
        return {_json_key(key): value for key, value in mapping.items()}


def _json_key(key: Any) -> str:
    # sigs.k8s.io/yaml writes a non-string key as the text of its value (true, 1, null).
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return key if isinstance(key, str) else str(key)


def _go_plain(loader: ManifestLoader, node: yaml.ScalarNode) -> Any:
    try:
        return plain_scalar_value(node.value)
    except ValueError as error:
        raise yaml.constructor.ConstructorError(None, None, str(error), node.start_mark) from None


ManifestLoader.add_constructor(GO_PLAIN, _go_plain)


def require_upstream() -> Path:
    if not UPSTREAM.is_dir():
        raise AssertionError(f"upstream fixtures not found at {UPSTREAM}: the checkout needs ../shared beside it")
    return UPSTREAM


@cache
def config_schema(name: str) -> dict[str, Any]:
    return dict(json.loads((require_upstream() / "config-schemas" / name).read_text()))


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
    return dict(yaml.load((require_upstream() / "crds" / path).read_text(), Loader=ManifestLoader))


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


_TEMPLATE_COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.DOTALL)


@cache
def chart_crd(chart: str, version: str, name: str) -> dict[str, Any]:
    """A CRD a pinned chart ships only as a template (templates/crd/), read without Helm: the template's directives
    touch only metadata (labels, annotations), so dropping their lines leaves the CRD's spec as served."""
    template = require_upstream() / "charts" / chart / version / "templates" / "crd" / name
    text = _TEMPLATE_COMMENT.sub("", template.read_text())
    return dict(yaml.load("\n".join(line for line in text.splitlines() if "{{" not in line), Loader=ManifestLoader))


def kueue_crds() -> dict[tuple[str, str], dict[str, Any]]:
    """The CRDs of the pinned Kueue chart (its templates/crd), by (group, kind)."""
    from components.config.kueue import KueueSpec

    version = str(KueueSpec.__dataclass_fields__["version"].default)
    folder = require_upstream() / "charts" / "kueue" / version / "templates" / "crd"
    crds = [chart_crd("kueue", version, path.name) for path in sorted(folder.glob("*.yaml"))]
    return {(crd["spec"]["group"], crd["spec"]["names"]["kind"]): crd for crd in crds}
