"""Render a pinned chart from ../shared/fixtures/upstream/charts with the real Helm engine (helm-python-sdk).

The engine is Helm's own Go SDK (v4) in a wheel: no binary, no network, `lookup` returns nothing. Charts are read
in place from the shared fixtures, never copied.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.airgap.charts import render_templates
from components.airgap.charts import split_manifests as split_yaml

from .markers import slow_work
from .upstream import ManifestLoader, require_upstream


@dataclass(frozen=True)
class RenderedChart:
    chart: str
    version: str
    objects: tuple[dict[str, Any], ...]
    """Every object the templates render (subcharts included), `*List` items expanded, in template-path order."""
    sources: tuple[str, ...]
    """The template path each object came from, index for index with `objects`."""
    crds: tuple[dict[str, Any], ...]
    """Objects in the `crds/` folders (chart and subcharts): Helm installs them first; `render()` leaves them out."""

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o.get("kind") == kind]

    def named(self, kind: str, name: str) -> dict[str, Any]:
        found = [o for o in self.of_kind(kind) if o.get("metadata", {}).get("name") == name]
        if len(found) != 1:
            raise AssertionError(f"{self.chart} {self.version}: {len(found)} {kind} named {name!r}")
        return found[0]


FIXTURE_STANDS_IN = {("nvsentinel", "v1.19.0"): "main-42672ae8"}
"""Pinned releases whose source is not in the fixtures, and the fixture that stands in for them: NVSentinel's
fixture is a main-branch commit after v1.19.0, no tag being reachable (fixtures' RENDER-CHECK.md, S9)."""


def chart_path(chart: str, version: str) -> Path:
    """`charts/<chart>/<version>/`, or the directory whose Chart.yaml has that version (knative-operator's
    directory is named after its git tag, v1.21.0; the chart is published as 1.21.0)."""
    path = require_upstream() / "charts" / chart / FIXTURE_STANDS_IN.get((chart, version), version)
    if (path / "Chart.yaml").is_file():
        return path
    for candidate in sorted((require_upstream() / "charts" / chart).glob("*/Chart.yaml")):
        if str(yaml.safe_load(candidate.read_text()).get("version")) == version:
            return candidate.parent
    raise AssertionError(f"no pinned chart source at {path}, nor one whose Chart.yaml has version {version}")


def split_manifests(text: str) -> Iterator[dict[str, Any]]:
    """Helm's split rule (components/airgap/charts.py), read as Kubernetes reads YAML (ManifestLoader)."""
    return split_yaml(text, ManifestLoader)


def render_chart(
    chart: str,
    version: str,
    values: Mapping[str, Any] | None = None,
    *,
    release: str,
    namespace: str,
    kube_version: str | None = None,
) -> RenderedChart:
    """Render `charts/<chart>/<version>/` as `helm install <release> -n <namespace>` would, offline.

    `values` is validated against the chart's values.schema.json first (Helm does the same on install).
    `kube_version` ("1.34.2" or "v1.34.2") sets `.Capabilities.KubeVersion`; the SDK's default is v1.36.0.
    """
    slow_work("render")
    rendered, crd_texts = render_templates(
        chart_path(chart, version), values, release=release, namespace=namespace, kube_version=kube_version
    )
    objects: list[dict[str, Any]] = []
    sources: list[str] = []
    for template in sorted(rendered):
        if template.endswith("NOTES.txt"):
            continue
        for document in split_manifests(rendered[template]):
            objects.append(document)
            sources.append(template)
    crds = [d for text in crd_texts for d in split_manifests(text)]
    return RenderedChart(chart, version, tuple(objects), tuple(sources), tuple(crds))
