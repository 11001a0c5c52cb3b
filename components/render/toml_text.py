"""A small TOML writer for containerd's config: nested tables, strings, numbers, booleans, lists."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def string(value: str) -> str:
    """A TOML basic string holding exactly `value`.

    JSON's escapes are TOML's, except that JSON writes astral characters as surrogate pairs (invalid in
    TOML) and leaves DEL raw (TOML requires it escaped): write UTF-8 and escape DEL."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as a TOML value")


def dumps(document: Mapping[str, Any]) -> str:
    lines: list[str] = []

    def table(path: list[str], data: Mapping[str, Any]) -> None:
        scalars = [(k, v) for k, v in data.items() if not isinstance(v, Mapping)]
        tables = [(k, v) for k, v in data.items() if isinstance(v, Mapping)]
        if path and (scalars or not tables):
            lines.append("")
            lines.append("[" + ".".join(_key(p) for p in path) + "]")
        for k, v in scalars:
            lines.append(f"{_key(k)} = {_value(v)}")
        for k, v in tables:
            table([*path, k], v)

    table([], document)
    return "\n".join(lines).strip() + "\n"
