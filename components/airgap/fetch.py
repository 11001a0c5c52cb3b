"""Fetch a bundle on a machine with internet: every item of a lockfile from `lock` into one folder, each digest
filled, then the folder checked with the seed's own check (components/scripts/bundle-verify.sh).

The tools are the field's own (docs/air-gap.md says why):
- images: `skopeo copy docker://REF oci:<bundle>/images:<name>` (containers/skopeo): the OCI image layout keeps
  each manifest and blob under its digest, so the lockfile's digest is the manifest's and every blob can be checked
  offline. A tag is copied for one platform (`--override-arch`); a reference pinned by digest is copied whole
  (`--all`), so the seed serves the very index that digest names.
- Debian packages: `apt-get download` against the Kubernetes project's repository, with a private sources list,
  state and cache, so apt checks each package against the repository's signed index (the key from the bundle's
  files) and the machine's own apt is untouched.
- RPM packages: `dnf download` (on a RHEL-family machine, or any with dnf) from the Kubernetes project's and
  Docker's repositories. `dnf download` checks each package against the repository's metadata but not its signature
  (dnf-plugins-core download.py calls base.download_packages, which checks checksums; signatures are checked only
  in a transaction), so each package is then checked with `rpmkeys --checksig` against the repository's key in a
  keyring of its own: a package not signed by that key stops the fetch and is removed.
- charts: the pulled chart folders archived as `helm package` would (one top folder per chart).
- files: fetched over HTTPS.

A fetch that stops half way is resumed by running it again: what is already in the folder at its digest stays.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..render import shell
from ..render.seed import DEB_REPOSITORY, IMAGE_LAYOUT, RPM_REPOSITORY, bundle_items, layout_name
from .charts import pulled_chart

Runner = Callable[[Sequence[str], Path | None], subprocess.CompletedProcess[str]]
LOCKFILE = "bundle.lock.json"


def docker_rpm_repository(key_url: str, release: str, arch: str) -> str:
    """The Docker CE repository containerd.io comes from on RHEL, beside its key as Docker lays them out
    (docker-ce.repo: baseurl=https://download.docker.com/linux/rhel/$releasever/$basearch/stable,
    gpgkey=https://download.docker.com/linux/rhel/gpg; components/render/node_steps.py DOCKER_REPO_RPM)."""
    return f"{key_url.rsplit('/', 1)[0]}/{release}/{arch}/stable"


RPM_ARCH = {"amd64": "x86_64", "arm64": "aarch64"}


class FetchError(RuntimeError):
    """An item that could not be fetched, by name."""


def run_tool(argv: Sequence[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, check=False)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def _checked(result: subprocess.CompletedProcess[str], item: str) -> subprocess.CompletedProcess[str]:
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise FetchError(f"{item}: {lines[-1] if lines else f'exit {result.returncode}'}")
    return result


def chart_archive(source: Path, name: str, target: Path) -> None:
    """The chart folder as a .tgz with one top folder named after the chart (Helm's archive layout), its bytes
    the same on every run: sorted entries, no owners, no times."""
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(source.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=f"{name}/{path.relative_to(source).as_posix()}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if path.is_file():
                with open(path, "rb") as data:
                    tar.addfile(info, data)
            else:
                tar.addfile(info)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip.compress(payload.getvalue(), mtime=0))


def _layout_manifest(layout: Path, name: str) -> str | None:
    """The manifest digest the OCI layout's index holds for `name`, when its blob is there."""
    index = layout / "index.json"
    if not index.exists():
        return None
    for entry in json.loads(index.read_text()).get("manifests") or []:
        if (entry.get("annotations") or {}).get("org.opencontainers.image.ref.name") == name:
            digest = str(entry["digest"])
            if (layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).exists():
                return digest
    return None


class Fetch:
    def __init__(
        self,
        out: Path,
        *,
        runner: Runner = run_tool,
        arch: str = "amd64",
        say: Callable[[str], None] = print,
        registries_conf: Path | None = None,
    ):
        self.out = out
        self.runner = runner
        self.arch = arch
        self.say = say
        # containers-registries.conf(5): where each registry is reached from this machine (a proxy, a mirror).
        self.skopeo = ["skopeo", *(["--registries-conf", str(registries_conf)] if registries_conf else [])]

    def charts(self, charts: list[dict[str, Any]], source: Path) -> None:
        for chart in charts:
            name, version = chart["name"], chart["version"]
            target = self.out / "charts" / f"{name}-{version}.tgz"
            pulled = source / f"{name}-{version}.tgz"
            if pulled.is_file():
                # `helm pull` without --untar: Helm's own archive, taken as it is.
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(pulled, target)
            else:
                chart_archive(pulled_chart(source, name, version), name, target)
            chart["path"] = str(target.relative_to(self.out))
            chart["digest"] = sha256_of(target)
            self.say(f"chart {name}@{version}: {chart['digest']}")

    def images(self, images: list[dict[str, Any]]) -> None:
        layout = self.out / IMAGE_LAYOUT
        for image in images:
            reference = str(image["reference"])
            name = layout_name(reference)
            digest = _layout_manifest(layout, name)
            if digest is None:
                pinned = "@" in reference
                platform = ["--all"] if pinned else ["--override-os", "linux", "--override-arch", self.arch]
                _checked(
                    self.runner(
                        [*self.skopeo, "copy", "--quiet", *platform, f"docker://{reference}", f"oci:{layout}:{name}"],
                        None,
                    ),
                    f"image {reference}",
                )
                digest = _layout_manifest(layout, name)
                if digest is None:
                    raise FetchError(f"image {reference}: skopeo left no manifest named {name} in {layout}")
            if "@" in reference and digest != reference.rsplit("@", 1)[1]:
                raise FetchError(f"image {reference}: the registry served {digest}, not the digest the stack pins")
            image["digest"] = digest
            self.say(f"image {reference}: {digest}")

    def files(self, files: list[dict[str, Any]]) -> None:
        for file in files:
            target = self.out / "files" / file["name"]
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with urllib.request.urlopen(file["url"], timeout=60) as response:
                        target.write_bytes(response.read())
                except OSError as error:
                    raise FetchError(f"file {file['name']}: {file['url']}: {error}") from None
            file["path"] = str(target.relative_to(self.out))
            file["digest"] = sha256_of(target)
            self.say(f"file {file['name']}: {file['digest']}")

    def deb_packages(self, packages: list[dict[str, Any]], key: Path, repository: str) -> None:
        """`apt-get download` from `repository` (the Kubernetes project's `<base>/deb/`), trusting `key` only."""
        folder = self.out / DEB_REPOSITORY
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="mlcluster-apt-") as work_dir:
            work = Path(work_dir)
            (work / "lists" / "partial").mkdir(parents=True)
            (work / "cache" / "archives" / "partial").mkdir(parents=True)
            # apt reads an armored key from a file named .asc (sources.list(5), signed-by).
            shutil.copyfile(key, work / "kubernetes.asc")
            (work / "sources.list").write_text(f"deb [signed-by={work / 'kubernetes.asc'}] {repository} /\n")
            (work / "status").write_text("")
            apt = [
                "-o", f"Dir::Etc::SourceList={work / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/dev/null",
                "-o", f"Dir::State::Lists={work / 'lists'}", "-o", f"Dir::State::status={work / 'status'}",
                "-o", f"Dir::Cache={work / 'cache'}", "-o", "APT::Sandbox::User=root",
                "-o", f"APT::Architecture={self.arch}",
            ]  # fmt: skip
            _checked(self.runner(["apt-get", *apt, "update", "-q"], None), f"the Debian repository {repository}")
            for package in packages:
                name, version = package["name"], package.get("version")
                have = sorted(folder.glob(f"{name}_{version or ''}*.deb"))
                if not have:
                    wanted = f"{name}={version}-*" if version else name
                    _checked(self.runner(["apt-get", *apt, "download", "-q", wanted], folder), f"package deb:{name}")
                    have = sorted(folder.glob(f"{name}_{version or ''}*.deb"))
                if not have:
                    raise FetchError(f"package deb:{name}: apt-get download left no {name}_*.deb in {folder}")
                self._package(package, have[-1], "deb")

    def rpm_packages(
        self,
        packages: list[dict[str, Any]],
        keys: Mapping[str, Path],
        repositories: Mapping[str, str],
        release: str,
    ) -> None:
        """`dnf download` from the Kubernetes project's repository (and Docker's for containerd.io), each package
        then checked against its repository's key (`rpmkeys --checksig`), also one already there from a run before."""
        folder = self.out / RPM_REPOSITORY
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="mlcluster-rpm-") as private:
            # The repositories' metadata in a cache of this run's own: a cache left by another run (dnf keeps
            # metadata 48 h) would name files that are no longer there; the machine's metadata cache stays as it was.
            cache = Path(private) / "cache"
            for package in packages:
                name, version = package["name"], package.get("version")
                repo = "docker" if name == "containerd.io" else "kubernetes"
                have = sorted(folder.glob(f"{name}-{version or ''}*.rpm"))
                if not have:
                    options = [
                        f"--repofrompath=mlcluster-{repo},{repositories[repo]}", f"--repo=mlcluster-{repo}",
                        f"--setopt=mlcluster-{repo}.gpgcheck=1",
                        f"--setopt=mlcluster-{repo}.gpgkey=file://{keys[repo]}",
                        f"--setopt=cachedir={cache}", f"--releasever={release}", f"--arch={RPM_ARCH[self.arch]}",
                        f"--destdir={folder}",
                    ]  # fmt: skip
                    wanted = f"{name}-{version}" if version else name
                    _checked(self.runner(["dnf", "download", "-q", *options, wanted], None), f"package rpm:{name}")
                    have = sorted(folder.glob(f"{name}-{version or ''}*.rpm"))
                if not have:
                    raise FetchError(f"package rpm:{name}: dnf download left no {name}-*.rpm in {folder}")
                self._signed(name, have[-1], keys[repo], Path(private) / f"{repo}-keyring")
                self._package(package, have[-1], "rpm")

    def _signed(self, name: str, path: Path, key: Path, keyring: Path) -> None:
        """The package's signature made by `key` (rpmkeys with a private rpm database holding that key alone).
        rpmkeys exits 0 on an unsigned package ("digests OK"), so "signatures OK" itself is required."""
        if not keyring.exists():
            keyring.mkdir()
            _checked(self.runner(["rpmkeys", "--dbpath", str(keyring), "--import", str(key)], None), f"key {key}")
        checked = self.runner(["rpmkeys", "--dbpath", str(keyring), "--checksig", str(path)], None)
        verdict = checked.stdout.strip().removeprefix(f"{path}:").strip()
        if checked.returncode != 0 or not verdict.endswith("signatures OK"):
            path.unlink()
            raise FetchError(
                f"package rpm:{name}: {path.name} is not signed by the repository's key (rpmkeys --checksig:"
                f" {verdict or checked.stderr.strip() or f'exit {checked.returncode}'}); it was removed"
            )

    def _package(self, package: dict[str, Any], path: Path, family: str) -> None:
        package["path"] = str(path.relative_to(self.out))
        package["digest"] = sha256_of(path)
        package["file"] = path.name
        self.say(f"package {family}:{package['name']}: {path.name} {package['digest']}")


TOOLS = {
    "skopeo": "images (Debian/Ubuntu: apt-get install skopeo; RHEL: dnf install skopeo)",
    "apt-get": "the deb family's packages: fetch on a Debian or Ubuntu machine, or leave the family out with"
    " airGap.osFamilies: [rpm]",
    "dnf": "the rpm family's packages: fetch on a RHEL-family machine (or install dnf and dnf-plugins-core), or"
    " leave the family out with airGap.osFamilies: [deb]",
    "rpmkeys": "the rpm family's signatures (it comes with rpm)",
}


def missing_tools(lock: Mapping[str, Any]) -> list[str]:
    """The tools this lockfile's items need that this machine lacks, each with the way out: said before anything is
    downloaded."""
    packages = lock.get("packages") or {}
    needed = [
        *(["skopeo"] if lock.get("images") else []),
        *(["apt-get"] if packages.get("deb") else []),
        *(["dnf", "rpmkeys"] if packages.get("rpm") else []),
    ]
    return [f"{tool} is not on this machine: it fetches {TOOLS[tool]}" for tool in needed if shutil.which(tool) is None]


def verify_bundle(out: Path, lock: Mapping[str, Any], runner: Runner = run_tool) -> list[str]:
    """The seed's own check (bundle-verify.sh, run here with this machine's bash) on the fetched folder."""
    items, problems = bundle_items(lock)
    if problems:
        return problems
    script = shell.render_script("bundle-verify", {"BUNDLE_DIR": str(out), "BUNDLE_ITEMS": items})
    result = runner(["bash", "-c", script], None)
    if result.returncode != 0:
        return [line.removeprefix("error: ") for line in result.stderr.splitlines() if line.startswith("error: ")]
    return []


def fetch_bundle(
    lock: Mapping[str, Any],
    charts: Path,
    out: Path,
    *,
    runner: Runner = run_tool,
    arch: str = "amd64",
    rhel_release: str = "9",
    say: Callable[[str], None] = print,
    registries_conf: Path | None = None,
    extra_images: Sequence[str] = (),
) -> dict[str, Any]:
    """The fetched lockfile (also written to <out>/bundle.lock.json); FetchError names the first item that failed.
    `extra_images`: what the lockfile's `unresolved` asks for, once listed (`kubeadm config images list`)."""
    filled: dict[str, Any] = json.loads(json.dumps(lock))
    known = {str(i["reference"]) for i in filled.get("images") or []}
    for reference in extra_images:
        if reference not in known:
            filled.setdefault("images", []).append(
                {"reference": reference, "digest": None, "sources": ["fetch --image"]}
            )
            known.add(reference)
    filled.setdefault("counts", {})["images"] = len(filled.get("images") or [])
    lacking = missing_tools(filled)
    if lacking:
        raise FetchError("; ".join(lacking))
    fetch = Fetch(out, runner=runner, arch=arch, say=say, registries_conf=registries_conf)
    out.mkdir(parents=True, exist_ok=True)
    fetch.files(filled.get("files") or [])
    fetch.charts(filled.get("charts") or [], charts)
    fetch.images(filled.get("images") or [])
    files = {f["name"]: out / f["path"] for f in filled.get("files") or []}
    urls = {f["name"]: str(f["url"]) for f in filled.get("files") or []}
    packages = filled.get("packages") or {}
    if packages.get("deb"):
        repository = urls["kubernetes-deb-key"].removesuffix("Release.key")
        fetch.deb_packages(packages["deb"], files["kubernetes-deb-key"], repository)
    if packages.get("rpm"):
        fetch.rpm_packages(
            packages["rpm"],
            {"kubernetes": files["kubernetes-rpm-key"], "docker": files["docker-ce-rpm-key"]},
            {
                "kubernetes": urls["kubernetes-rpm-key"].removesuffix("repodata/repomd.xml.key"),
                "docker": docker_rpm_repository(urls["docker-ce-rpm-key"], rhel_release, RPM_ARCH[arch]),
            },
            rhel_release,
        )
    problems = verify_bundle(out, filled, runner)
    if problems:
        raise FetchError("the fetched bundle fails the seed's check: " + "; ".join(problems))
    (out / LOCKFILE).write_text(json.dumps(filled, indent=2) + "\n")
    return filled
