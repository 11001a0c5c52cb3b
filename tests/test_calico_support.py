"""The pinned Calico against the Kubernetes minors its release is tested with (Calico's system requirements): a
minor outside them is warned at preview, naming kubernetesVersion and what to do."""

from __future__ import annotations

import pytest

from components.render.cni import CALICO_TESTED_KUBERNETES, CALICO_VERSION, calico_untested_problem


@pytest.mark.parametrize(
    ("version", "warned", "says"),
    [
        ("1.31.4", False, ""),
        ("1.33.1", False, ""),
        ("1.34.2", True, "Calico v3.31 is tested against 1.34"),
        ("1.30.9", True, "(1.31, 1.32, 1.33;"),
        ("1.36.0", True, "set cluster.cni: none"),
    ],
)
def test_a_minor_outside_the_pinned_calicos_tested_ones_is_named(version: str, warned: bool, says: str) -> None:
    problem = calico_untested_problem(version)
    assert (problem is not None) == warned, problem
    if warned:
        assert problem is not None and problem.startswith(version.rsplit(".", 1)[0]) and says in problem


def test_the_pinned_release_has_its_tested_minors() -> None:
    assert ".".join(CALICO_VERSION.split(".")[:2]) in CALICO_TESTED_KUBERNETES


def test_the_example_stack_states_it_at_preview(run_stack) -> None:
    given = run_stack("onprem").run.warnings
    assert any(w.startswith("mlcluster:kubernetesVersion: 1.34 is not among") for w in given), given
