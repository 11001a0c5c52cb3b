"""kubernetesVersion against the support calendar (components/config/support.py): the minors' ends of life on the
plan's clock, every pinned component's documented Kubernetes range by its version's key, what a node needs of a
minor, and the default at the newest minor every pinned component supports."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from components.config.derived import installed_components
from components.config.load import spec_from_values
from components.config.schema import ConfigError
from components.config.spec import DEFAULT_KUBERNETES_VERSION
from components.config.support import (
    COMPONENT_RANGES,
    END,
    KUBERNETES_MINORS,
    NODE_NEEDS,
    START,
    Installed,
    calendar_notes,
    newest_supported_minor,
    node_settings,
    parse,
    range_problem,
    upgrade_progress,
    version_table,
)
from tests.rendered_stack import stack_values
from tests.test_plan_cli import plan_here

ROOT = Path(__file__).resolve().parent.parent
SECRET_KEYS: set[str] = set()


def _secret(key: str) -> bool:
    return key in SECRET_KEYS


def _everything_on(version: str = DEFAULT_KUBERNETES_VERSION) -> dict[str, Any]:
    """The on-prem example with every layer the calendar has a row for switched on."""
    values, secret = stack_values("onprem")
    SECRET_KEYS.update(secret)
    values = {**values, "kubernetesVersion": version}
    values["gpuOperator"] = {**values.get("gpuOperator", {}), "enabled": True, "dra": True}
    values["network"] = {**values.get("network", {})}
    values["kueue"] = {**values.get("kueue", {}), "enabled": True}
    values["kubeflow"] = {**values.get("kubeflow", {}), "enabled": True}
    return values


def _refusals(values: dict[str, Any]) -> list[str]:
    try:
        spec_from_values(values, _secret)
    except ConfigError as refused:
        return [str(p) for p in refused.problems.errors]
    return []


# --- the calendar's data -------------------------------------------------------------------------------------


def test_every_minor_has_dates_in_order_and_a_source() -> None:
    minors = [m.minor for m in KUBERNETES_MINORS]
    assert minors == sorted(minors) and len(set(minors)) == len(minors)
    for m in KUBERNETES_MINORS:
        assert m.source.strip(), m
        assert m.released < m.end_of_life, m
        assert parse(m.newest_patch) == m.minor, m
        if m.newest_patch_date is not None:
            assert m.released <= m.newest_patch_date <= m.end_of_life or m.newest_patch_date <= date(2026, 12, 5), m
    ends = [m.end_of_life for m in KUBERNETES_MINORS]
    assert ends == sorted(ends), "a newer minor never ends before an older one"
    # The dates the end-of-life warnings rest on, as the release pages state them.
    by_minor = {m.minor: m for m in KUBERNETES_MINORS}
    assert by_minor[(1, 34)].end_of_life == date(2026, 10, 27)
    assert by_minor[(1, 35)].end_of_life == date(2027, 2, 28)


def test_every_component_row_names_its_key_its_range_and_a_source() -> None:
    reference = (ROOT / "README.md").read_text()
    for row in COMPONENT_RANGES:
        assert row.source.strip() and re.search(r"@|CHANGELOG|\.md|\.rst|\.yaml", row.source), row
        assert row.highest is None or row.lowest <= row.highest, row
        assert f"`mlcluster:{row.key}`" in reference, f"{row.key} is not a key of the config reference"


# --- (minor, component version) -> accepted / refused ----------------------------------------------------------

RANGE_CASES = [
    # component, version, minor, outcome, what the message names
    ("NVIDIA GPU Operator", "v26.7.0", (1, 35), None, ""),
    ("NVIDIA GPU Operator", "v26.7.0", (1, 36), None, ""),
    ("NVIDIA GPU Operator", "v26.7.0", (1, 32), "requires", "supports Kubernetes 1.33-1.36"),
    ("NVIDIA GPU Operator", "v26.7.0", (1, 37), "requires", "supports Kubernetes 1.33-1.36"),
    ("NVIDIA Network Operator", "26.4.1", (1, 35), None, ""),
    ("NVIDIA Network Operator", "26.4.1", (1, 36), "requires", "supports Kubernetes 1.31-1.35"),
    ("KEDA", "2.20.2", (1, 36), "requires", "1.33-1.35"),
    ("KEDA", "2.20.2", (1, 32), "requires", "1.33-1.35"),
    ("Envoy Gateway", "v1.9.0", (1, 36), None, ""),
    ("Envoy Gateway", "v1.9.0", (1, 37), "requires", "1.33-1.36"),
    ("cert-manager", "v1.21.1", (1, 32), "requires", "1.33-1.36"),
    ("Kueue", "0.19.2", (1, 29), None, ""),
    ("Kueue", "0.19.2", (1, 28), "requires", ">= 1.29"),
    ("KServe", "v0.20.0", (1, 31), "requires", ">= 1.32"),
    ("Kubeflow Trainer", "2.3.0", (1, 30), "requires", ">= 1.31"),
    ("NVIDIA NVSentinel", "v1.19.0", (1, 33), "requires", ">= 1.34"),
    ("NVIDIA DRA driver for GPUs", "25.8.0", (1, 31), "requires", ">= 1.32"),
    ("kube-prometheus-stack", "88.5.3", (1, 24), "requires", ">= 1.25"),
    ("kubeadm config v1beta4", "kubeadm.k8s.io/v1beta4", (1, 30), "requires", "1.31-1.37"),
    ("kubeadm config v1beta4", "kubeadm.k8s.io/v1beta4", (1, 38), "requires", "1.31-1.37"),
    # Calico lists the minors it is tested against ("may work" otherwise): a warning, naming the release that is.
    ("Calico (tigera-operator)", "v3.30.3", (1, 35), None, ""),
    ("Calico (tigera-operator)", "v3.30.3", (1, 36), "tested", "Calico (tigera-operator) 3.32 is documented for 1.36"),
    ("Calico (tigera-operator)", "v3.30.3", (1, 30), "tested", "no Calico (tigera-operator) release"),
]


@pytest.mark.parametrize(("component", "version", "minor", "outcome", "says"), RANGE_CASES)
def test_a_component_release_against_a_minor(
    component: str, version: str, minor: tuple[int, int], outcome: str | None, says: str
) -> None:
    (row,) = [r for r in COMPONENT_RANGES if r.component == component and r.covers(version)]
    found = range_problem(Installed(component, row.key, version), minor)
    assert (found[0] if found else None) == outcome, found
    if found is not None:
        assert says in found[1] and row.cite() in found[1], found


def test_a_refusal_is_by_the_version_key_and_names_what_fits() -> None:
    values = _everything_on("1.32.13")
    values["gpuOperator"] = {**values["gpuOperator"], "dra": False}
    refused = _refusals(values)
    gpu = [r for r in refused if r.startswith("mlcluster:gpuOperator.version: v26.7.0: NVIDIA GPU Operator 26.7")]
    assert len(gpu) == 1, refused
    assert "supports Kubernetes 1.33-1.36" in gpu[0] and "the stack asks for 1.32" in gpu[0], gpu


def test_a_version_the_calendar_does_not_know_is_said_not_checked() -> None:
    values = _everything_on()
    values["gpuOperator"] = {**values["gpuOperator"], "version": "v25.10.1"}
    from components.config.load import spec_and_warnings

    _, warnings = spec_and_warnings(values, _secret)
    said = [str(w) for w in warnings if w.path == "gpuOperator.version"]
    assert said and "knows the Kubernetes range of NVIDIA GPU Operator 26.7 only" in said[0], said


def test_the_default_is_the_newest_minor_every_pinned_component_supports() -> None:
    spec = spec_from_values(_everything_on(), _secret)
    installed = installed_components(spec)
    assert {i.component for i in installed} >= {"NVIDIA GPU Operator", "Kueue", "Kubeflow Trainer", "KServe"}
    assert parse(DEFAULT_KUBERNETES_VERSION) == newest_supported_minor(installed) == (1, 35)
    newest = {m.minor: m.newest_patch for m in KUBERNETES_MINORS}
    assert newest[(1, 35)] == DEFAULT_KUBERNETES_VERSION, "the default is the newest patch the calendar knows"
    for stack in ROOT.glob("stacks/Pulumi.*.yaml"):
        assert f"kubernetesVersion: {DEFAULT_KUBERNETES_VERSION}" in stack.read_text().replace('"', ""), stack


# --- the plan's clock ----------------------------------------------------------------------------------------


def test_notes_at_each_moment() -> None:
    installed = [Installed("Calico (tigera-operator)", "cluster.cni", "v3.30.3")]
    assert calendar_notes("1.35.8", installed, date(2026, 12, 4)) == []
    (near,) = calendar_notes("1.35.8", installed, date(2027, 1, 15))
    assert near.startswith("Kubernetes 1.35 reaches end of life on 2027-02-28 (in 44 days from 2027-01-15")
    assert "the next minor is 1.36: the pinned Calico (tigera-operator) 3.30 (1.31-1.35) document no 1.36" in near
    (past,) = calendar_notes("1.35.8", installed, date(2027, 3, 1))
    assert past.startswith("Kubernetes 1.35 reached end of life on 2027-02-28 (1 day before 2027-03-01")
    old = calendar_notes("1.34.2", installed, date(2026, 12, 4))
    assert old[0].startswith("Kubernetes 1.34 reached end of life on 2026-10-27 (38 days before 2026-12-04")
    assert "move to 1.35, one minor per up (1.34 -> 1.35" in old[0]
    assert old[1].startswith("1.34.2 is behind 1.34.11, the newest 1.34 patch")
    (newer,) = calendar_notes("1.38.0", installed, date(2026, 12, 4))
    assert "newer than mlcluster's support calendar" in newer
    (managed,) = calendar_notes("1.34.11", installed, date(2026, 12, 4), managed=True)
    assert "the provider's own calendar may support it longer" in managed


def test_two_minors_behind_walks_one_minor_per_up() -> None:
    installed = [Installed("Kueue", "kueue.version", "0.19.2")]  # a floor only: 1.37 is the calendar's newest
    (note,) = calendar_notes("1.33.13", installed, date(2026, 12, 4))
    assert "move to 1.34, one minor per up (1.33 -> 1.34 -> 1.35 -> 1.36 -> 1.37" in note
    assert upgrade_progress("1.33.13", "1.34.11", installed) == (
        "this up upgrades the cluster 1.33.13 -> 1.34.11; then 3 more up(s), one minor each: 1.35 -> 1.36 -> 1.37"
        " (1.37: the newest minor every pinned component supports) (docs/cluster-care.md)"
    )
    assert upgrade_progress("1.34.11", "1.34.11", installed) is None


def _warnings_of(plan_args: list[str]) -> list[str]:
    result = plan_here(*plan_args)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stderr.splitlines() if "mlcluster:kubernetesVersion" in line]


def test_the_onprem_plan_is_in_support_now_and_warns_after_the_end_of_life(tmp_path: Path) -> None:
    assert _warnings_of(["--stack", "onprem", "--out", str(tmp_path / "a"), "--at", "2026-12-04T12:00Z"]) == []
    (after,) = _warnings_of(["--stack", "onprem", "--out", str(tmp_path / "b"), "--at", "2027-03-01T12:00Z"])
    assert "Kubernetes 1.35 reached end of life on 2027-02-28" in after and "the next minor is 1.36" in after


def test_a_stack_on_1_34_is_warned_with_its_end_of_life(tmp_path: Path) -> None:
    stack = (
        (ROOT / "stacks" / "Pulumi.onprem.yaml")
        .read_text()
        .replace(f"kubernetesVersion: {DEFAULT_KUBERNETES_VERSION}", "kubernetesVersion: 1.34.11")
    )
    assert "1.34.11" in stack
    path = tmp_path / "Pulumi.old.yaml"
    path.write_text(stack)
    given = _warnings_of(["--stack-file", str(path), "--out", str(tmp_path / "plan"), "--at", "2026-12-04T12:00Z"])
    assert len(given) == 1, given
    assert given[0].startswith(
        "warning: mlcluster:kubernetesVersion: Kubernetes 1.34 reached end of life on 2026-10-27 (38 days before"
    )
    assert "move to 1.35" in given[0]


def test_an_upgrade_plan_says_where_it_is_on_the_way(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs.json"
    outputs.write_text('{"kubernetesVersion": "1.34.11"}')
    at = ["--at", "2026-12-04T12:00Z"]
    given = _warnings_of(["--stack", "onprem", "--out", str(tmp_path / "p"), *at, "--stack-outputs", str(outputs)])
    assert given == [
        "warning: mlcluster:kubernetesVersion: this up upgrades the cluster 1.34.11 -> 1.35.8; 1.35 is the newest"
        " minor every pinned component supports: the way up ends here (docs/cluster-care.md)"
    ]


# --- what a node needs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("minor", "cgroup_v2", "containerd"),
    [((1, 34), "no", "1.6"), ((1, 35), "yes", "1.6"), ((1, 37), "yes", "1.6"), ((1, 38), "yes", "2.0")],
)
def test_node_needs_by_minor(minor: tuple[int, int], cgroup_v2: str, containerd: str) -> None:
    settings = node_settings(minor)
    assert settings["CGROUP_V2_REQUIRED"] == cgroup_v2 and settings["CONTAINERD_MINIMUM"] == containerd
    assert all(need.source for need in NODE_NEEDS)


# --- the README's table --------------------------------------------------------------------------------------


def test_the_readme_version_table_is_generated_from_the_calendar() -> None:
    readme = (ROOT / "README.md").read_text()
    assert START in readme and END in readme
    current = readme[readme.index(START) + len(START) : readme.index(END)].strip("\n")
    assert current == version_table().strip("\n"), "README is stale: run `make docs`"
