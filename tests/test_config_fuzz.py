"""Property: random mutations of a valid config never crash; they parse or give key-path errors."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.config.load import spec_from_values
from components.config.schema import ConfigError

from .conftest import stack_values
from .markers import examples

ONPREM, ONPREM_SECRET = stack_values("onprem")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(["10.0.0.300", "1.34.2", "30m", "control-plane", "kubeadm", "H100", "/dev/sdb", "10%"]),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=12), children, max_size=3)
    ),
    max_leaves=6,
)


def paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(document, dict):
        for key, value in document.items():
            found += paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += paths(value, (*prefix, index))
    return found


ALL_PATHS = paths(ONPREM)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(ALL_PATHS), values, st.booleans()), min_size=1, max_size=4))
def test_mutations_parse_or_report_key_paths(mutations: list[tuple[tuple[Any, ...], Any, bool]]) -> None:
    document = copy.deepcopy(ONPREM)
    for path, value, remove in mutations:
        target: Any = document
        try:
            for part in path[:-1]:
                target = target[part]
            if remove and isinstance(target, dict):
                target.pop(path[-1], None)
            else:
                target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation replaced a parent: nothing to mutate here
    try:
        spec_from_values(document, lambda key: key in ONPREM_SECRET)
    except ConfigError as error:
        lines = [str(p) for p in error.problems.errors]
        assert lines, "a ConfigError must carry at least one problem"
        assert all(line.startswith("mlcluster:") for line in lines), lines
