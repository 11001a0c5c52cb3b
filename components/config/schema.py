"""A small declarative schema for typed, validated stack configuration.

Each config section is a frozen dataclass whose fields carry their documentation, their config key
(camelCase, as users write it) and optional checks in ``field(metadata=...)``.  One generic parser walks
the dataclasses, so types, ranges, unknown keys ("did you mean") and secrets are handled in one place and
every error names its full key path.  The README's config reference is generated from the same classes.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NewType, TypeVar, Union, get_args, get_origin, get_type_hints

from .redact import redacted

NAMESPACE = "mlcluster"

Check = Callable[[Any], "str | None"]
"""A check returns None when the value is fine, else a message such as 'is not an IP address'."""


LabelText = NewType("LabelText", str)
"""Text whose identity matters (a label value, a topology domain): a YAML number is refused, not turned into text,
because YAML already changed it (`rack: 010` reads as 8 in YAML 1.1, `1e3` as 1000, `0x1f` as 31): only the user
knows what was meant, in quotes."""


class Secret:
    """A config value that must never be printed: ``repr`` hides it, ``reveal`` returns it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret([secret])"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


_MISSING = dataclasses.MISSING


def setting(
    default: Any = _MISSING,
    *,
    doc: str,
    key: str | None = None,
    check: Check | None = None,
    secret: bool = False,
    default_factory: Callable[[], Any] | None = None,
    example: str | None = None,
    modes: tuple[str, ...] | None = None,
) -> Any:
    """Declare one config setting: its default, documentation, user-facing key and check. `modes`: the
    `cluster.mode`s the setting has an effect in; set in another mode, it is refused rather than ignored."""
    metadata = {"doc": doc, "key": key, "check": check, "secret": secret, "example": example, "modes": modes}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def config_key(f: dataclasses.Field[Any]) -> str:
    explicit = f.metadata.get("key")
    if explicit:
        return str(explicit)
    head, *rest = f.name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


QUOTE_LIMIT = 100
"""The most of a value a report line quotes: a longer one is cut there and its length said (a pasted 1 MB value
would otherwise be quoted whole, once per node that has it)."""
_QUOTED = re.compile(r"""(?<![\w'"])(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")(?![\w'"])""")
"""A quoted value as repr() or a check writes it: not an apostrophe inside a word (node's)."""
PATHS_SHOWN = 5
"""A problem reported at many keys names this many of them, then how many more."""


def _shortened(match: re.Match[str]) -> str:
    quoted = match.group()
    if len(quoted) <= QUOTE_LIMIT + 2:
        return quoted
    return f"{quoted[: QUOTE_LIMIT + 1]}…{quoted[0]} ({len(quoted) - 2} characters)"


def shortened(message: str) -> str:
    """The message with every quoted value longer than QUOTE_LIMIT cut to its start."""
    return _QUOTED.sub(_shortened, message)


@dataclass
class Problem:
    path: str
    message: str

    def shown(self) -> str:
        """The message as a report shows it: redacted (a credential in the wrong key is named only), then values
        shortened."""
        return shortened(redacted(self.message))

    def __str__(self) -> str:
        message = self.shown()
        return f"{NAMESPACE}:{self.path}: {message}" if self.path else f"{NAMESPACE}: {message}"


def grouped(problems: list[Problem]) -> list[str]:
    """One line per distinct problem: the same message at several keys (a long value repeated on every node) is
    said once, with its keys."""
    paths: dict[str, list[str]] = {}
    for problem in problems:
        paths.setdefault(problem.shown(), []).append(problem.path)
    lines = []
    for message, where in paths.items():
        if len(where) == 1:
            lines.append(str(Problem(where[0], message)))
            continue
        named = ", ".join(where[1:PATHS_SHOWN])
        more = f" and {len(where) - PATHS_SHOWN} more" if len(where) > PATHS_SHOWN else ""
        lines.append(f"{NAMESPACE}:{where[0]} (also {named}{more}): {message}")
    return lines


@dataclass
class Problems:
    """Every problem found in one pass; errors stop the program, warnings are only reported."""

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def error(self, path: str, message: str) -> None:
        self.errors.append(Problem(path, message))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(Problem(path, message))


class ConfigError(Exception):
    """Raised once, after the whole config was read, carrying every error found."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        super().__init__(self.report())

    def report(self) -> str:
        lines = grouped(self.problems.errors)
        return "\n".join([f"invalid configuration ({len(lines)} problem(s)):", *(f"  - {line}" for line in lines)])


def join_path(base: str, part: str | int) -> str:
    if isinstance(part, int):
        return f"{base}[{part}]"
    return f"{base}.{part}" if base else part


SHOWN_AT_MOST = 80
"""Characters of a map or list that an error shows: enough to recognise it, not a whole section."""


def show(value: Any) -> str:
    """A value as the stack file spells it (JSON is YAML's flow style: true, null, [1, 2]), quoted so that a
    newline or quote in a hostile value cannot forge another line of the report."""
    if isinstance(value, Secret):
        return "[secret]"
    text = json.dumps(_plain(value), ensure_ascii=False, default=str)
    if isinstance(value, (dict, list)) and len(text) > SHOWN_AT_MOST:
        return text[: SHOWN_AT_MOST - 1] + "…"
    return text


def _plain(value: Any) -> Any:
    if isinstance(value, Secret):
        return "[secret]"
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


T = TypeVar("T")


@dataclass
class ParseContext:
    problems: Problems
    secret_paths: Callable[[str], bool]
    """Tells whether the value at a key path was given as a Pulumi secret."""
    mode: str | None = None
    """The stack's `cluster.mode` as given (None when it is not one of the modes: that error is reported alone)."""


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if tp is str or tp is Secret or tp is LabelText:
        return "a string"
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if origin is Literal:
        return "one of " + ", ".join(show(a) for a in get_args(tp))
    if origin in (list, tuple):
        return "a list"
    if origin in (dict, Mapping):
        return "a map"
    if dataclasses.is_dataclass(tp):
        return "a map"
    return str(tp)


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return args[0], True
    return tp, False


_INVALID = object()
INT32 = (-(2**31), 2**31 - 1)
"""Kubernetes API integers (priorities, replicas, ports, ...) are int32: a bigger number is refused by the API."""
HEREDOC_DELIMITER = "MLCLUSTER_STEP_SCRIPT"
"""Ends the here-document a node step travels in (render/shell.py): no setting may contain it."""


def _integer(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    # ASCII digits only: str.isdigit() also accepts '²', which int() refuses.
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
        return int(value)
    return None


def parse_value(tp: Any, value: Any, path: str, ctx: ParseContext) -> Any:
    """Convert ``value`` to ``tp`` or record why not (returning _INVALID)."""
    tp, optional = _strip_optional(tp)
    if value is None:
        if optional:
            return None
        ctx.problems.error(path, f"must be {_type_name(tp)}, got null")
        return _INVALID
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            ctx.problems.error(path, f"must be a map, got {show(value)}")
            return _INVALID
        return parse_section(typing.cast(type[Any], tp), value, path, ctx)
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            hint = _did_you_mean(str(value), [str(a) for a in allowed])
            ctx.problems.error(path, f"{show(value)} must be {_type_name(tp)}{hint}")
            return _INVALID
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            ctx.problems.error(path, f"must be a list, got {show(value)}")
            return _INVALID
        (item_tp, *_) = get_args(tp)
        items = [parse_value(item_tp, v, join_path(path, i), ctx) for i, v in enumerate(value)]
        return _INVALID if any(i is _INVALID for i in items) else tuple(items)
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            ctx.problems.error(path, f"must be a map, got {show(value)}")
            return _INVALID
        _, val_tp = get_args(tp)
        out = {str(k): parse_value(val_tp, v, join_path(path, str(k)), ctx) for k, v in value.items()}
        return _INVALID if any(v is _INVALID for v in out.values()) else types.MappingProxyType(out)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif tp is int:
        number = _integer(value)
        if number is not None and not INT32[0] <= number <= INT32[1]:
            ctx.problems.error(path, f"{number} is outside the 32-bit integers the Kubernetes API accepts")
            return _INVALID
        if number is not None:
            return number
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return _text(value, path, ctx)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
    elif tp is LabelText:
        if isinstance(value, str):
            return _text(value, path, ctx)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            ctx.problems.error(
                path,
                f"is the number {show(value)} in YAML, which may not be what was written (010 reads as 8, 1e3 as"
                " 1000): it becomes text on the node, so write it in quotes exactly as meant",
            )
            return _INVALID
    elif tp is Secret and isinstance(value, str):
        return Secret(value) if _text(value, path, ctx, secret=True) is not _INVALID else _INVALID
    # A value meant to be secret is never echoed, whatever its type.
    got = "something else" if tp is Secret else show(value)
    ctx.problems.error(path, f"must be {_type_name(tp)}, got {got}")
    return _INVALID


def _text(value: str, path: str, ctx: ParseContext, *, secret: bool = False) -> Any:
    """Any text reaches a node step's script, multi-line values (certificates, commands) included."""
    shown = "a secret" if secret else show(value)
    if HEREDOC_DELIMITER in value:
        ctx.problems.error(path, f"{shown} contains {HEREDOC_DELIMITER}, the reserved word that ends a node step")
        return _INVALID
    # No file a setting is written into holds a NUL, and a shell variable cannot: it would be cut there.
    if "\x00" in value:
        ctx.problems.error(path, f"{shown} contains a NUL character")
        return _INVALID
    return value


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in choices}
        if word.lower() in lowered:
            close = [lowered[word.lower()]]
    return f' (did you mean "{close[0]}"?)' if close else ""


def parse_section(cls: type[T], data: Mapping[str, Any], path: str, ctx: ParseContext) -> T:
    """Parse one dataclass section, recording every problem; missing optional keys take defaults."""
    return parse_whole(cls, data, path, ctx)[0]


def parse_whole(cls: type[T], data: Mapping[str, Any], path: str, ctx: ParseContext) -> tuple[T, bool]:
    """The section and whether every field of it parsed (its own checks ran only then, and so may the rules that
    read it with others)."""
    hints = get_type_hints(cls)
    fields = {config_key(f): f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key in data:
        if key not in fields:
            hint = _did_you_mean(str(key), list(fields))
            ctx.problems.error(join_path(path, str(key)), f"unknown key{hint}")
    kwargs: dict[str, Any] = {}
    broken = False
    for key, f in fields.items():
        key_path = join_path(path, key)
        modes = f.metadata.get("modes")
        if key in data and modes and ctx.mode is not None and ctx.mode not in modes:
            ctx.problems.error(
                key_path,
                f"has no effect when cluster.mode is {ctx.mode} (only in mode {' or '.join(modes)}): remove it",
            )
            continue
        if key not in data:
            if f.default is _MISSING and f.default_factory is _MISSING:
                ctx.problems.error(key_path, f"is required ({f.metadata.get('doc', '')})".rstrip(" ()"))
                broken = True
            continue
        value = parse_value(hints[f.name], data[key], key_path, ctx)
        if value is _INVALID:
            broken = True
            continue
        if f.metadata.get("secret") and value is not None and not ctx.secret_paths(key_path):
            ctx.problems.error(
                key_path,
                "must be set as a secret: pulumi config set --secret --path "
                f"'{NAMESPACE}:{key_path}' (the value given is plaintext in the stack file)",
            )
        check = f.metadata.get("check")
        if check is not None and value is not None:
            message = check(value)
            if message:
                ctx.problems.error(key_path, f"{show(value)} {message}")
        kwargs[f.name] = value
    if broken:
        # Build with defaults where possible so cross-field checks still see the valid parts.
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name not in kwargs and f.default is _MISSING and f.default_factory is _MISSING:
                kwargs[f.name] = _placeholder(hints[f.name])
    instance = cls(**kwargs)
    validate = getattr(instance, "validate", None)
    if callable(validate) and not broken:
        validate(path, ctx.problems)
    return instance, not broken


def _placeholder(tp: Any) -> Any:
    tp, optional = _strip_optional(tp)
    if optional:
        return None
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return None
    if origin in (list, tuple):
        return ()
    if origin in (dict, Mapping):
        return types.MappingProxyType({})
    if origin is Literal:
        return get_args(tp)[0]
    return {str: "", LabelText: "", int: 0, float: 0.0, bool: False, Secret: Secret("")}.get(tp)


# --- reference documentation, generated from the same classes ------------------------------------


@dataclass(frozen=True)
class ReferenceRow:
    key: str
    type_name: str
    default: str
    doc: str


def _short_type(tp: Any) -> str:
    tp, optional = _strip_optional(tp)
    origin = get_origin(tp)
    if origin is Literal:
        name = " \\| ".join(f"`{a}`" for a in get_args(tp))
    elif origin in (list, tuple):
        (item,) = get_args(tp)[:1]
        name = f"list of {_short_type(item)}"
    elif origin in (dict, Mapping) or dataclasses.is_dataclass(tp):
        name = "map"
    else:
        names = {str: "string", LabelText: "string", int: "integer", float: "number", bool: "boolean"}
        name = names.get(tp) or ("secret string" if tp is Secret else str(tp))
    return name + (" (optional)" if optional else "")


def _show_default(f: dataclasses.Field[Any]) -> str:
    if f.default is _MISSING and f.default_factory is _MISSING:
        return "required"
    value = f.default if f.default is not _MISSING else f.default_factory()  # type: ignore[misc,operator]
    if dataclasses.is_dataclass(value) or value in ((), None) or value == {}:
        return "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Mapping):
        return "`" + ", ".join(f"{k}={v}" for k, v in value.items()) + "`"
    if isinstance(value, tuple):
        return "`[" + ", ".join(str(item) for item in value) + "]`"  # as a stack file writes a list
    return f"`{value}`"


def reference_rows(cls: type[Any], prefix: str = "") -> list[ReferenceRow]:
    rows: list[ReferenceRow] = []
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = join_path(prefix, config_key(f))
        tp, _ = _strip_optional(hints[f.name])
        doc = f.metadata.get("doc", "")
        if f.metadata.get("modes"):
            doc += f" *Mode {' or '.join(f'`{m}`' for m in f.metadata['modes'])} only.*"
        rows.append(ReferenceRow(key, _short_type(hints[f.name]), _show_default(f), doc))
        origin = get_origin(tp)
        if origin in (list, tuple):
            (item,) = get_args(tp)[:1]
            if dataclasses.is_dataclass(item):
                rows += reference_rows(typing.cast(type[Any], item), key + "[]")
        elif dataclasses.is_dataclass(tp):
            rows += reference_rows(typing.cast(type[Any], tp), key)
    return rows
