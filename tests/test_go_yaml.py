"""The Go YAML reading (components/config/go_yaml.py) held to the real reader: Helm's `fromYaml`, which is
sigs.k8s.io/yaml, the reader of every manifest Helm or the Kubernetes provider applies.

A throwaway chart in the test's own directory reads each generated text as `v: <text>` and writes back the JSON
value Go made of it; the port must say the same for every text both parsers take as one plain scalar.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml
from helm_python import _native
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.config.go_yaml import plain_scalar_kind, plain_scalar_value, reads_back_as_text
from components.config.gpu import chart_selector

from .markers import slow_work

pytestmark = pytest.mark.render

_READER_TEMPLATE = """\
{{- range $i, $text := .Values.texts }}
{{- $read := fromYaml (printf "v: %s" $text) }}
{{ $i }}: {{ list (hasKey $read "Error") (kindOf (get $read "v")) (get $read "v") | toJson | quote }}
{{- end }}
"""
_GO_KINDS = {"string": "string", "bool": "bool", "float64": "number", "invalid": "null"}


def _go_reads(chart_dir: Path, texts: list[str]) -> list[tuple[bool, str, Any]]:
    """(the reader failed, its kind, its value) per text, from one render of the throwaway chart."""
    slow_work("render")
    chart = helm_python.Chart.load(chart_dir)
    options = {"name": "reader", "namespace": "default", "is_install": True}
    rendered = json.loads(
        _native.call_string("helm_render", chart._raw(), json.dumps({"texts": texts}), json.dumps(options))
    )
    rows = yaml.safe_load(next(iter(rendered.values()))) or {}
    out = []
    for i in range(len(texts)):
        failed, kind, value = json.loads(rows[i])
        out.append((failed, _GO_KINDS[kind], value))
    return out


@pytest.fixture(scope="module")
def reader_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chart = tmp_path_factory.mktemp("go-yaml-reader")
    (chart / "templates").mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: go-yaml-reader\nversion: 0.1.0\n")
    (chart / "templates" / "read.yaml").write_text(_READER_TEMPLATE)
    return chart


def _same_value(ours: object, go: object) -> bool:
    if isinstance(ours, bool) or isinstance(go, bool) or ours is None or go is None:
        return type(ours) is type(go) and ours == go
    if isinstance(ours, (int, float)) and isinstance(go, (int, float)):
        return math.isclose(float(ours), float(go), rel_tol=1e-15, abs_tol=0.0)
    return ours == go


def _one_plain_scalar(text: str) -> bool:
    """`v: <text>` is one key whose value is the plain, untagged scalar `text` (a `!` first is a tag, a `:` last
    another mapping): the structure is the YAML parser's, the scalar's type is what is tested."""
    try:
        events = list(yaml.parse(f"v: {text}"))
    except yaml.YAMLError:
        return False
    scalars = [e for e in events if isinstance(e, yaml.ScalarEvent)]
    return len(scalars) == 2 and scalars[1].value == text and scalars[1].implicit[0] and scalars[1].tag is None


# What numbers, booleans, nulls and label selectors are made of; no space, so the text stays one plain scalar.
NUMBERISH = st.text(alphabet="0123456789+-._eExXoObByYnNtTfFlLsSuUrRaA~:/=!", min_size=1, max_size=10)
SHAPED = st.sampled_from(
    ["1e3", "y", "0o17", "1_000", "08", "0x1F", "0b101", ".5", "1.", "-0b11", "+1", ".inf", "-.Inf", ".NaN", "~",
     "null", "Off", "1e400", "0x1p-2", "2001-01-01", "2001-13-45", "99999999999999999999", "9223372036854775808",
     "-9223372036854775809", "0x10000000000000000", "1__0", "_1", "1:20", "0o", "abc", "a=b", "!a", "<<", "="]
)  # fmt: skip


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(NUMBERISH, SHAPED), min_size=150, max_size=150))
def test_the_port_reads_plain_scalars_as_go_does(reader_chart: Path, texts: list[str]) -> None:
    texts = [t for t in texts if _one_plain_scalar(t)]
    go = _go_reads(reader_chart, texts)
    disagree = []
    for text, (failed, kind, value) in zip(texts, go, strict=True):
        if failed or plain_scalar_kind(text) == "unreadable":
            if not (failed and plain_scalar_kind(text) == "unreadable"):
                disagree.append((text, f"Go refused the document: {failed}, port: {plain_scalar_kind(text)}"))
            continue
        if kind != plain_scalar_kind(text) or not _same_value(plain_scalar_value(text), value):
            ours = (plain_scalar_kind(text), plain_scalar_value(text))
            disagree.append((text, f"Go: {kind} {value!r}, port: {ours}"))
    assert not disagree, disagree


def test_the_values_the_issue_found_read_as_go_reads_them(reader_chart: Path) -> None:
    texts = ["1e3", "y", "0o17", "kueue.x-k8s.io/podset", "app=web", "2001-01-01"]
    go = _go_reads(reader_chart, texts)
    assert [kind for _, kind, _ in go] == ["number", "bool", "number", "string", "string", "string"]
    assert [reads_back_as_text(t) for t in texts] == [False, False, False, True, True, True]


# Label selectors as `kubectl -l` writes them: keys, values, operators; a few Go-ambiguous words among them.
_WORD = st.one_of(
    st.from_regex(r"[a-z0-9]([a-z0-9._-]{0,6}[a-z0-9])?", fullmatch=True),
    st.sampled_from(["1e3", "y", "n", "on", "0o17", "1_000", "08", "true", "null", "0x1F", "1.5"]),
)
_TERM = st.one_of(
    _WORD,
    st.builds(lambda w: "!" + w, _WORD),
    st.builds(lambda k, op, v: f"{k}{op}{v}", _WORD, st.sampled_from(["=", "==", "!="]), _WORD),
    st.builds(lambda k, vs: f"{k} in ({','.join(vs)})", _WORD, st.lists(_WORD, min_size=1, max_size=3)),
)
SELECTORS = st.lists(_TERM, min_size=1, max_size=3).map(",".join)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(SELECTORS, min_size=100, max_size=100))
def test_a_selector_the_check_accepts_reaches_the_cluster_as_written(reader_chart: Path, selectors: list[str]) -> None:
    """The GPU Operator's ClusterPolicy template writes podSelector unquoted: accepted ⇔ Go reads back the text."""
    # One the check must take and one it must refuse ride along, so the property is not met by refusing all.
    selectors = ["kueue.x-k8s.io/podset,!spot", "1e3", *selectors]
    go = _go_reads(reader_chart, selectors)
    wrong = []
    for selector, (failed, kind, value) in zip(selectors, go, strict=True):
        reaches = not failed and kind == "string" and value == selector
        accepted = chart_selector(selector) is None
        if accepted and not reaches:
            wrong.append((selector, "accepted, but Go reads", kind, value))
    assert not wrong, wrong
    assert chart_selector(selectors[0]) is None
    assert chart_selector(selectors[1]) is not None
