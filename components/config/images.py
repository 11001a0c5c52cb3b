"""Big-image logistics: registry mirrors, peer-to-peer sharing (Spegel), pre-pulling, image-disk capacity."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from . import checks, formats
from .schema import Problems, Secret, join_path, setting

_REGISTRY = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?")
url = formats.http_url
image_reference = formats.image_reference


def registry_name(value: str) -> str | None:
    """A registry host: a directory name under containerd's certs.d and a key of its hosts.toml."""
    if not _REGISTRY.fullmatch(value) or checks.host_port(value):
        return "is not a registry host such as docker.io or nvcr.io:443"
    return None


@dataclass(frozen=True)
class MirrorSpec:
    registry: str = setting(doc="Registry whose pulls go through the mirrors, e.g. docker.io.", check=registry_name)
    endpoints: tuple[str, ...] = setting(
        doc="Mirror URLs, tried in order before the registry itself.", check=checks.each(url)
    )
    server: str | None = setting(
        None,
        doc="Upstream fallback (default https://<registry>; docker.io:"
        " https://registry-1.docker.io). Set to an empty mirror-only setup with"
        " `mirrorsOnly`.",
        check=url,
    )
    mirrors_only: bool = setting(False, doc="Air-gapped: never fall back to the upstream registry.")
    override_path: bool = setting(
        False,
        doc="The endpoints carry the full API path (`https://harbor.example/v2/proxy-docker`): containerd appends"
        " only `/<name>/manifests/<ref>` (its hosts.toml `override_path`). For a registry serving several upstreams"
        " under path prefixes.",
    )
    ca: str | None = setting(None, doc="PEM CA certificate the mirrors' TLS certificates chain to.")
    skip_verify: bool = setting(False, doc="DANGER: do not verify the mirrors' TLS certificates.")
    authorization: Secret | None = setting(
        None,
        secret=True,
        doc="Authorization header value for the mirrors (e.g. `Basic <base64>`; secret).",
        check=formats.header_value,
    )

    def validate(self, path: str, problems: Problems) -> None:
        if not self.endpoints:
            problems.error(join_path(path, "endpoints"), "must list at least one mirror URL")
        if self.ca is not None and (problem := formats.pem_certificates(self.ca)):
            problems.error(join_path(path, "ca"), problem)
        if self.override_path:
            for index, endpoint in enumerate(self.endpoints):
                if not re.search(r"/v2(/|$)", urlsplit(endpoint).path):
                    problems.error(
                        join_path(path, f"endpoints[{index}]"),
                        "names no /v2 path, but with overridePath containerd uses the endpoint's path as the API's"
                        " root: give the full path, e.g. https://harbor.example/v2/proxy-docker",
                    )


@dataclass(frozen=True)
class SpegelSpec:
    enabled: bool = setting(
        False, doc="Peer-to-peer image sharing: a layer pulled by one node is served to the others."
    )
    version: str = setting("0.7.4", doc="Spegel chart version.", check=checks.pinned_chart_version)
    namespace: str = setting("spegel", doc="Namespace of the release.", check=checks.k8s_name)
    mirrored_registries: tuple[str, ...] = setting(
        (),
        doc="Registries Spegel mirrors, as URLs such as https://docker.io (empty: all; on an air-gapped site, the"
        " registries the seed serves and those of `mirrors`).",
        check=checks.each(formats.registry_url),
    )


def registry_host(registry_url: str) -> str:
    """The registry a Spegel registry URL names, as containerd's certs.d folder and an image reference name it."""
    return urlsplit(registry_url).netloc.lower()


@dataclass(frozen=True)
class ImageSpec:
    image: str = setting(doc="Image reference (a tag or digest).", check=image_reference)
    size_gib: float | None = setting(
        None,
        key="sizeGiB",
        doc="Unpacked size on disk, for the capacity preflight (see `docker image ls` / the registry manifest).",
        check=checks.between(0.001, 10_000),
    )


@dataclass(frozen=True)
class ImageSetSpec:
    name: str = setting(doc="Name of the set (becomes the pre-pull DaemonSet's name).", check=checks.k8s_name)
    images: tuple[ImageSpec, ...] = setting(doc="Images pulled onto the nodes as soon as they join.")
    nodes: Literal["gpu", "all"] = setting("gpu", doc="Which nodes hold the set.")


@dataclass(frozen=True)
class ImagesSpec:
    mirrors: tuple[MirrorSpec, ...] = setting((), doc="Registry mirrors / pull-through caches, per registry.")
    spegel: SpegelSpec = setting(default_factory=SpegelSpec, doc="Peer-to-peer image sharing with Spegel.")
    prepull: tuple[ImageSetSpec, ...] = setting((), doc="Image sets pre-pulled on the nodes that run them.")
    capacity_check: bool = setting(True, doc="Preflight: do the pre-pulled sets fit the image disk?")

    def validate(self, path: str, problems: Problems) -> None:
        seen: dict[str, int] = {}
        for index, mirror in enumerate(self.mirrors):
            if mirror.registry in seen:
                problems.error(
                    join_path(path, f"mirrors[{index}].registry"),
                    f'"{mirror.registry}" is already configured by mirrors[{seen[mirror.registry]}]',
                )
            seen.setdefault(mirror.registry, index)
            if self.spegel.enabled and (mirror.ca or mirror.authorization or mirror.skip_verify):
                problems.error(
                    join_path(path, f"mirrors[{index}]"),
                    "sets ca/authorization/skipVerify, which Spegel cannot carry: with spegel.enabled, Spegel"
                    " writes each registry's hosts.toml and takes mirrors only as plain URLs",
                )
        endpoint_sets = {m.endpoints for m in self.mirrors}
        if self.spegel.enabled and len(endpoint_sets) > 1:
            problems.error(
                join_path(path, "mirrors"),
                "lists different endpoints per registry, but Spegel applies its additional mirror targets to"
                " every registry: with spegel.enabled, give all mirrors the same endpoints (one site"
                " pull-through cache) or turn Spegel off",
            )
        names = [s.name for s in self.prepull]
        for index, name in enumerate(names):
            if names.index(name) != index:
                problems.error(join_path(path, f"prepull[{index}].name"), f'"{name}" is used twice')
