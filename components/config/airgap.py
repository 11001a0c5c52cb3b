"""Air gap: a seed host serves the fetched bundle (images, packages, charts, files) to nodes with no route outside the
site (docs/air-gap.md). The bundle's lockfile (python -m components.airgap lock, then fetch) is read here, once, and
held to what the program uses of it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from . import checks, formats
from .schema import Problems, join_path, setting

PROJECT_DIR = Path(__file__).resolve().parents[2]
"""Where `pulumi up` runs (Pulumi.yaml's folder): a relative `airGap.lockfile` is read from here."""
LOCK_SCHEMA = "mlcluster.io/bundle-lock/v1"
KUBEADM_IMAGES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")
"""Control-plane images kubeadm pulls at the stack's exact version (registry.k8s.io/<name>:v<version>); its CoreDNS
and etcd versions are kubeadm's per minor, resolved by `kubeadm config images list` when the bundle is fetched."""
KUBEADM_OWN_VERSIONS = (
    ("registry.k8s.io/coredns/coredns", "CoreDNS, which kubeadm deploys as the cluster's DNS"),
    ("registry.k8s.io/etcd", "etcd, which kubeadm runs on every control plane"),
)
"""Images kubeadm pulls at versions of its own per release: the lockfile must hold a tag of each (which one,
`kubeadm config images list --kubernetes-version v<version>` says; `fetch --image` adds it)."""
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
RESERVED_PORTS = {22: "SSH", 2379: "etcd", 2380: "etcd", 6443: "the API server", 10250: "the kubelet"}


def _port(value: int) -> str | None:
    if not 1 <= value <= 65535:
        return "is not a TCP port (1-65535)"
    if value in RESERVED_PORTS:
        return f"is {RESERVED_PORTS[value]}'s port on a node"
    return None


def _lockfile_path(value: str) -> str | None:
    """A path on the Pulumi machine; its charts are named relative to the lockfile in every release."""
    if not value.strip():
        return "is empty: give the fetched bundle's lockfile, e.g. bundle/bundle.lock.json"
    return formats.single_line(value)


@dataclass(frozen=True)
class AirGapSpec:
    enabled: bool = setting(
        False,
        doc="Nodes with no route outside the site: every package, image, chart and file comes from the bundle the"
        " seed host serves (docs/air-gap.md).",
    )
    seed: str | None = setting(
        None,
        doc="The node (its `name` in `nodes`) that holds the bundle and serves it: a Debian or Ubuntu host.",
        check=checks.k8s_name,
    )
    lockfile: str = setting(
        "bundle/bundle.lock.json",
        doc="The fetched bundle's lockfile, on the machine that runs Pulumi (relative: to the project folder).",
        check=_lockfile_path,
    )
    bundle_dir: str = setting(
        "/var/lib/mlcluster/bundle",
        doc="Where the bundle lies on the seed host (copied there before `up`: docs/air-gap.md).",
        check=checks.node_directory,
    )
    os_families: tuple[Literal["deb", "rpm"], ...] = setting(
        ("deb", "rpm"),
        doc="The OS families of the site's nodes: the bundle holds the Kubernetes packages of each (a node of"
        " another family is refused by its first step).",
    )
    registry_port: int = setting(5000, doc="The seed registry's port.", check=_port)
    files_port: int = setting(8080, doc="The seed file server's port (packages, charts, files).", check=_port)

    def validate(self, path: str, problems: Problems) -> None:
        if not self.enabled:
            return
        if self.seed is None:
            problems.error(join_path(path, "seed"), "is required when airGap.enabled: name the node that serves")
        if not self.os_families or len(set(self.os_families)) != len(self.os_families):
            problems.error(join_path(path, "osFamilies"), "must list deb, rpm or both, each once")
        if self.registry_port == self.files_port:
            problems.error(join_path(path, "filesPort"), f"is the registry's port too ({self.registry_port})")
        if _lockfile_path(self.lockfile) is not None:
            return  # said by its check
        for problem in bundle_lock(self.lockfile).problems:
            problems.error(join_path(path, "lockfile"), problem)


@dataclass(frozen=True)
class LockedPackage:
    family: str
    name: str
    version: str | None
    digest: str
    path: str


def _repository(reference: str) -> str:
    name = reference.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


@dataclass(frozen=True)
class BundleLock:
    """What the program reads of a fetched lockfile; `problems` says why it cannot be used (each one line)."""

    document: dict[str, Any]
    problems: tuple[str, ...]

    @property
    def kubernetes_version(self) -> str | None:
        value = self.document.get("kubernetesVersion")
        return str(value) if value is not None else None

    @property
    def images(self) -> dict[str, str]:
        """reference -> manifest digest."""
        return {str(i["reference"]): str(i["digest"]) for i in self.document.get("images") or []}

    @property
    def repositories(self) -> frozenset[str]:
        """Each image's reference without its tag or digest."""
        return frozenset(_repository(reference) for reference in self.images)

    @property
    def registries(self) -> tuple[str, ...]:
        """The registries the bundle's images come from (the first component of each normalized reference)."""
        return tuple(sorted({reference.split("/", 1)[0] for reference in self.images}))

    def packages(self, family: str) -> tuple[LockedPackage, ...]:
        return tuple(
            LockedPackage(family, str(p["name"]), p.get("version"), str(p["digest"]), str(p["path"]))
            for p in (self.document.get("packages") or {}).get(family) or []
        )

    def chart(self, reference: str, version: str) -> tuple[str, str] | None:
        """(path inside the bundle, digest) of a release's chart, by its reference's last segment and version (the
        lockfile's chart name: components/airgap/releases.py chart_directory)."""
        name = reference.rstrip("/").rsplit("/", 1)[-1]
        for chart in self.document.get("charts") or []:
            if chart.get("name") == name and str(chart.get("version")) == version:
                return str(chart["path"]), str(chart["digest"])
        return None

    def file_path(self, name: str) -> str | None:
        for item in self.document.get("files") or []:
            if item.get("name") == name:
                return str(item["path"])
        return None


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9+._-]{0,127}")
"""A chart's, package's or file's name: what the seed's and nodes' steps carry in their tab-separated rows."""


def _item_problems(document: dict[str, Any]) -> list[str]:
    """Every item must carry a sha256 digest and a plain path inside the bundle: the lockfile of a fetched bundle.
    Names go into the seed's and the nodes' steps: an image must read as an image reference, every other name as a
    plain name."""
    unfetched: list[str] = []
    problems: list[str] = []

    def item(what: str, entry: Any, needs_path: bool = True) -> None:
        if not isinstance(entry, dict):
            problems.append(f"{what!r}: is not an object")
            return
        name = str(entry.get("reference") if not needs_path else entry.get("name"))
        bad = formats.image_reference(name) if not needs_path else (None if _NAME.fullmatch(name) else "bad")
        if bad is not None:
            problems.append(f"{what!r}: {name!r} is not {'an image reference' if not needs_path else 'a plain name'}")
            return
        if not _DIGEST.fullmatch(str(entry.get("digest") or "")):
            unfetched.append(what)
            return
        if not needs_path:
            return
        path = str(entry.get("path") or "")
        if not path or path.startswith("/") or ".." in path.split("/") or any(c in path for c in "\t\n\r"):
            problems.append(f"{what}: path {path!r} is not a plain path inside the bundle")

    for chart in document.get("charts") or []:
        item(f"chart {chart.get('name')}@{chart.get('version')}", chart)
    for image in document.get("images") or []:
        item(f"image {image.get('reference')}", image, needs_path=False)
    for family, packages in (document.get("packages") or {}).items():
        for package in packages or []:
            item(f"package {family}:{package.get('name')}", package)
    for file in document.get("files") or []:
        item(f"file {file.get('name')}", file)
    if unfetched:
        problems.insert(
            0,
            f"{len(unfetched)} item(s) have no sha256 digest, first {unfetched[0]}: a lockfile from `lock` lists"
            " what to fetch; give the one `python -m components.airgap fetch` wrote",
        )
    return problems


def lockfile_path(lockfile: str) -> Path:
    return Path(lockfile) if Path(lockfile).is_absolute() else PROJECT_DIR / lockfile


def bundle_lock(lockfile: str) -> BundleLock:
    """The lockfile at `lockfile` (relative: to the project folder), read once per run."""
    return _read_lock(lockfile_path(lockfile))


@cache
def _read_lock(path: Path) -> BundleLock:
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        return BundleLock({}, (f"cannot read {path}: {error.strerror}",))
    except ValueError as error:
        return BundleLock({}, (f"{path} is not JSON: {error}",))
    if not isinstance(document, dict) or document.get("schema") != LOCK_SCHEMA:
        return BundleLock({}, (f"{path} is not a bundle lockfile (schema {LOCK_SCHEMA})",))
    try:
        problems = _item_problems(document)
    except (AttributeError, TypeError) as error:
        problems = [f"{path} is not a bundle lockfile: {error}"]
    return BundleLock(document, tuple(problems))
