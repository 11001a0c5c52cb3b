"""The Kubernetes API server as pulumi-kubernetes meets it, for the objects the program applies one by one.

The engine (engine.py) sends each `kubernetes:<group>/<version>:<Kind>` resource here as pulumi-kubernetes would:
a create, an update (server-side apply of the new manifest over the live object) or a delete. What the API
server and the controllers behind it do, each from its source:

- One object per (group, kind, namespace, name): a create of a name that exists, or that is still terminating,
  is refused `AlreadyExists` (409).
- CRDs' `x-kubernetes-validations` run on every create and update, transition rules (`oldSelf`) on updates
  (tests/cel_rules.py, from apiextensions-apiserver's cel validation): a refused write changes nothing. The CRDs
  are the pinned Kueue chart's (tests/upstream.py, kueue_crds), by group and kind.
- Deletion waits for finalizers. Kueue's `kueue.x-k8s.io/resource-in-use` (kueue v0.19.2):
  a ResourceFlavor stays while any ClusterQueue lists it in its resourceGroups
  (pkg/controller/core/resourceflavor_controller.go, Reconcile: `ClusterQueuesUsingFlavor`, lines 97-121);
  a Topology stays while any ResourceFlavor names it in `spec.topologyName`
  (pkg/controller/tas/topology_controller.go, Reconcile, lines 108-126). Both finalizers are lifted by the
  controllers as soon as the last user goes (a ClusterQueue update or delete event re-queues the flavor), which
  `_release` does after every write.
- pulumi-kubernetes waits for a deleted object to be gone (`await` of deletion, 10 minutes by default): one that
  a finalizer holds makes the delete fail once the wait runs out; the object stays terminating, which this model
  reports at once instead of waiting.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from typing import Any

from tests.cel_rules import crd_rule_errors

ObjectKey = tuple[str, str, str, str]
"""(group, kind, namespace, name); the core group is ''."""

RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"


class KubernetesApiError(RuntimeError):
    """A refusal as the provider reports it: the API server's status, the object, the reason."""


def object_key(manifest: Mapping[str, Any]) -> ObjectKey:
    group = str(manifest["apiVersion"]).rpartition("/")[0]
    metadata = manifest.get("metadata") or {}
    return (group, str(manifest["kind"]), str(metadata.get("namespace") or ""), str(metadata["name"]))


def _flavors_listed(queue: Mapping[str, Any]) -> set[str]:
    groups = (queue.get("spec") or {}).get("resourceGroups") or []
    return {str(f["name"]) for group in groups for f in group.get("flavors") or []}


def _kueue_users(key: ObjectKey, objects: Mapping[ObjectKey, dict[str, Any]]) -> list[str]:
    """Who holds a Kueue object's resource-in-use finalizer (kueue v0.19.2, see the module docstring)."""
    group, kind, _, name = key
    if group != "kueue.x-k8s.io":
        return []
    if kind == "ResourceFlavor":
        return sorted(
            f"ClusterQueue/{k[3]}" for k, o in objects.items() if k[1] == "ClusterQueue" and name in _flavors_listed(o)
        )
    if kind == "Topology":
        return sorted(
            f"ResourceFlavor/{k[3]}"
            for k, o in objects.items()
            if k[1] == "ResourceFlavor" and (o.get("spec") or {}).get("topologyName") == name
        )
    return []


FINALIZERS: dict[tuple[str, str], Callable[[ObjectKey, Mapping[ObjectKey, dict[str, Any]]], list[str]]] = {
    ("kueue.x-k8s.io", "ResourceFlavor"): _kueue_users,
    ("kueue.x-k8s.io", "Topology"): _kueue_users,
}
"""Controllers that put a finalizer on what they watch, and who holds it."""


class KubernetesApi:
    def __init__(self, crds: Mapping[tuple[str, str], dict[str, Any]]) -> None:
        self.crds = dict(crds)
        self.objects: dict[ObjectKey, dict[str, Any]] = {}
        self.terminating: dict[ObjectKey, dict[str, Any]] = {}
        self.writes: list[tuple[str, ObjectKey]] = []
        """(verb, object) of every accepted write, in order: create, update, delete (gone), terminating."""
        self._lock = threading.Lock()

    def snapshot(self) -> tuple[dict[ObjectKey, dict[str, Any]], dict[ObjectKey, dict[str, Any]]]:
        """The cluster's objects (a test that restores the hosts and the engine's state restores these with them)."""
        with self._lock:
            return copy.deepcopy(self.objects), copy.deepcopy(self.terminating)

    def restore(self, snapshot: tuple[dict[ObjectKey, dict[str, Any]], dict[ObjectKey, dict[str, Any]]]) -> None:
        with self._lock:
            self.objects, self.terminating = copy.deepcopy(snapshot[0]), copy.deepcopy(snapshot[1])

    @staticmethod
    def _describe(key: ObjectKey) -> str:
        group, kind, namespace, name = key
        where = f"{namespace}/{name}" if namespace else name
        return f"{kind}.{group or 'core'} {where!r}"

    def _validate(self, manifest: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        key = object_key(manifest)
        crd = self.crds.get((key[0], key[1]))
        if crd is None:
            return
        errors = crd_rule_errors(crd, dict(manifest), dict(old) if old is not None else None)
        if errors:
            raise KubernetesApiError(f"{self._describe(key)} is invalid: " + "; ".join(errors))

    def create(self, manifest: Mapping[str, Any]) -> None:
        key = object_key(manifest)
        with self._lock:
            if key in self.objects or key in self.terminating:
                state = "is being deleted" if key in self.terminating else "already exists"
                raise KubernetesApiError(f"{self._describe(key)} {state} (AlreadyExists, 409)")
            self._validate(manifest, None)
            self.objects[key] = copy.deepcopy(dict(manifest))
            self.writes.append(("create", key))
            self._release()

    def update(self, manifest: Mapping[str, Any]) -> None:
        key = object_key(manifest)
        with self._lock:
            live = self.objects.get(key)
            if live is None:
                raise KubernetesApiError(f"{self._describe(key)} not found (NotFound, 404)")
            self._validate(manifest, live)
            self.objects[key] = copy.deepcopy(dict(manifest))
            self.writes.append(("update", key))
            self._release()

    def delete(self, manifest: Mapping[str, Any]) -> None:
        key = object_key(manifest)
        with self._lock:
            live = self.objects.pop(key, None)
            if live is None:
                return  # already gone: pulumi-kubernetes treats a 404 on delete as deleted
            holders = FINALIZERS.get((key[0], key[1]))
            users = holders(key, self._existing()) if holders else []
            if users:
                self.terminating[key] = live
                self.writes.append(("terminating", key))
                raise KubernetesApiError(
                    f"{self._describe(key)} was deleted but is still there: finalizer {RESOURCE_IN_USE} is held"
                    f" while {', '.join(users)} use it; timed out waiting for the delete to finish"
                )
            self.writes.append(("delete", key))
            self._release()

    def _existing(self) -> dict[ObjectKey, dict[str, Any]]:
        """What the controllers see: terminating objects are still there (a terminating flavor still names its
        Topology)."""
        return {**self.terminating, **self.objects}

    def _release(self) -> None:
        """The controllers lift a finalizer whose last user went (caller holds the lock)."""
        released = True
        while released:
            released = False
            for key in list(self.terminating):
                holders = FINALIZERS[(key[0], key[1])]
                if not holders(key, {k: o for k, o in self._existing().items() if k != key}):
                    del self.terminating[key]
                    self.writes.append(("delete", key))
                    released = True
