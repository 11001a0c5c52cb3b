"""Every Helm value key the program sets exists in the pinned upstream chart's values.yaml."""

from __future__ import annotations

import pytest

from .upstream import UPSTREAM, chart_values, unknown_value_keys

# Charts whose values are not in ../shared/fixtures/upstream; each needs a reason to be here.
NO_UPSTREAM_FIXTURE = {
    "tigera-operator": "Calico's chart is not among the shared fixtures; its values are checked by hand",
    "metrics-server": "not among the shared fixtures; we set only `args`, a top-level key of its values.yaml",
    "knative-operator": "not among the shared fixtures; installed with the chart's defaults (no values set)",
}


# A released version whose chart source is not among the fixtures, and the source that stands in for it.
FIXTURE_STANDS_IN = {
    ("nvsentinel", "v1.19.0"): "main-42672ae8",  # no tag was reachable; a main commit after v1.19.0 (SOURCES.md S9)
}

# Keys a chart's templates read that its values.yaml only documents in a comment, with the template reading them.
TEMPLATE_ONLY_KEYS = {
    ("gpu-operator", "dcgmExporter.config"): "templates/dcgm_exporter_config.yaml",
}


def fixture_version(name: str, version: str) -> str:
    return FIXTURE_STANDS_IN.get((name, version), version)


def template_only_keys_read(name: str, version: str, keys: list[str]) -> list[str]:
    """The keys in `keys` that are not template-only keys read by the named template (those stay unknown)."""
    unknown = []
    for key in keys:
        template = TEMPLATE_ONLY_KEYS.get((name, key))
        source = UPSTREAM / "charts" / name / version / template if template else None
        if source is None or f".Values.{key}" not in source.read_text():
            unknown.append(key)
    return unknown


def chart_dir(chart: str) -> str:
    return chart.rstrip("/").rsplit("/", 1)[-1]


@pytest.mark.parametrize("stack", ["onprem", "cloud"])
def test_release_values_exist_upstream(run_stack, stack) -> None:
    run = run_stack(stack)
    checked = 0
    for release in run.of_type("kubernetes:helm.sh/v3:Release"):
        name = chart_dir(release.inputs["chart"])
        version = fixture_version(name, release.inputs["version"])
        fixture = UPSTREAM / "charts" / name / version
        if name in NO_UPSTREAM_FIXTURE:
            continue
        assert fixture.is_dir(), f"{release.name}: no upstream values for {name} {version} (pin a fixture version)"
        unknown = unknown_value_keys(release.raw_inputs.get("values") or {}, chart_values(name, version))
        assert template_only_keys_read(name, version, unknown) == []
        checked += 1
    assert checked >= 4


def test_key_check_catches_a_misspelling() -> None:
    upstream = chart_values("gpu-operator", "v26.7.0")
    assert unknown_value_keys({"driver": {"enabled": False}}, upstream) == []
    assert unknown_value_keys({"driver": {"enabeld": False}}, upstream) == ["driver.enabeld"]
    # A commented-out key counts only when the named template really reads it.
    assert template_only_keys_read("gpu-operator", "v26.7.0", ["dcgmExporter.config"]) == []
    assert template_only_keys_read("gpu-operator", "v26.7.0", ["dcgmExporter.confg"]) == ["dcgmExporter.confg"]
    assert unknown_value_keys({"anything": 1}, chart_values("kserve-crd", "v0.20.0")) == [
        "anything (the chart takes no values)"
    ]
