"""What the air-gap seed host's steps are given from a fetched bundle's lockfile: the items to check
(components/scripts/bundle-verify.sh), the images to load into its registry, and the registry's and file server's
configuration (components/scripts/seed-serve.sh); and where the nodes find them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..config import formats
from ..config.airgap import AirGapSpec, bundle_lock
from ..config.images import MirrorSpec
from ..config.nodes import NodeSpec
from .shell import NodeStep, merge_steps, rendered_step

DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
IMAGE_BLOBS = "images/blobs/sha256"
"""Where an OCI image layout keeps a blob: blobs/<algorithm>/<hex> (opencontainers/image-spec image-layout.md)."""
IMAGE_LAYOUT = "images"
"""The bundle's one OCI image layout; each image's `org.opencontainers.image.ref.name` is `layout_name(reference)`."""
DEB_REPOSITORY = "packages/deb"
RPM_REPOSITORY = "packages/rpm"
REGISTRY_STORAGE = "/var/lib/mlcluster/seed-registry"
REGISTRY_UNIT = "mlcluster-seed-registry"
FILES_UNIT = "mlcluster-seed-files"
REGISTRY_BINARY = "/usr/bin/docker-registry"
"""Debian's and Ubuntu's package of the CNCF distribution registry (2.8.2 in Debian 12); its own unit runs
`/usr/bin/docker-registry serve /etc/docker/registry/config.yml` (debian/docker-registry.service)."""
SEED_TOOLS = {
    "docker-registry": "docker-registry",
    "skopeo": "skopeo",
    "apt-ftparchive": "apt-utils",
    "createrepo_c": "createrepo-c",
    "python3": "python3",
}
"""What the seed runs, by command, and the Debian/Ubuntu package that ships it (the seed installs what it lacks from
its OS repository: a site's OS mirror or install media, not the internet)."""


def layout_name(reference: str) -> str:
    """An image's name in the bundle's OCI layout: its reference, a digest-pinned one named by its digest as a tag
    (an OCI layout's ref.name and skopeo's `oci:DIR:NAME` take no `@`)."""
    name, _, digest = reference.partition("@")
    if not digest:
        return reference
    if ":" in name.rsplit("/", 1)[-1]:
        return name
    return f"{name}:{digest.replace(':', '-')}"


def bundle_items(lock: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(`hex<TAB>path<TAB>item` lines, problems): every chart, package and file by its path and digest, every image by
    its manifest blob. A problem per item without a digest or path: a lockfile not fetched yet."""
    rows: list[str] = []
    problems: list[str] = []

    def add(item: str, digest: Any, path: Any) -> None:
        match = DIGEST.fullmatch(str(digest or ""))
        if match is None or not path:
            problems.append(f"{item}: no sha256 digest and path (fetch the bundle first)")
            return
        if "\t" in str(path) or "\n" in str(path) or str(path).startswith("/") or ".." in str(path).split("/"):
            problems.append(f"{item}: path {path!r} is not a plain path inside the bundle")
            return
        rows.append(f"{match.group(1)}\t{path}\t{item}")

    for chart in lock.get("charts") or []:
        add(f"chart {chart['name']}@{chart['version']}", chart.get("digest"), chart.get("path"))
    for image in lock.get("images") or []:
        match = DIGEST.fullmatch(str(image.get("digest") or ""))
        add(f"image {image['reference']}", image.get("digest"), match and f"{IMAGE_BLOBS}/{match.group(1)}")
    for family, packages in (lock.get("packages") or {}).items():
        for package in packages:
            add(f"package {family}:{package['name']}", package.get("digest"), package.get("path"))
    for file in lock.get("files") or []:
        add(f"file {file['name']}", file.get("digest"), file.get("path"))
    return "\n".join(rows), problems


def seed_images(lock: Mapping[str, Any]) -> str:
    """`layout name<TAB>repository:tag on the seed<TAB>manifest hex` per image: the seed's registry holds each image
    under its source registry's name as the first path component (registry.k8s.io/pause:3.10 is
    <seed>/registry.k8s.io/pause:3.10), which is the path each node's hosts.toml asks for (`seed_mirror_endpoint`)."""
    rows = []
    for image in lock.get("images") or []:
        match = DIGEST.fullmatch(str(image.get("digest") or ""))
        if match is None:
            continue  # bundle_items names it
        name = layout_name(str(image["reference"]))
        rows.append(f"{name}\t{name}\t{match.group(1)}")
    return "\n".join(rows)


def bind_address(host: str) -> str:
    """Where the seed's servers listen: the seed's own address when the stack names it by address, every
    interface when by DNS name (a listener cannot bind a name)."""
    return host if formats.is_ip(host) else "0.0.0.0"


def registry_config(address: str, port: int) -> str:
    """The distribution registry's configuration (distribution v2.8 docs/configuration.md): filesystem storage, plain
    HTTP on the seed's address, no deletes. The nodes reach it over the site network only; the digests in the
    lockfile, checked on the seed and on each node, are what the content is trusted by."""
    return (
        "version: 0.1\n"
        "log:\n  level: info\n"
        "storage:\n"
        f"  filesystem:\n    rootdirectory: {REGISTRY_STORAGE}\n"
        "  delete:\n    enabled: false\n"
        "http:\n"
        f"  addr: {address}:{port}\n"
        "health:\n  storagedriver:\n    enabled: true\n"
    )


REGISTRY_CONFIG_PATH = "/etc/mlcluster/seed-registry.yml"


def service_unit(description: str, exec_start: str) -> str:
    """A seed server's systemd unit: started after the network, restarted when it fails, started at boot."""
    return (
        f"[Unit]\nDescription=mlcluster air-gap seed: {description}\n"
        "After=network-online.target\nWants=network-online.target\n\n"
        f"[Service]\nExecStart={exec_start}\nRestart=on-failure\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


def registry_unit() -> str:
    return service_unit(
        "the bundle's images (CNCF distribution registry)", f"{REGISTRY_BINARY} serve {REGISTRY_CONFIG_PATH}"
    )


def files_unit(bundle_dir: str, address: str, port: int) -> str:
    """Python's own HTTP file server (http.server, read-only GET/HEAD) over the bundle: the apt and yum repositories,
    the charts and the files. python3 is on every seed the step accepts (it installs it where absent)."""
    return service_unit(
        "the bundle's packages, charts and files over HTTP",
        f"/usr/bin/python3 -m http.server --bind {address} --directory {bundle_dir} {port}",
    )


def seed_mirror_endpoint(seed_address: str, port: int, registry: str) -> str:
    """The endpoint a node's hosts.toml names for `registry` (with override_path: containerd then asks
    <endpoint>/<name>/manifests/<ref>; containerd docs/hosts.md, "override_path")."""
    return f"http://{seed_address}:{port}/v2/{registry}"


def deb_source(seed_address: str, port: int) -> str:
    """The nodes' apt source: the seed's flat repository (apt-ftparchive's Packages and Release at its root).
    `trusted=yes`: the seed's index is not signed by the Kubernetes project's key; each package's bytes are checked
    against the lockfile's digest on the node before it is installed (kube-packages.sh)."""
    return f"deb [trusted=yes] http://{seed_address}:{port}/{DEB_REPOSITORY}/ ./"


def rpm_repository(section: str, title: str, seed_address: str, port: int, key_path: str, *, exclude: str = "") -> str:
    """A node's yum repository on the seed's createrepo_c metadata. RPMs carry their publisher's signature (the
    Kubernetes project's, Docker's), so gpgcheck stays on with the publisher's key from the bundle."""
    lines = [
        f"[{section}]",
        f"name={title} (mlcluster air-gap seed)",
        f"baseurl=http://{seed_address}:{port}/{RPM_REPOSITORY}/",
        "enabled=1",
        "gpgcheck=1",
        f"gpgkey=http://{seed_address}:{port}/{key_path}",
    ]
    return "\n".join([*lines, *([f"exclude={exclude}"] if exclude else [])])


def seed_serve_settings(
    lock: Mapping[str, Any], bundle_dir: str, seed_address: str, registry_port: int, files_port: int
) -> dict[str, str]:
    """The settings of seed-serve.sh."""
    return {
        "BUNDLE_DIR": bundle_dir,
        "SEED_IMAGES": seed_images(lock),
        "SEED_ADDRESS": seed_address,
        "REGISTRY_PORT": str(registry_port),
        "FILES_PORT": str(files_port),
        "REGISTRY_CONFIG": registry_config(seed_address, registry_port),
        "REGISTRY_CONFIG_PATH": REGISTRY_CONFIG_PATH,
        "REGISTRY_STORAGE": REGISTRY_STORAGE,
        "REGISTRY_UNIT": REGISTRY_UNIT,
        "REGISTRY_UNIT_TEXT": registry_unit(),
        "FILES_UNIT": FILES_UNIT,
        "FILES_UNIT_TEXT": files_unit(bundle_dir, seed_address, files_port),
        "SEED_TOOLS": "\n".join(f"{tool}\t{package}" for tool, package in SEED_TOOLS.items()),
        "DEB_REPOSITORY": DEB_REPOSITORY,
        "RPM_REPOSITORY": RPM_REPOSITORY,
        "IMAGE_LAYOUT": IMAGE_LAYOUT,
    }


SEED_STEP = "seed"
KUBE_PACKAGES_EXCLUDED = ("kubelet", "kubeadm", "kubectl", "cri-tools", "kubernetes-cni")
"""Excluded from routine dnf transactions, as the upstream repository file does (render/node_steps.py)."""


def seed_node(air_gap: AirGapSpec, nodes: tuple[NodeSpec, ...]) -> NodeSpec | None:
    if not air_gap.enabled:
        return None
    return next((n for n in nodes if n.name == air_gap.seed), None)


def seed_step(air_gap: AirGapSpec, seed: NodeSpec) -> NodeStep:
    """The seed host's command: every bundle item against the lockfile, then the registry, the repositories and the
    file server. Its text holds every digest, so a new bundle is a changed step in the plan."""
    lock = bundle_lock(air_gap.lockfile).document
    items, _ = bundle_items(lock)  # the lockfile's problems are refused at airGap.lockfile
    address = bind_address(seed.host)
    serve = seed_serve_settings(lock, air_gap.bundle_dir, seed.host, air_gap.registry_port, air_gap.files_port)
    serve["REGISTRY_CONFIG"] = registry_config(address, air_gap.registry_port)
    serve["FILES_UNIT_TEXT"] = files_unit(air_gap.bundle_dir, address, air_gap.files_port)
    counts = lock.get("counts") or {}
    return merge_steps(
        SEED_STEP,
        title=f"Check the air-gap bundle ({counts.get('images', 0)} images, {counts.get('packages', 0)} packages,"
        f" {counts.get('charts', 0)} charts) and serve it",
        steps=[
            rendered_step(
                "bundle-verify",
                "Check every bundle item against the lockfile",
                {"BUNDLE_DIR": air_gap.bundle_dir, "BUNDLE_ITEMS": items},
            ),
            rendered_step("seed-serve", "Serve the bundle: registry, apt and yum repositories, files", serve),
        ],
    )


def seed_mirrors(air_gap: AirGapSpec, seed: NodeSpec) -> tuple[MirrorSpec, ...]:
    """One mirror-only hosts.toml per registry the bundle's images come from, naming the seed's registry under that
    registry's path (seed_images)."""
    return tuple(
        MirrorSpec(
            registry=registry,
            endpoints=(seed_mirror_endpoint(seed.host, air_gap.registry_port, registry),),
            mirrors_only=True,
            override_path=True,
        )
        for registry in bundle_lock(air_gap.lockfile).registries
    )


def site_mirrors(air_gap: AirGapSpec, nodes: tuple[NodeSpec, ...]) -> tuple[MirrorSpec, ...]:
    """The seed's hosts.toml on an air-gapped site; none with a route out."""
    seed = seed_node(air_gap, nodes)
    return seed_mirrors(air_gap, seed) if seed is not None else ()


def package_sources(air_gap: AirGapSpec, seed: NodeSpec) -> dict[str, str]:
    """The kube-packages and containerd steps' repository settings on an air-gapped site: the seed's repositories,
    and the lockfile's digest of each Debian package, which the node checks before it installs it."""
    lock = bundle_lock(air_gap.lockfile)
    files = air_gap.files_port
    kubernetes_key = lock.file_path("kubernetes-rpm-key") or "files/kubernetes-rpm-key"
    docker_key = lock.file_path("docker-ce-rpm-key") or "files/docker-ce-rpm-key"
    return {
        "K8S_REPO_KEY_URL": "",
        "K8S_REPO_DEB": deb_source(seed.host, files),
        "K8S_REPO_RPM": rpm_repository(
            "kubernetes", "Kubernetes", seed.host, files, kubernetes_key, exclude=" ".join(KUBE_PACKAGES_EXCLUDED)
        ),
        "DOCKER_REPO_RPM": rpm_repository("docker-ce-stable", "Docker CE", seed.host, files, docker_key),
        "BUNDLE_DEB_DIGESTS": deb_digests(air_gap),
    }


def deb_digests(air_gap: AirGapSpec) -> str:
    """`name<TAB>sha256` per Debian package of the bundle: what a node checks each downloaded package against before
    it installs it (lib.sh bundle_debs_install); empty on a site with a route out."""
    if not air_gap.enabled:
        return ""
    packages = bundle_lock(air_gap.lockfile).packages("deb")
    return "\n".join(f"{p.name}\t{p.digest.removeprefix('sha256:')}" for p in packages)
