"""Big-image logistics as pure data: hosts.toml per registry mirror, the containerd settings they need,
Spegel's values, the pre-pull DaemonSets, and what each node should hold."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..config.derived import GPU_TAINT, prepull_sets
from ..config.images import ImageSetSpec, ImagesSpec, MirrorSpec
from ..config.nodes import GPU_MODEL_LABEL, NodeSpec
from ..config.spec import Spec
from . import toml_text
from .helm import ChartRelease

CERTS_DIR = "/etc/containerd/certs.d"
DEFAULT_CONTAINERD_ROOT = "/var/lib/containerd"
AUTHORIZATION_PLACEHOLDER = "__MLCLUSTER_MIRROR_AUTHORIZATION__"
PREPULL_NAMESPACE = "mlcluster-prepull"
# A static busybox copied into each pod lets any image be "run" without relying on the image's own shell.
BUSYBOX_IMAGE = "busybox:1.37.0-musl"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# On Spegel's pods: the digest of the site's hosts.toml beneath Spegel's; a new one restarts them to read it again.
SITE_MIRRORS_ANNOTATION = "mlcluster.io/site-mirrors"
# Where Spegel keeps the hosts.toml it found (spegel v0.7.4 pkg/oci/containerd.go backupDir).
SPEGEL_BACKUP_DIR = f"{CERTS_DIR}/_backup"
_UPSTREAM_OVERRIDES = {"docker.io": "https://registry-1.docker.io"}


def upstream_server(mirror: MirrorSpec) -> str:
    return mirror.server or _UPSTREAM_OVERRIDES.get(mirror.registry, f"https://{mirror.registry}")


def hosts_document(mirror: MirrorSpec) -> dict[str, Any]:
    """containerd's hosts.toml for one registry: mirrors first, in order, then (unless mirror-only) upstream."""
    document: dict[str, Any] = {}
    if not mirror.mirrors_only:
        document["server"] = upstream_server(mirror)
    hosts: dict[str, Any] = {}
    for endpoint in mirror.endpoints:
        host: dict[str, Any] = {"capabilities": ["pull", "resolve"]}
        if mirror.ca:
            host["ca"] = f"{CERTS_DIR}/{mirror.registry}/ca.crt"
        if mirror.skip_verify:
            host["skip_verify"] = True
        if mirror.override_path:
            host["override_path"] = True
        if mirror.authorization is not None:
            # The secret reaches the node on stdin; the placeholder is replaced there.
            host["header"] = {"Authorization": AUTHORIZATION_PLACEHOLDER}
        hosts[endpoint] = host
    document["host"] = hosts
    return document


def hosts_toml(mirror: MirrorSpec) -> str:
    return toml_text.dumps(hosts_document(mirror))


def mirror_authorizations(mirrors: Iterable[MirrorSpec]) -> str:
    """The stdin of the mirrors step: `registry<TAB>authorization` lines (secret)."""
    return "".join(f"{m.registry}\t{m.authorization.reveal()}\n" for m in mirrors if m.authorization is not None)


def registry_settings(images: ImagesSpec, config_version: int) -> dict[str, Any]:
    """The containerd CRI settings mirrors and Spegel need, for merging into config.toml."""
    cri_images: dict[str, Any] = {"registry": {"config_path": CERTS_DIR}}
    if images.spegel.enabled:
        # Spegel serves layers from the content store; they must stay after unpacking.
        cri_images["discard_unpacked_layers"] = False
    if config_version == 2:
        cri: dict[str, Any] = {"registry": cri_images["registry"]}
        if "discard_unpacked_layers" in cri_images:
            cri["containerd"] = {"discard_unpacked_layers": False}
        return {"plugins": {"io.containerd.grpc.v1.cri": cri}}
    return {"plugins": {"io.containerd.cri.v1.images": cri_images}}


def containerd_root(node: NodeSpec) -> str:
    disk = node.image_disk
    if disk is None:
        return DEFAULT_CONTAINERD_ROOT
    return disk.path or disk.mount_point


def spegel_release(
    images: ImagesSpec, nodes: tuple[NodeSpec, ...], site_mirrors: tuple[MirrorSpec, ...] = ()
) -> ChartRelease:
    """Spegel's release. `site_mirrors` are the hosts.toml the nodes keep beneath Spegel's (an air-gap seed's):
    Spegel moves every registry's hosts.toml into `_backup` at its first start and, with prependExisting, writes
    its own host first and then the backed-up hosts of each registry it mirrors, at every start of its pod (spegel
    v0.7.4 pkg/oci/containerd.go AddMirrorConfiguration, existingHosts; the chart's `configuration` init
    container). So the registries it mirrors are those, and a change of their hosts.toml (the node step writes it
    into `_backup` once Spegel took over) restarts the pods through an annotation."""
    spegel = images.spegel
    roots = {containerd_root(n) for n in nodes} or {DEFAULT_CONTAINERD_ROOT}
    (root,) = roots  # validation guarantees one root across nodes while Spegel is on
    mirrored = list(spegel.mirrored_registries)
    if site_mirrors and not mirrored:
        # Not "all" (`_default`): Spegel would keep only the backed-up `_default` hosts and the seed's would be lost.
        # The site's own mirrors' registries stay mirrored, through additionalMirrorTargets as without the seed.
        registries = dict.fromkeys(m.registry for m in (*site_mirrors, *images.mirrors))
        mirrored = [f"https://{registry}" for registry in registries]
    values: dict[str, Any] = {
        "spegel": {
            "containerdRegistryConfigPath": CERTS_DIR,
            "containerdContentPath": f"{root}/io.containerd.content.v1.content",
            "mirroredRegistries": mirrored,
            # Validation allows one endpoint list for all mirrors while Spegel is on.
            "additionalMirrorTargets": list(images.mirrors[0].endpoints) if images.mirrors else [],
        },
        "tolerations": [{"operator": "Exists"}],
    }
    if site_mirrors:
        values["spegel"]["prependExisting"] = True
        written = "".join(f"{mirror.registry}\n{hosts_toml(mirror)}" for mirror in site_mirrors)
        values["podAnnotations"] = {SITE_MIRRORS_ANNOTATION: hashlib.sha256(written.encode()).hexdigest()[:16]}
    return ChartRelease(
        name="spegel",
        chart="oci://ghcr.io/spegel-org/helm-charts/spegel",
        version=spegel.version,
        namespace=spegel.namespace,
        values=values,
        upstream_chart="spegel",
    )


def _taint_toleration() -> dict[str, str]:
    key, rest = GPU_TAINT.split("=", 1)
    value, effect = rest.split(":")
    return {"key": key, "operator": "Equal", "value": value, "effect": effect}


def prepull_daemonset(image_set: ImageSetSpec, deadline: str) -> dict[str, Any]:
    """One DaemonSet per image set: each image is an init container that exits at once, so the kubelet
    pulls it (and containerd's progress timeout, the configured pull deadline, governs the pull)."""
    labels = {"app.kubernetes.io/name": "mlcluster-prepull", "mlcluster.io/image-set": image_set.name}
    tools = {"name": "tools", "emptyDir": {"sizeLimit": "16Mi"}}
    init = [
        {
            "name": "copy-busybox",
            "image": BUSYBOX_IMAGE,
            "command": ["cp", "/bin/busybox", "/mlcluster/busybox"],
            "volumeMounts": [{"name": "tools", "mountPath": "/mlcluster"}],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        }
    ]
    for index, image in enumerate(image_set.images):
        init.append(
            {
                "name": f"pull-{index}",
                "image": image.image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/mlcluster/busybox", "true"],
                "volumeMounts": [{"name": "tools", "mountPath": "/mlcluster"}],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
            }
        )
    pod_spec: dict[str, Any] = {
        "initContainers": init,
        "containers": [
            {
                "name": "hold",
                "image": PAUSE_IMAGE,
                "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"memory": "16Mi"}},
            }
        ],
        "volumes": [tools],
        "tolerations": [_taint_toleration()],
        "priorityClassName": "system-node-critical",
    }
    if image_set.nodes == "gpu":
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": GPU_MODEL_LABEL, "operator": "Exists"}]}]
                }
            }
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": f"prepull-{image_set.name}",
            "namespace": PREPULL_NAMESPACE,
            "labels": labels,
            "annotations": {"mlcluster.io/pull-deadline": deadline},
        },
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def planned_images(spec: Spec) -> Mapping[str, list[str]]:
    """Which node should hold which pre-pulled images (from the stack; the cluster's state is not known here)."""
    out: dict[str, list[str]] = {}
    for node in spec.nodes:
        images = [i.image for s in prepull_sets(spec) if s.nodes == "all" or node.gpu is not None for i in s.images]
        if images:
            out[node.name] = images
    return out


ASSUMED_PULL_MIB_PER_SECOND = 20
"""Sustained pull + unpack rate the awaits assume (a 20 GiB image: 17 minutes); docs/scheduling.md says why."""
UNDECLARED_IMAGE_GIB = 20.0
"""Size assumed for an image the stack declares no size for: the large end of ML images."""
AWAIT_FLOOR_SECONDS = 600
"""Scheduling, container start and the API round trips, before any pull."""


def declared_size_gib(images: ImagesSpec, image: str) -> float:
    """The size the stack declares for an image (images.prepull[].images[].sizeGiB), else the assumed one."""
    sizes = [i.size_gib for s in images.prepull for i in s.images if i.image == image and i.size_gib]
    return max(sizes) if sizes else UNDECLARED_IMAGE_GIB


def pull_await_seconds(sizes_gib: Iterable[float | None], extra_seconds: int = 0) -> int:
    """How long `up` may wait for a pod that pulls these images one after another (init containers do),
    rounded up to whole minutes; an undeclared size counts as UNDECLARED_IMAGE_GIB."""
    pull = sum((size or UNDECLARED_IMAGE_GIB) * 1024 / ASSUMED_PULL_MIB_PER_SECOND for size in sizes_gib)
    return math.ceil((AWAIT_FLOOR_SECONDS + extra_seconds + pull) / 60) * 60


def prepull_await_seconds(image_set: ImageSetSpec) -> int:
    return pull_await_seconds(i.size_gib for i in image_set.images)


def required_bytes(images: ImagesSpec, node: NodeSpec) -> int:
    """Bytes the node's pre-pulled sets need on containerd's root (images without a size count as 0)."""
    total = 0.0
    for image_set in images.prepull:
        if image_set.nodes == "all" or node.gpu is not None:
            total += sum(i.size_gib or 0 for i in image_set.images)
    return int(total * 1024**3)
