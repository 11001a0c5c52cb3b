"""Read the stack's `mlcluster:*` config into the typed Spec, from Pulumi's runtime or a stack file."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import rules
from .schema import (
    NAMESPACE,
    ConfigError,
    ParseContext,
    Problem,
    Problems,
    config_key,
    join_path,
    parse_whole,
    show,
)
from .spec import Spec

SECRET_PLACEHOLDER = "offline-placeholder-for-a-secret"
"""What an encrypted (`secure:`) value reads as offline, where it cannot be decrypted."""


def top_level_key(path: str) -> str:
    for i, ch in enumerate(path):
        if ch in ".[":
            return path[:i]
    return path


def spec_and_warnings(
    values: Mapping[str, Any],
    is_secret_key: Callable[[str], bool],
    is_secret_path: Callable[[str], bool] | None = None,
) -> tuple[Spec, list[Problem]]:
    """The Spec and the warnings about it (what a valid choice costs), or ConfigError with every error.

    `is_secret_key` tells secret top-level keys; `is_secret_path`, where the stack file is at hand, tells
    which values inside them were given as secrets (one `secure:` sibling must not vouch for the others)."""
    problems = Problems()
    ctx = ParseContext(
        problems, is_secret_path or (lambda path: is_secret_key(top_level_key(path))), mode=_given_mode(values)
    )
    spec, whole = parse_whole(Spec, values, "", ctx)
    if whole:
        rules.validate(spec, problems)
    if problems.errors:
        raise ConfigError(problems)
    return spec, problems.warnings


def _given_mode(values: Mapping[str, Any]) -> str | None:
    cluster = values.get("cluster")
    mode = cluster.get("mode", "kubeadm") if isinstance(cluster, Mapping) else "kubeadm"
    return mode if mode in ("kubeadm", "existing") else None


def spec_from_values(
    values: Mapping[str, Any],
    is_secret_key: Callable[[str], bool],
    is_secret_path: Callable[[str], bool] | None = None,
) -> Spec:
    """Build the Spec from top-level values (keys without the namespace) or raise ConfigError with all problems."""
    return spec_and_warnings(values, is_secret_key, is_secret_path)[0]


def _decode(raw: Any) -> Any:
    """Pulumi hands structured config over as JSON text, scalars as plain text."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def spec_from_pulumi() -> tuple[Spec, list[Problem]]:
    """The Spec of the running program's stack (real engine or mocks) and the warnings about it."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    prefix = f"{NAMESPACE}:"
    values: dict[str, Any] = {}
    for full_key, raw in runtime_config.CONFIG.get().items():
        if full_key.startswith(prefix):
            key = full_key[len(prefix) :]
            values[key] = raw if _expects_text(key) else _decode(raw)
    for full_key, raw in runtime_config.get_config_env().items():
        if full_key.startswith(prefix) and full_key[len(prefix) :] not in values:
            key = full_key[len(prefix) :]
            values[key] = raw if _expects_text(key) else _decode(raw)
    is_secret_key: Callable[[str], bool] = lambda key: runtime_config.is_config_secret(prefix + key)  # noqa: E731
    plaintext = stack_file_of(Path.cwd(), pulumi.get_stack())
    return spec_and_warnings(
        values,
        is_secret_key,
        lambda path: is_secret_key(top_level_key(path)) and not (plaintext and plaintext.plaintext_at(path)),
    )


def _expects_text(key: str) -> bool:
    import dataclasses

    for f in dataclasses.fields(Spec):
        if config_key(f) == key:
            return f.type in ("str", str)
    return False


def secure_digests(value: Any, path: str = "") -> dict[str, str]:
    """Key path -> sha256 (12 hex) of each `secure:` leaf's ciphertext."""
    if isinstance(value, Mapping):
        if set(value) == {"secure"}:
            return {path: hashlib.sha256(str(value["secure"]).encode()).hexdigest()[:12]}
        return {k: v for key, item in value.items() for k, v in secure_digests(item, join_path(path, str(key))).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in secure_digests(item, join_path(path, i)).items()}
    return {}


def _replace_secure(value: Any, path: str = "") -> tuple[Any, list[str]]:
    """Replace every `secure:` leaf with a placeholder; return the key paths (as errors name them) it replaced."""
    if isinstance(value, Mapping):
        if set(value) == {"secure"}:
            return SECRET_PLACEHOLDER, [path]
        found: list[str] = []
        out = {}
        for k, v in value.items():
            out[k], inner = _replace_secure(v, join_path(path, str(k)))
            found += inner
        return out, found
    if isinstance(value, list):
        pairs = [_replace_secure(v, join_path(path, i)) for i, v in enumerate(value)]
        return [p[0] for p in pairs], [found for p in pairs for found in p[1]]
    return value, []


class StackFileError(Exception):
    """The stack file itself is unreadable (not YAML, not a map, duplicate keys, ...): `file:line: what`."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__(self.report())

    def report(self) -> str:
        lines = [f"invalid stack file ({len(self.problems)} problem(s)):"]
        lines += [f"  - {self.path}:{p}" for p in self.problems]
        return "\n".join(lines)


@dataclass(frozen=True)
class StackFile:
    config: dict[str, str]
    """Config as Pulumi hands it to the program: values as text (structured ones as JSON)."""
    secret_keys: list[str]
    """Full keys (`mlcluster:ssh`) that hold a secret anywhere inside: secret as a whole to the engine."""
    secret_paths: frozenset[str]
    """The `secure:` values themselves, as key paths (`ssh.privateKey`): what the plaintext check reads."""
    secret_digests: Mapping[str, str] = field(default_factory=dict)
    """Per `secure:` key path, a digest of its encrypted text as the file holds it (never of the secret): a review
    shows that a secret changed (an SSH key rotated) without anything of the secret."""

    def plaintext_at(self, path: str) -> bool:
        """Whether the file holds a plain (unencrypted) string at `path`, e.g. `ssh.privateKey`."""
        parts = re.findall(r"\[(\d+)\]|([^.\[\]]+)", path)
        if not parts or self.is_secret_path(path):
            return False
        (_, top), rest = parts[0], parts[1:]
        try:
            value: Any = json.loads(self.config.get(f"{NAMESPACE}:{top}", "null"))
        except ValueError:
            value = self.config.get(f"{NAMESPACE}:{top}")
        for index, key in rest:
            if index and isinstance(value, list) and int(index) < len(value):
                value = value[int(index)]
            elif key and isinstance(value, Mapping):
                value = value.get(key)
            else:
                return False
        return isinstance(value, str)

    def is_secret_path(self, path: str) -> bool:
        """Whether the value at `path` was given as a secret (itself or a section around it)."""
        return any(path == p or path.startswith((p + ".", p + "[")) for p in self.secret_paths)


_MAX_DEPTH = 64
_MAX_NODES = 100_000
_STR = "tag:yaml.org,2002:str"
_KNOWN_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq", "merge", "timestamp")
)


def _where(node: yaml.Node) -> str:
    return f"{node.start_mark.line + 1}:{node.start_mark.column + 1}"


def _structure_problems(root: yaml.Node) -> list[str]:
    """What Pulumi's YAML reader refuses or the config cannot hold, found on the composed node graph (before
    anything is built, so a recursive alias or an alias bomb is never expanded)."""
    problems: list[str] = []
    visits = 0

    def walk(node: yaml.Node, depth: int, ancestors: tuple[int, ...]) -> None:
        nonlocal visits
        visits += 1
        if visits > _MAX_NODES:
            raise _TooBigError
        if id(node) in ancestors:
            problems.append(f"{_where(node)}: an alias refers to a value that contains it (a recursive alias)")
            return
        if depth > _MAX_DEPTH:
            problems.append(f"{_where(node)}: nested more than {_MAX_DEPTH} levels deep")
            return
        if node.tag not in _KNOWN_TAGS:
            problems.append(f"{_where(node)}: unknown YAML tag {node.tag!r} (write the value in quotes)")
            return
        inner = (*ancestors, id(node))
        if isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item, depth + 1, inner)
        elif isinstance(node, yaml.MappingNode):
            seen: dict[str, yaml.Node] = {}
            for key, value in node.value:
                if key.tag == "tag:yaml.org,2002:merge":
                    walk(value, depth + 1, inner)
                    continue
                if key.tag != _STR or not isinstance(key, yaml.ScalarNode):
                    shown = key.value if isinstance(key, yaml.ScalarNode) else "a list or map"
                    problems.append(
                        f"{_where(key)}: key {shown!r} is not a string (YAML read it as"
                        f" {key.tag.rsplit(':', 1)[-1]}): write it in quotes"
                    )
                elif key.value in seen:
                    problems.append(
                        f"{_where(key)}: duplicate key {key.value!r} (first at line"
                        f" {seen[key.value].start_mark.line + 1}); Pulumi refuses duplicate keys"
                    )
                else:
                    seen[key.value] = key
                walk(value, depth + 1, inner)

    try:
        walk(root, 0, ())
    except _TooBigError:
        problems.append(f"{_where(root)}: more than {_MAX_NODES} values once aliases are expanded")
    return problems


class _TooBigError(Exception):
    pass


def _document(path: Path) -> tuple[Any, yaml.Node | None]:
    """The stack file's one YAML document and its node, or StackFileError naming the file and line."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise StackFileError(
            path, [f"{line}: byte {data[error.start]:#04x} is not UTF-8 (save the file as UTF-8)"]
        ) from None
    loader = yaml.SafeLoader(text)
    try:
        nodes = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                nodes.append(node)
        if len(nodes) > 1:
            raise StackFileError(path, [f"{_where(nodes[1])}: a second YAML document (---): a stack file holds one"])
        if not nodes:
            return {}, None
        problems = _structure_problems(nodes[0])
        if problems:
            raise StackFileError(path, problems)
        return loader.construct_document(nodes[0]), nodes[0]
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{mark.line + 1}:{mark.column + 1}" if mark else "1"
        what = " ".join(filter(None, (error.context, error.problem)))
        raise StackFileError(path, [f"{where}: not valid YAML: {what}"]) from None
    except yaml.YAMLError as error:
        raise StackFileError(path, [f"1: not valid YAML: {error}"]) from None
    except RecursionError:
        raise StackFileError(path, ["1: nested too deeply to read"]) from None
    finally:
        loader.dispose()


def read_stack_document(path: Path) -> StackFile:
    """Config of a stack file as Pulumi would hand it to the program, or StackFileError.

    Encrypted values cannot be decrypted without the CLI; they read as a placeholder and stay secret.
    """
    document, root = _document(path)
    if not isinstance(document, Mapping):
        raise StackFileError(path, [f"1: the file must be a map with a `config:` section, not {show(document)}"])
    section = document.get("config") or {}
    if not isinstance(section, Mapping):
        where = next(_where(v) for k, v in root.value if k.value == "config") if root is not None else "1"
        raise StackFileError(
            path, [f"{where}: `config:` must be a map of keys such as mlcluster:nodes, not {show(section)}"]
        )
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    secret_paths: set[str] = set()
    digests: dict[str, str] = {}
    for full_key, value in section.items():
        namespace, _, key = full_key.partition(":")
        replaced, secrets = _replace_secure(value, key)
        if namespace == NAMESPACE:
            digests.update(secure_digests(value, key))
        config[full_key] = replaced if isinstance(replaced, str) else json.dumps(replaced)
        if secrets:
            secret_keys.append(full_key)
            if namespace == NAMESPACE:
                secret_paths.update(secrets)
    return StackFile(config, secret_keys, frozenset(secret_paths), digests)


def stack_file_of(project: Path, stack: str) -> StackFile | None:
    """The stack file the engine read the config from (Pulumi.yaml's stackConfigDir), if it is readable.

    The engine marks a whole top-level key secret when any value inside is: the program alone cannot tell a
    plaintext `ssh.privateKey` beside a `secure:` sibling. The file can, so a plaintext value it holds at a
    secret-typed path is refused at runtime too (it only ever adds that error, never removes one)."""
    try:
        settings = yaml.safe_load((project / "Pulumi.yaml").read_text()) or {}
        folder = project / str(settings.get("stackConfigDir") or ".")
        return read_stack_document(folder / f"Pulumi.{stack}.yaml")
    except (OSError, yaml.YAMLError, StackFileError, AttributeError):
        return None


def read_stack_file(path: Path) -> tuple[dict[str, str], list[str]]:
    """(config map, secret keys) of a stack file: what the engine is given (see read_stack_document)."""
    stack = read_stack_document(path)
    return stack.config, stack.secret_keys
