"""The seed host's first step on an air-gapped site (issue 51): every bundle item against the lockfile, before
anything is served. The bundle is built for the test from real formats: an OCI image layout (opencontainers/
image-spec image-layout.md: oci-layout, index.json, blobs/sha256/<hex>), a Debian package built by dpkg-deb, a chart
archive; the step runs with the host's real bash and sha256sum inside a fleet host."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from components.config.images import MirrorSpec
from components.render import shell
from components.render.images import hosts_document
from components.render.seed import (
    DEB_REPOSITORY,
    IMAGE_BLOBS,
    bundle_items,
    deb_source,
    layout_name,
    seed_mirror_endpoint,
    seed_serve_settings,
)

from ..helm_render import chart_path
from .hosts import HostSpec

pytestmark = pytest.mark.fleet

BUNDLE_ON_SEED = "/var/lib/mlcluster/bundle"
IMAGE = "registry.k8s.io/lws/lws:v0.10.0"


def _blob(layout: Path, data: bytes) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def oci_image(layout: Path, reference: str) -> str:
    """A one-layer image in an OCI layout, as `skopeo copy docker://REF oci:DIR:REF` leaves it (added to the layout's
    index beside the images already there); its manifest digest. Each reference gets a layer of its own."""
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w") as tar:
        content = f"built for the air-gap test: {reference}\n".encode()
        info = tarfile.TarInfo("etc/mlcluster-test")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    layer = _blob(layout, gzip.compress(payload.getvalue(), mtime=0))
    diff_id = "sha256:" + hashlib.sha256(payload.getvalue()).hexdigest()
    config = _blob(
        layout,
        json.dumps(
            {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
        ).encode(),
    )
    manifest = _blob(
        layout,
        json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **layer}],
            }
        ).encode(),
    )
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    index_path = layout / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {"schemaVersion": 2, "manifests": []}
    index["manifests"].append(
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            **manifest,
            "annotations": {"org.opencontainers.image.ref.name": layout_name(reference)},
        }
    )
    index_path.write_text(json.dumps(index))
    return str(manifest["digest"])


def built_deb(
    into: Path, name: str, version: str, depends: str = "", architecture: str = "all", *, content: str = ""
) -> Path:
    """A Debian package built by the real dpkg-deb, in the bundle's Debian repository folder."""
    root = into / "build" / name
    (root / "DEBIAN").mkdir(parents=True)
    control = (
        f"Package: {name}\nVersion: {version}\nArchitecture: {architecture}\nMaintainer: test <t@example.invalid>\n"
    )
    control += f"Depends: {depends}\n" if depends else ""
    (root / "DEBIAN" / "control").write_text(control + "Description: built for the air-gap test\n")
    (root / "usr" / "share" / name).mkdir(parents=True)
    (root / "usr" / "share" / name / "README").write_text(f"{name} {version}\n{content}")
    out = into / DEB_REPOSITORY / f"{name}_{version}_{architecture}.deb"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(out)], check=True, capture_output=True)
    shutil.rmtree(into / "build")
    return out


def deb_package(into: Path) -> Path:
    return built_deb(into, "mlcluster-test", "1.0")


def built_bundle(into: Path) -> dict[str, Any]:
    """The bundle on disk and its fetched lockfile (digests and paths filled)."""
    manifest = oci_image(into / "images", IMAGE)
    package = deb_package(into)
    chart = into / "charts" / "lws-v0.10.0.tgz"
    chart.parent.mkdir()
    with tarfile.open(chart, "w:gz") as tar:
        tar.add(chart_path("lws", "v0.10.0"), arcname="lws")
    key = into / "files" / "kubernetes-deb-key"
    key.parent.mkdir()
    key.write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\ntest\n-----END PGP PUBLIC KEY BLOCK-----\n")

    def sha(path: Path) -> str:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()

    return {
        "charts": [{"name": "lws", "version": "v0.10.0", "digest": sha(chart), "path": "charts/lws-v0.10.0.tgz"}],
        "images": [{"reference": IMAGE, "digest": manifest}],
        "packages": {
            "deb": [
                {
                    "name": "mlcluster-test",
                    "version": "1.0",
                    "digest": sha(package),
                    "path": str(package.relative_to(into)),
                }
            ]
        },
        "files": [
            {
                "name": "kubernetes-deb-key",
                "url": "https://x/Release.key",
                "digest": sha(key),
                "path": "files/kubernetes-deb-key",
            }
        ],
    }


def verify_on(host: Any, lock: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    items, problems = bundle_items(lock)
    assert problems == []
    script = shell.render_script("bundle-verify", {"BUNDLE_DIR": BUNDLE_ON_SEED, "BUNDLE_ITEMS": items})
    return host.run(f"bash -c {shlex.quote(script)}", check=False)


def put_on(host: Any, bundle: Path) -> None:
    """The bundle copied onto the seed host's disk (its own /var), as `rsync` would."""
    host.run(
        f"mkdir -p {shlex.quote(str(Path(BUNDLE_ON_SEED).parent))} && cp -r {shlex.quote(str(bundle))} {BUNDLE_ON_SEED}"
    )


def flip_byte(host: Any, path: str) -> None:
    """One bit of the file's middle byte flipped on the host's disk."""
    host.run(
        'python3 -c \'import sys; p = sys.argv[1]; d = bytearray(open(p, "rb").read());'
        ' d[len(d) // 2] ^= 1; open(p, "wb").write(d)\' ' + shlex.quote(path)
    )


def test_the_seed_checks_every_item_and_a_flipped_byte_stops_at_its_item(fleet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hosts = fleet(HostSpec("seed"))
    seed = hosts["seed"]
    bundle = tmp_path / "bundle"
    lock = built_bundle(bundle)
    put_on(seed, bundle)
    good = verify_on(seed, lock)
    assert good.returncode == 0, good.stderr
    assert f"ok: bundle at {BUNDLE_ON_SEED}: 4 items match the lockfile (2 image blobs)" in good.stdout

    # One bit of the image's layer flipped on the seed's disk: the step names the image and the blob.
    manifest = json.loads((bundle / IMAGE_BLOBS / lock["images"][0]["digest"].split(":")[1]).read_bytes())
    layer = f"{BUNDLE_ON_SEED}/{IMAGE_BLOBS}/{manifest['layers'][0]['digest'].split(':')[1]}"
    flip_byte(seed, layer)
    flipped = verify_on(seed, lock)
    assert flipped.returncode != 0
    assert f"error: bundle item image {IMAGE}: {layer.removeprefix(BUNDLE_ON_SEED + '/')} has sha256" in flipped.stderr
    assert "ok: bundle" not in flipped.stdout

    # Flipped back, and a package missing from the seed's copy: that stops it the same way, by name.
    flip_byte(seed, layer)
    seed.run(f"rm {BUNDLE_ON_SEED}/{lock['packages']['deb'][0]['path']}")
    missing = verify_on(seed, lock)
    assert missing.returncode != 0
    assert (
        "error: bundle item package deb:mlcluster-test: packages/deb/mlcluster-test_1.0_all.deb is missing"
        in missing.stderr
    )


REGISTRY_PORT = 5000
FILES_PORT = 8080
MANIFEST_TYPES = "application/vnd.oci.image.manifest.v1+json,application/vnd.docker.distribution.manifest.v2+json"


def serve_on(host: Any, lock: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    settings = seed_serve_settings(lock, BUNDLE_ON_SEED, host.address, REGISTRY_PORT, FILES_PORT)
    return host.run(f"bash -c {shlex.quote(shell.render_script('seed-serve', settings))}", check=False)


def listening(host: Any, port: int) -> str | None:
    """The command line of what listens on `port` in the host's network namespace, or None."""
    found = host.run(f"ss -Hltnp 'sport = :{port}'").stdout
    match = re.search(r"pid=(\d+)", found)
    if match is None:
        return None
    return host.run(f"tr '\\0' ' ' </proc/{match.group(1)}/cmdline").stdout.strip()


def manifest_url_as_containerd_asks(document: dict[str, Any], reference: str) -> str:
    """The first host of a hosts.toml document and the manifest URL containerd asks it for: with override_path the
    host's path is the API root as written, and containerd appends `/<name>/manifests/<ref>` (containerd
    remotes/docker/config/hosts.go parseHostConfig, v1.7; remotes/docker/resolver.go)."""
    (endpoint, host), *_ = document["host"].items()
    assert host.get("override_path") is True and host["capabilities"] == ["pull", "resolve"]
    name, _, tag = reference.partition("/")[2].rpartition(":")
    return f"{endpoint}/{name}/manifests/{tag}"


def test_the_seed_serves_the_checked_bundle_from_a_real_registry_and_apt_repository(fleet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hosts = fleet(HostSpec("seed", os="ubuntu-24.04", offline=True), HostSpec("node", offline=True))
    seed, node = hosts["seed"], hosts["node"]
    seed.set(ufw="active")
    # No route leaves the fleet's network, and the one outside URL the stubs answer does not answer here either.
    assert "default" not in node.run("ip route").stdout
    key_fetch = node.run("curl -fsSL https://pkgs.k8s.io/core:/stable:/v1.34/deb/Release.key", check=False)
    assert key_fetch.returncode == 6 and "Could not resolve host: pkgs.k8s.io" in key_fetch.stderr

    bundle = tmp_path / "bundle"
    lock = built_bundle(bundle)
    put_on(seed, bundle)
    assert verify_on(seed, lock).returncode == 0
    served = serve_on(seed, lock)
    assert served.returncode == 0, served.stdout + served.stderr
    assert "changed: 1 image(s) loaded into the seed registry (0 already there), each at its lockfile digest" in (
        served.stdout
    )
    assert "changed: apt repository index written (1 packages)" in served.stdout
    assert f"changed: ufw opens {REGISTRY_PORT}/tcp {FILES_PORT}/tcp" in served.stdout
    assert seed.state()["ufw"]["rules"] == [f"{REGISTRY_PORT}/tcp", f"{FILES_PORT}/tcp"]
    assert f"ok: seed serves images at http://{seed.address}:{REGISTRY_PORT}" in served.stdout
    # The real programs run as the unit files say.
    assert listening(seed, REGISTRY_PORT) == "/usr/bin/docker-registry serve /etc/mlcluster/seed-registry.yml"
    assert listening(seed, FILES_PORT) == (
        f"/usr/bin/python3 -m http.server --bind {seed.address} --directory {BUNDLE_ON_SEED} {FILES_PORT}"
    )

    # Run again: everything is there, nothing changes.
    again = serve_on(seed, lock)
    assert again.returncode == 0 and "changed:" not in again.stdout, again.stdout
    assert "ok: 1 image(s) in the seed registry at their lockfile digests" in again.stdout

    # A node asks the seed's registry as its hosts.toml tells containerd to: the manifest digest is the lockfile's.
    mirror = MirrorSpec(
        registry="registry.k8s.io",
        endpoints=(seed_mirror_endpoint(seed.address, REGISTRY_PORT, "registry.k8s.io"),),
        mirrors_only=True,
        override_path=True,
    )
    document = hosts_document(mirror)
    assert "server" not in document  # mirror-only: no fallback to the internet
    url = manifest_url_as_containerd_asks(document, IMAGE)
    assert url == f"http://{seed.address}:{REGISTRY_PORT}/v2/registry.k8s.io/lws/lws/manifests/v0.10.0"
    head = node.run(f"/usr/bin/curl -fsS -I -H {shlex.quote('Accept: ' + MANIFEST_TYPES)} {url}").stdout
    assert f"Docker-Content-Digest: {lock['images'][0]['digest']}" in head
    manifest = node.run(f"/usr/bin/curl -fsS -H {shlex.quote('Accept: ' + MANIFEST_TYPES)} {url} | sha256sum").stdout
    assert manifest.split()[0] == lock["images"][0]["digest"].removeprefix("sha256:")

    # The node's apt source and what apt reads from it: apt-ftparchive's index names the package at its digest.
    source = deb_source(seed.address, FILES_PORT)
    base = source.split()[2]
    index = node.run(f"/usr/bin/curl -fsS {base}Packages").stdout
    package = lock["packages"]["deb"][0]
    assert "Package: mlcluster-test\n" in index and "\nVersion: 1.0\n" in index
    assert f"SHA256: {package['digest'].removeprefix('sha256:')}" in index
    filename = next(line.split(": ", 1)[1] for line in index.splitlines() if line.startswith("Filename: "))
    fetched = node.run(f"/usr/bin/curl -fsS {base}{filename} | sha256sum").stdout
    assert fetched.split()[0] == package["digest"].removeprefix("sha256:")
    release = node.run(f"/usr/bin/curl -fsS {base}Release").stdout
    assert "Origin: mlcluster-seed" in release and "Packages" in release
    assert DEB_REPOSITORY in base


def test_a_flipped_byte_stops_the_seed_before_its_registry_serves_anything(fleet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The program runs serve only after verify (a dependency); here: verify fails on the flipped layer, so the run
    ends there and the registry never started."""
    seed = fleet(HostSpec("seed", offline=True))["seed"]
    bundle = tmp_path / "bundle"
    lock = built_bundle(bundle)
    put_on(seed, bundle)
    manifest = json.loads((bundle / IMAGE_BLOBS / lock["images"][0]["digest"].split(":")[1]).read_bytes())
    config = f"{BUNDLE_ON_SEED}/{IMAGE_BLOBS}/{manifest['config']['digest'].split(':')[1]}"
    flip_byte(seed, config)
    flipped = verify_on(seed, lock)
    assert flipped.returncode != 0 and f"error: bundle item image {IMAGE}:" in flipped.stderr
    assert listening(seed, REGISTRY_PORT) is None


def test_a_lockfile_not_fetched_yet_gives_the_seed_nothing_to_check() -> None:
    items, problems = bundle_items({"images": [{"reference": IMAGE, "digest": None}], "charts": [], "files": []})
    assert items == "" and problems == [f"image {IMAGE}: no sha256 digest and path (fetch the bundle first)"]
    _, escaping = bundle_items(
        {"files": [{"name": "k", "url": "u", "digest": "sha256:" + "0" * 64, "path": "../etc/shadow"}]}
    )
    assert escaping == ["file k: path '../etc/shadow' is not a plain path inside the bundle"]
