"""A CRD's `x-kubernetes-validations` (CEL) evaluated as the API server does, with a pure-Python CEL (cel-python).

What the API server does, and so this module (kubernetes/kubernetes, staging/src/k8s.io/apiextensions-apiserver/
pkg/apiserver/schema/cel/validation.go at the 1.35 tag, and the CRD docs' "Validation rules" section):

- The object is defaulted from the schema's `default`s first (structural defaulting runs before validation), so a
  rule may read a field the manifest left out but the schema defaults (ClusterQueue's `whenCanBorrow`).
- A rule is evaluated at the node whose schema carries it, with `self` that node's value; a node that is absent
  is not evaluated.
- Transition rules (those naming `oldSelf`) run only on an update, and only where the old object has a value at the
  same place: object properties correlate by name, items of a `x-kubernetes-list-type: map` list by their keys;
  items of an atomic or set list never correlate, so a transition rule under them never runs.
- A rule that evaluates to false is refused with its `message` (or `failed rule: <rule>`), at the field path.

Nothing here is kinder than that: a rule this evaluator cannot compile or evaluate is reported as an error, not
skipped (`RuleNotEvaluatedError`), so a CRD with a rule beyond cel-python's reach fails the test that uses it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

_ENV = celpy.Environment()


class RuleNotEvaluatedError(RuntimeError):
    """A rule that cel-python could not compile or evaluate."""


@dataclass(frozen=True)
class Rule:
    path: str
    rule: str
    message: str

    @property
    def transition(self) -> bool:
        return "oldSelf" in self.rule


@cache
def _program(rule: str) -> Any:
    try:
        return _ENV.program(_ENV.compile(rule))
    except Exception as error:  # cel-python raises its own parse errors and lark's
        raise RuleNotEvaluatedError(f"cannot compile {rule!r}: {error}") from error


def version_schema(crd: dict[str, Any], version: str) -> dict[str, Any]:
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            return dict(served["schema"]["openAPIV3Schema"])
    raise KeyError(f"{crd['spec']['names']['kind']} has no version {version}")


def schema_rules(schema: dict[str, Any], path: str = "") -> Iterator[Rule]:
    """Every rule of a schema, with the path of the node that carries it."""
    for validation in schema.get("x-kubernetes-validations") or []:
        rule = str(validation["rule"])
        yield Rule(path or "<root>", rule, str(validation.get("message") or f"failed rule: {rule}"))
    for name, child in (schema.get("properties") or {}).items():
        yield from schema_rules(child, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), dict):
        yield from schema_rules(schema["items"], f"{path}[*]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from schema_rules(schema["additionalProperties"], f"{path}[*]")


def defaulted(value: Any, schema: dict[str, Any]) -> Any:
    """The value with the schema's defaults applied, as the API server stores it."""
    if isinstance(value, dict):
        out = dict(value)
        for name, child in (schema.get("properties") or {}).items():
            if name not in out and "default" in child:
                out[name] = copy.deepcopy(child["default"])
            if name in out:
                out[name] = defaulted(out[name], child)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name in set(out) - set(schema.get("properties") or {}):
                out[name] = defaulted(out[name], extra)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [defaulted(item, schema["items"]) for item in value]
    return value


def _evaluate(rule: Rule, value: Any, old: Any, has_old: bool) -> str | None:
    """None when the rule holds; else why not. A rule whose evaluation errs (a field it reads is absent) refuses
    the object with the error, as the API server does."""
    activation = {"self": json_to_cel(value)}
    if has_old:
        activation["oldSelf"] = json_to_cel(old)
    program = _program(rule.rule)
    try:
        result = program.evaluate(activation)
    except CELEvalError as error:
        return f"{rule.rule}: {error.args[0] if error.args else error}"
    if isinstance(result, CELEvalError):
        return f"{rule.rule}: {result.args[0] if result.args else result}"
    return None if bool(result) else rule.message


def _list_keys(schema: dict[str, Any]) -> list[str] | None:
    if schema.get("x-kubernetes-list-type") == "map":
        return [str(k) for k in schema.get("x-kubernetes-list-map-keys") or []]
    return None


_ABSENT = object()


def _walk(schema: dict[str, Any], value: Any, old: Any, path: str, errors: list[str]) -> None:
    has_old = old is not _ABSENT
    for validation in schema.get("x-kubernetes-validations") or []:
        rule_text = str(validation["rule"])
        rule = Rule(path or "<root>", rule_text, str(validation.get("message") or f"failed rule: {rule_text}"))
        if rule.transition and not has_old:
            continue
        if (refusal := _evaluate(rule, value, old, has_old)) is not None:
            errors.append(f"{rule.path}: Invalid value: {refusal}")
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for name, child_value in value.items():
            child = properties.get(name) or (extra if isinstance(extra, dict) else None)
            if child is None:
                continue
            child_old = old.get(name, _ABSENT) if has_old and isinstance(old, dict) else _ABSENT
            _walk(child, child_value, child_old, f"{path}.{name}" if path else name, errors)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = _list_keys(schema)
        old_items: dict[tuple[Any, ...], Any] = {}
        if keys and has_old and isinstance(old, list):
            old_items = {tuple(item.get(k) for k in keys): item for item in old if isinstance(item, dict)}
        for index, item in enumerate(value):
            item_old = _ABSENT
            if keys and isinstance(item, dict):
                item_old = old_items.get(tuple(item.get(k) for k in keys), _ABSENT)
            _walk(schema["items"], item, item_old, f"{path}[{index}]", errors)


def crd_rule_errors(crd: dict[str, Any], document: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """The rules' refusals of `document` as a create (old None) or as an update of `old`."""
    version = str(document["apiVersion"]).rpartition("/")[2]
    schema = version_schema(crd, version)
    errors: list[str] = []
    new_value = defaulted(document, schema)
    old_value: Any = defaulted(old, schema) if old is not None else _ABSENT
    _walk(schema, new_value, old_value, "", errors)
    return errors
