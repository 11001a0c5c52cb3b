"""Values that parse but mean nothing, or harm: settings without effect in the stack's mode, and `gone` control
planes that would leave etcd without a quorum (issue: hostile input, class 7)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from typing import Any

import pytest

from components.config.load import spec_from_values
from components.config.schema import ConfigError, config_key, join_path
from components.config.spec import Spec

from .test_config_validation import base

SAMPLES = {
    "cluster.controlPlaneEndpoint": "198.18.0.100:6443",
    "cluster.apiAddress": "127.0.0.1:6443",
    "cluster.kubeconfig": "apiVersion: v1\nkind: Config\n",
    "cluster.kubeconfigFrom": "acme/mlcluster/prod",
}
"""A well-formed value for the mode-scoped settings whose default is none."""


def _scoped(cls: type[Any] = Spec, prefix: str = "") -> Iterator[tuple[str, tuple[str, ...], Any]]:
    """(key, modes, a well-formed value) for every setting declared for some modes only, found in the schema."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = join_path(prefix, config_key(f))
        modes = f.metadata.get("modes")
        if modes:
            if key in SAMPLES:
                value: Any = SAMPLES[key]
            elif f.default_factory is not dataclasses.MISSING:
                value = {} if dataclasses.is_dataclass(f.default_factory()) else []
            else:
                value = f.default
            yield key, modes, value
        elif dataclasses.is_dataclass(hints[f.name]):
            yield from _scoped(typing.cast(type[Any], hints[f.name]), key)


SCOPED = list(_scoped())


def existing() -> dict[str, Any]:
    return {"kubernetesVersion": "1.34.2", "cluster": {"mode": "existing", "kubeconfig": SAMPLES["cluster.kubeconfig"]}}


def _problems(values: dict[str, Any]) -> list[str]:
    try:
        spec_from_values(values, lambda key: key in ("ssh", "cluster"))
    except ConfigError as error:
        return [str(p) for p in error.problems.errors]
    return []


def _set(values: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    *parents, last = key.split(".")
    section = values
    for part in parents:
        section = section.setdefault(part, {})
    section[last] = value
    return values


def test_the_schema_declares_mode_scoped_settings_for_both_modes() -> None:
    keys = {key: modes for key, modes, _ in SCOPED}
    assert keys["nodes"] == ("kubeadm",) and keys["ssh"] == ("kubeadm",) and keys["cluster.apiAddress"] == ("kubeadm",)
    assert keys["cluster.kubeconfig"] == ("existing",) and keys["cluster.provider"] == ("existing",)
    assert len(keys) >= 14


@pytest.mark.parametrize(("key", "modes", "value"), SCOPED, ids=[key for key, _, _ in SCOPED])
def test_a_setting_without_effect_in_the_mode_is_refused_where_it_has_none(
    key: str, modes: tuple[str, ...], value: Any
) -> None:
    other, values = ("existing", existing()) if modes == ("kubeadm",) else ("kubeadm", base())
    if key == "cluster.kubeconfig":
        values["cluster"].pop("kubeconfigFrom", None)
    problems = _problems(_set(values, key, value))
    assert f"mlcluster:{key}: has no effect when cluster.mode is {other} (only in mode {modes[0]}): remove it" in (
        problems
    ), problems


@pytest.mark.parametrize(("key", "modes", "value"), SCOPED, ids=[key for key, _, _ in SCOPED])
def test_the_same_setting_is_taken_in_its_own_mode(key: str, modes: tuple[str, ...], value: Any) -> None:
    values = base() if modes == ("kubeadm",) else existing()
    if key == "cluster.kubeconfigFrom":
        values["cluster"].pop("kubeconfig")
    if key in ("nodes", "ssh"):
        return  # the base kubeadm stack has them already; an empty value would be another error
    problems = _problems(_set(values, key, value))
    assert not [p for p in problems if "has no effect" in p], problems


def test_the_readme_reference_says_which_mode_a_setting_is_for() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "| `mlcluster:cluster.apiAddress` |" in readme
    row = next(line for line in readme.splitlines() if line.startswith("| `mlcluster:cluster.apiAddress` |"))
    assert "*Mode `kubeadm` only.*" in row


def _control_planes(count: int, gone: set[int]) -> dict[str, Any]:
    values = base()
    template = values["nodes"][0]
    planes = [
        {**template, "name": f"cp-{i + 1}", "host": f"198.18.0.{20 + i}", **({"gone": True} if i in gone else {})}
        for i in range(count)
    ]
    values["nodes"] = planes + [n for n in values["nodes"] if "control-plane" not in n["roles"]]
    values["cluster"]["controlPlaneEndpoint"] = "198.18.0.100:6443"
    return values


@pytest.mark.parametrize(
    ("count", "gone", "refused"),
    [
        (3, {2}, False),  # 2 of 3 started: quorum 2
        (3, {1, 2}, True),  # 1 of 3: no quorum
        (5, {3, 4}, False),  # 3 of 5: quorum 3
        (5, {2, 3, 4}, True),
        (2, {1}, True),  # 1 of 2: quorum 2 — two members tolerate no failure
        (4, {3}, False),  # 3 of 4: quorum 3
        (4, {2, 3}, True),
    ],
)
def test_gone_control_planes_are_refused_when_etcd_loses_its_quorum(count: int, gone: set[int], refused: bool) -> None:
    problems = [p for p in _problems(_control_planes(count, gone)) if "quorum" in p]
    if refused:
        last = max(gone)
        assert len(problems) == 1 and problems[0].startswith(f"mlcluster:nodes[{last}].gone: leaves"), problems
        assert "Restoring a snapshot" in problems[0]
    else:
        assert problems == []
