"""The one channel every component warns through.

A warning names the config key it is about (`mlcluster:kueue.teams[0].quota.gpu: …`) or, for what only the
cluster can tell (a node's GPUs, the certificates' dates), the key of what it concerns. `pulumi preview` and `up`
print it through the engine; the offline plan (components/plan) keeps every warning the program gave, once each,
in the order given, for its output, plan.json, the plan diff and the PR comment: nothing filters them on the way.
"""

from __future__ import annotations

import threading

import pulumi

from .config.schema import NAMESPACE

_lock = threading.Lock()
_given: list[str] = []


def warn(path: str, message: str, resource: pulumi.Resource | None = None) -> None:
    """Warn about config key `path` (without the `mlcluster:` namespace)."""
    given(f"{NAMESPACE}:{path}: {message}", resource)


def given(text: str, resource: pulumi.Resource | None = None) -> None:
    """A warning already worded with its key (a validation Problem's text)."""
    with _lock:
        if text not in _given:
            _given.append(text)
    pulumi.log.warn(text, resource=resource)


def take() -> list[str]:
    """The warnings given since the last take (one program run's), once each, in order."""
    with _lock:
        found = list(_given)
        _given.clear()
    return found
