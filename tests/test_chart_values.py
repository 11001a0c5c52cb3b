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


def chart_dir(chart: str) -> str:
    return chart.rstrip("/").rsplit("/", 1)[-1]


@pytest.mark.parametrize("stack", ["onprem", "cloud"])
def test_release_values_exist_upstream(run_stack, stack) -> None:
    run = run_stack(stack)
    checked = 0
    for release in run.of_type("kubernetes:helm.sh/v3:Release"):
        name = chart_dir(release.inputs["chart"])
        version = release.inputs["version"]
        fixture = UPSTREAM / "charts" / name / version
        if name in NO_UPSTREAM_FIXTURE:
            continue
        assert fixture.is_dir(), f"{release.name}: no upstream values for {name} {version} (pin a fixture version)"
        assert unknown_value_keys(release.raw_inputs.get("values") or {}, chart_values(name, version)) == []
        checked += 1
    assert checked >= 4


def test_key_check_catches_a_misspelling() -> None:
    upstream = chart_values("gpu-operator", "v26.7.0")
    assert unknown_value_keys({"driver": {"enabled": False}}, upstream) == []
    assert unknown_value_keys({"driver": {"enabeld": False}}, upstream) == ["driver.enabeld"]
    assert unknown_value_keys({"anything": 1}, chart_values("kserve-crd", "v0.20.0")) == [
        "anything (the chart takes no values)"
    ]
