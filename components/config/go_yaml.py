"""How Kubernetes' YAML reader takes a plain (unquoted) scalar: the grammar a chart template's unquoted value meets.

Helm renders a template to text; whatever applies the text (Helm's kube client, Pulumi's Kubernetes provider, the
API server for a CRD's objects) reads it with sigs.k8s.io/yaml, whose YAML→JSON step resolves plain scalars with
its go-yaml v2 fork (goyaml.v2/resolve.go). That resolver is YAML 1.1 with Go's number syntax, wider than PyYAML's:
`y`, `n`, `on` are booleans, `1e3`, `1_000`, `0o17`, `0b101`, `08` and `1.` are numbers. A value a template writes
unquoted must resolve to the string the user wrote, or the object carries a number, a boolean or null instead.

tests/test_go_yaml.py holds this to the real reader (Helm's `fromYaml`, which is sigs.k8s.io/yaml) over generated
values.
"""

from __future__ import annotations

import re

_BOOLEANS = frozenset(
    "y Y yes Yes YES true True TRUE on On ON n N no No NO false False FALSE off Off OFF".split()  # noqa: SIM905
)
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_SPECIAL_FLOATS = frozenset(
    [".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN"]
)
# strconv.ParseInt(s, 0, 64) after the resolver removed every underscore: sign, then a base prefix or a leading 0.
_GO_INTEGER = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)", re.ASCII)
# resolve.go's yamlStyleFloat, tried when the integer parse failed (a leading-zero decimal like 08 lands here).
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?", re.ASCII)
# strconv.ParseFloat for text that starts with '.': decimal digits, an optional exponent.
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?", re.ASCII)


def _finite(text: str) -> bool:
    # ParseFloat answers ±Inf with ErrRange past float64's range, and the resolver then keeps the text.
    return abs(float(text)) != float("inf")


def _go_integer(plain: str) -> bool:
    """ParseInt(plain, 0, 64), else ParseUint(plain, 0, 64): Go's base prefixes, a leading 0 for octal; int64's
    range with a sign, uint64's without."""
    if not _GO_INTEGER.fullmatch(plain):
        return False
    sign = plain[:1] if plain[:1] in "+-" else ""
    digits = plain[len(sign) :]
    octal = len(digits) > 1 and digits[0] == "0" and digits[1] not in "xXoObB"
    value = int(digits, 8) if octal else int(digits, 0)
    if sign == "-":
        return value <= 2**63
    return value <= (2**63 - 1 if sign else 2**64 - 1)


def plain_scalar_kind(text: str) -> str:
    """What the reader makes of `text` written as a plain scalar: "string", "bool", "null", "number", or
    "unreadable" (an infinity or NaN, which the JSON step cannot write: the whole document is refused)."""
    if text in _BOOLEANS:
        return "bool"
    if text in _NULLS:
        return "null"
    if text in _SPECIAL_FLOATS:
        return "unreadable"
    if text[0] == ".":
        return "number" if _DOT_FLOAT.fullmatch(text) and _finite(text) else "string"
    if text[0] in "+-0123456789":
        # A timestamp (YYYY-…) stays its text when decoded into a JSON value; one that is no date goes on to the
        # number rules, which never match a '-' after four digits: either way text, so no date check here.
        plain = text.replace("_", "")
        if _go_integer(plain):
            return "number"
        if _YAML_STYLE_FLOAT.fullmatch(plain) and _finite(plain):
            return "number"
    return "string"


def reads_back_as_text(text: str) -> bool:
    """True when the reader takes `text`, written unquoted, as the string `text`."""
    return plain_scalar_kind(text) == "string"


def plain_scalar_value(text: str) -> object:
    """The JSON value the reader makes of `text` written as a plain scalar (numbers as JSON has them)."""
    kind = plain_scalar_kind(text)
    if kind == "bool":
        return text[0] in "yYtToO" and text not in ("off", "Off", "OFF")
    if kind == "null":
        return None
    if kind == "string":
        return text
    if kind == "unreadable":
        raise ValueError(f"{text!r} has no JSON value: the reader refuses the document")
    plain = text.replace("_", "")
    if _go_integer(plain):
        sign = -1 if plain.startswith("-") else 1
        digits = plain.lstrip("+-")
        octal = len(digits) > 1 and digits[0] == "0" and digits[1] not in "xXoObB"
        return sign * (int(digits, 8) if octal else int(digits, 0))
    return float(plain)
