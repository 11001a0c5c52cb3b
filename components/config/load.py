"""Read the stack's `mlcluster:*` config into the typed Spec, from Pulumi's runtime or a stack file."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from .schema import (
    NAMESPACE,
    ConfigError,
    ParseContext,
    Problem,
    Problems,
    config_key,
    parse_section,
)
from .spec import Spec

SECRET_PLACEHOLDER = "offline-placeholder-for-a-secret"
"""What an encrypted (`secure:`) value reads as offline, where it cannot be decrypted."""


def top_level_key(path: str) -> str:
    for i, ch in enumerate(path):
        if ch in ".[":
            return path[:i]
    return path


def spec_and_warnings(values: Mapping[str, Any], is_secret_key: Callable[[str], bool]) -> tuple[Spec, list[Problem]]:
    """The Spec and the warnings about it (what a valid choice costs), or ConfigError with every error."""
    problems = Problems()
    ctx = ParseContext(problems, lambda path: is_secret_key(top_level_key(path)))
    spec = parse_section(Spec, values, "", ctx)
    if problems.errors:
        raise ConfigError(problems)
    return spec, problems.warnings


def spec_from_values(values: Mapping[str, Any], is_secret_key: Callable[[str], bool]) -> Spec:
    """Build the Spec from top-level values (keys without the namespace) or raise ConfigError with all problems."""
    return spec_and_warnings(values, is_secret_key)[0]


def _decode(raw: Any) -> Any:
    """Pulumi hands structured config over as JSON text, scalars as plain text."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def spec_from_pulumi() -> Spec:
    """The Spec of the running program's stack (real engine or mocks); warnings go to the engine's log."""
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
    spec, warnings = spec_and_warnings(values, lambda key: runtime_config.is_config_secret(prefix + key))
    for warning in warnings:
        pulumi.log.warn(str(warning))
    return spec


def _expects_text(key: str) -> bool:
    import dataclasses

    for f in dataclasses.fields(Spec):
        if config_key(f) == key:
            return f.type in ("str", str)
    return False


def _replace_secure(value: Any) -> tuple[Any, bool]:
    """Replace every `secure:` leaf with a placeholder; report whether there was one."""
    if isinstance(value, Mapping):
        if set(value) == {"secure"}:
            return SECRET_PLACEHOLDER, True
        found = False
        out = {}
        for k, v in value.items():
            out[k], inner = _replace_secure(v)
            found = found or inner
        return out, found
    if isinstance(value, list):
        pairs = [_replace_secure(v) for v in value]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    return value, False


def read_stack_file(path: Path) -> tuple[dict[str, str], list[str]]:
    """Config of a stack file as Pulumi would hand it to the program: (config map, secret keys).

    Encrypted values cannot be decrypted without the CLI; they read as a placeholder and stay secret.
    """
    document = yaml.safe_load(path.read_text()) or {}
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for full_key, value in (document.get("config") or {}).items():
        replaced, secret = _replace_secure(value)
        config[full_key] = replaced if isinstance(replaced, str) else json.dumps(replaced)
        if secret:
            secret_keys.append(full_key)
    return config, secret_keys
