"""Render a chart directory with the real Helm engine (helm-python-sdk: Helm's Go SDK in a wheel, offline; `lookup`
returns nothing), as `helm install <release> -n <namespace>` would. The bundle reads its images from these
renders; the tests render the pinned upstream charts through the same function."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

SEPARATOR = re.compile(r"(?:^|\s*\n)---\s*")
"""Helm's releaseutil.SplitManifests separator: a `---` at the start of the text or of a line, then any whitespace."""

SERVED_BY_EVERY_CLUSTER = ("apiregistration.k8s.io/v1",)
"""What every supported API server serves but Helm's built-in capability list lacks (a chart checking for it would
otherwise render a long-removed version, e.g. prometheus-adapter's APIService as v1beta1)."""


def render_templates(
    path: Path,
    values: Mapping[str, Any] | None,
    *,
    release: str,
    namespace: str,
    kube_version: str | None = None,
    validate: bool = True,
) -> tuple[dict[str, str], list[str]]:
    """(template path -> rendered text, the texts of the chart's crds/ files). `values` is validated against the
    chart's values.schema.json first, as Helm does on install (validate=False: values built to probe a chart)."""
    import helm_python
    from helm_python import _native

    # Loaded afresh for every render: a render prunes the loaded chart's disabled subcharts, so a cached chart
    # would silently keep them out of a later render that enables them.
    loaded = helm_python.Chart.load(path)
    plain = json.loads(json.dumps(dict(values or {})))
    if validate:
        loaded.validate_schema(plain)
    options: dict[str, Any] = {
        "name": release,
        "namespace": namespace,
        "is_install": True,
        "api_versions": list(SERVED_BY_EVERY_CLUSTER),
    }
    if kube_version:
        options["kube_version"] = "v" + kube_version.lstrip("v")
    # Chart.render() does not expose kube_version; the native call it wraps accepts it.
    rendered: dict[str, str] = json.loads(
        _native.call_string("helm_render", loaded._raw(), json.dumps(plain), json.dumps(options))
    )
    return rendered, [str(crd["data"]) for crd in loaded.crds]


def split_manifests(text: str, loader: type[Any] = yaml.CSafeLoader) -> Iterator[dict[str, Any]]:
    """Helm's split rule, then YAML; empty documents dropped, `*List` kinds expanded into their items."""
    for chunk in SEPARATOR.split(text):
        if not chunk.strip():
            continue
        document = yaml.load(chunk, Loader=loader)  # the loaders given are safe ones
        if not isinstance(document, dict):
            continue
        kind = document.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(document.get("items"), list):
            yield from (item for item in document["items"] if isinstance(item, dict))
        else:
            yield document


class ChartUnavailableError(LookupError):
    """The chart's source is not where the render looks (not pulled)."""


def pulled_chart(charts: Path, chart: str, version: str) -> Path:
    """`<charts>/<chart>/<version>/`, or the folder under `<charts>/<chart>/` whose Chart.yaml has that version."""
    exact = charts / chart / version
    if (exact / "Chart.yaml").is_file():
        return exact
    for candidate in sorted((charts / chart).glob("*/Chart.yaml")):
        if str(yaml.safe_load(candidate.read_text()).get("version")) == version:
            return candidate.parent
    raise ChartUnavailableError(f"chart {chart} {version}: not under {charts / chart} (helm pull it there first)")
