"""What a stack needs from outside its site, as data: the charts it installs, every image the objects it applies
(rendered charts and its own manifests) name or make an operator launch, the node packages per OS family, and the
kubeadm images of its Kubernetes version.

Pure: objects in, names out. The images are read from the objects, never from a list kept beside them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

POD_OWNERS = ("Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob")
IMAGE_KEYS = ("image",)
"""Keys whose string value is an image reference wherever they appear: a container's image, and the `image`
field operators' custom resources take (Prometheus, Alertmanager, ClusterServingRuntime containers)."""
IMAGE_FLAG = re.compile(r"^--[a-z0-9-]*(image|reloader)[a-z0-9-]*=(.+)$")
"""An operator told on its command line which image to launch (prometheus-operator's
--prometheus-config-reloader=<image>)."""
IMAGE_ENV = re.compile(r"IMAGE")
"""An environment variable whose name says it holds an image."""
REFERENCE = re.compile(
    r"^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?/)?[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?"
    r"(?:@sha256:[0-9a-f]{64})?$"
)
"""distribution/reference's grammar, close enough to tell an image from prose."""


@dataclass(frozen=True)
class Needed:
    reference: str
    sources: tuple[str, ...] = field(default=())


def is_reference(value: str, *, bare: bool = False) -> bool:
    """An image reference: with a path and a tag or digest where prose could stand (flags, environment), or, where
    the key says it is an image (bare), also a plain name such as busybox:1.36 or busybox."""
    if not value or not REFERENCE.fullmatch(value):
        return False
    return bare or ("/" in value and (":" in value.rsplit("/", 1)[-1] or "@sha256:" in value))


def _pod_specs(obj: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    kind = obj.get("kind")
    if kind not in POD_OWNERS:
        return
    spec = obj.get("spec") or {}
    if kind == "Pod":
        yield spec
        return
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    yield ((spec.get("template") or {}).get("spec")) or {}


def _operator_triplets(value: Any, enabled: bool = True) -> Iterator[str]:
    """repository + image + version (the NVIDIA operators' custom resources), for components not switched off."""
    if isinstance(value, dict):
        on = enabled and value.get("enabled") is not False
        if on and isinstance(value.get("image"), str) and isinstance(value.get("repository"), str):
            version = str(value.get("version") or "")
            joiner = "@" if version.startswith("sha256:") else ":"
            yield f"{value['repository'].rstrip('/')}/{value['image']}" + (f"{joiner}{version}" if version else "")
        for child in value.values():
            yield from _operator_triplets(child, on)
    elif isinstance(value, list):
        for child in value:
            yield from _operator_triplets(child, enabled)


def _embedded(text: str) -> Any:
    """A ConfigMap value that is itself JSON or YAML (KServe's inferenceservice-config), or None."""
    stripped = text.strip()
    if not stripped or (stripped[0] not in "{[" and ":" not in stripped):
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    try:
        # Several documents (a runtimes installer's manifests) read as a list of them.
        documents = [d for d in yaml.safe_load_all(stripped) if d is not None]
    except yaml.YAMLError:
        return None
    return documents[0] if len(documents) == 1 else documents


def _named(value: Any) -> Iterator[str]:
    """Every `image` value, image flag and image environment variable in a tree (a pod spec, a custom resource's
    spec, embedded config)."""
    if isinstance(value, dict):
        if value.get("enabled") is False:
            return  # a component switched off (the GPU Operator's ClusterPolicy): nothing of it is launched
        name, text = value.get("name"), value.get("value")
        if isinstance(name, str) and IMAGE_ENV.search(name) and isinstance(text, str) and is_reference(text):
            # An operator told in its environment which image to launch (the Network Operator's
            # OFED_INIT_CONTAINER_IMAGE).
            yield text
        # repository + image + version is one reference, read by _operator_triplets.
        triplet = isinstance(value.get("repository"), str)
        for key, child in value.items():
            if key in IMAGE_KEYS and isinstance(child, str) and not triplet and is_reference(child, bare=True):
                yield child
            else:
                yield from _named(child)
    elif isinstance(value, list):
        for child in value:
            if isinstance(child, str) and (flag := IMAGE_FLAG.match(child)) and is_reference(flag.group(2)):
                yield flag.group(2)
            else:
                yield from _named(child)


def object_images(obj: Mapping[str, Any]) -> list[str]:
    """The images an object makes a node pull: its pods' containers, an operator's custom resource's components,
    and images named in a ConfigMap's embedded configuration."""
    found: list[str] = []
    for spec in _pod_specs(obj):
        found += list(_named(spec))
    if obj.get("kind") not in POD_OWNERS and obj.get("kind") != "CustomResourceDefinition":
        found += list(_named(obj.get("spec") or {}))
        found += list(_operator_triplets(obj.get("spec") or {}))
    data = obj.get("data")
    if obj.get("kind") == "ConfigMap" and isinstance(data, Mapping):
        for text in data.values():
            if isinstance(text, str):
                found += list(_named(_embedded(text)))
    return list(dict.fromkeys(found))


def collect_images(labelled: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Needed]:
    """(where, object) pairs -> each image once, with every place that names it."""
    sources: dict[str, list[str]] = {}
    for where, obj in labelled:
        for image in object_images(obj):
            name = f"{where}: {obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
            sources.setdefault(image, [])
            if name not in sources[image]:
                sources[image].append(name)
    return [Needed(image, tuple(places)) for image, places in sorted(sources.items())]
