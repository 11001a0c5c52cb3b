"""Stand-ins for the internet an air-gap bundle is fetched from, each a real program on a loopback port of this
machine: the distribution registry (Debian's docker-registry) holding test images, reached by skopeo through a
containers-registries.conf(5) that maps registry.k8s.io and docker.io to it; and an apt repository laid out as the
Kubernetes project's (`<base>/deb/` with Release.key), indexed by apt-ftparchive and signed with the real gpg by a key
made for the test."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from components.config.spec import DEFAULT_KUBERNETES_VERSION
from components.render.seed import layout_name

from ..helm_render import chart_path
from .test_airgap_bundle import built_deb, oci_image

VERSION = DEFAULT_KUBERNETES_VERSION


def project_packages(version: str) -> tuple[tuple[str, str, str], ...]:
    """The Kubernetes project's packages of `version`'s minor repository, with the Depends its kubeadm and kubelet
    declare (name, version, Depends); an older kubeadm patch beside."""
    major, minor, patch = version.split(".")
    return (
        ("kubeadm", f"{major}.{minor}.{max(int(patch) - 1, 0)}-1.1", ""),
        ("kubeadm", f"{version}-1.1", "cri-tools (>= 1.30.0)"),
        ("kubelet", f"{version}-1.1", "kubernetes-cni (>= 1.2.0)"),
        ("kubectl", f"{version}-1.1", ""),
        ("cri-tools", f"{major}.{minor}.0-1.1", ""),
        ("kubernetes-cni", "1.7.1-1.1", ""),
    )


IMAGES = (
    f"registry.k8s.io/kube-apiserver:v{VERSION}",
    "docker.io/library/busybox:1.37.0-musl",
)


def gnupg_home() -> Path:
    """A gpg home of its own under /tmp: gpg-agent's socket lives in it, and a unix socket's path may not be longer
    than 107 bytes (unix(7), sun_path), which a pytest worker's tmp_path can exceed."""
    return Path(tempfile.mkdtemp(prefix="mlcgpg-", dir="/tmp"))


def forget_gnupg_home(home: Path) -> None:
    """The gpg-agent that gpg started for `home` stopped, the home removed."""
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False, capture_output=True)
    shutil.rmtree(home, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait(url: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if subprocess.run(["curl", "-fsS", "-o", "/dev/null", url], check=False).returncode == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer")


class Internet:
    """The upstream servers, each a real program on a loopback port of its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.registry_port = _free_port()
        self.files_port = _free_port()
        self.gnupg = gnupg_home()
        self.registries_conf = root / "registries.conf"
        self.registries_conf.write_text(
            "".join(
                f'[[registry]]\nprefix = "{registry}"\nlocation = "127.0.0.1:{self.registry_port}/{registry}"\n'
                "insecure = true\n\n"
                for registry in ("registry.k8s.io", "docker.io", "ghcr.io")
            )
        )
        self.calls: list[list[str]] = []

    def start(self) -> None:
        config = self.root / "registry.yml"
        config.write_text(
            f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {self.root / 'registry'}\n"
            f"http:\n  addr: 127.0.0.1:{self.registry_port}\n"
        )
        log = open(self.root / "servers.log", "ab")  # noqa: SIM115 - lives as long as the servers
        self.processes.append(subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=log))
        self.web = self.root / "web"
        self.web.mkdir()
        self.processes.append(
            subprocess.Popen(
                [
                    "python3",
                    "-m",
                    "http.server",
                    "--bind",
                    "127.0.0.1",
                    "--directory",
                    str(self.web),
                    str(self.files_port),
                ],
                stdout=log,
                stderr=log,
            )
        )
        _wait(f"http://127.0.0.1:{self.registry_port}/v2/")
        _wait(f"http://127.0.0.1:{self.files_port}/")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
            process.wait(timeout=10)
        forget_gnupg_home(self.gnupg)

    def push_images(self, layout: Path, references: Sequence[str] = IMAGES) -> dict[str, str]:
        """Each test image into the registry under its registry's path; reference -> manifest digest."""
        digests = {}
        for reference in references:
            digests[reference] = oci_image(layout, reference)
            subprocess.run(
                [
                    "skopeo", "copy", "--quiet", "--preserve-digests", "--dest-tls-verify=false",
                    f"oci:{layout}:{layout_name(reference)}",
                    f"docker://127.0.0.1:{self.registry_port}/{reference}",
                ],
                check=True,
            )  # fmt: skip
        return digests

    def gpg(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["gpg", "--homedir", str(self.gnupg), "--batch", "--yes", *args], check=True, capture_output=True, text=True
        )

    def kubernetes_repository(self, version: str = VERSION) -> tuple[str, dict[str, Path]]:
        """`<base>/deb/` of `version`'s minor as the project's: flat, signed InRelease, the armored key at
        Release.key; its debs (project_packages), by name (the last of a name built)."""
        minor = "v" + ".".join(version.split(".")[:2])
        deb = self.web / "core:" / "stable:" / minor / "deb"
        deb.mkdir(parents=True)
        self.gpg(
            "--passphrase", "", "--quick-gen-key", "mlcluster test <t@example.invalid>", "ed25519", "sign", "never"
        )
        (deb / "Release.key").write_text(self.gpg("--armor", "--export").stdout)
        staging = self.root / "staging" / minor
        debs = {
            name: built_deb(staging, name, package_version, depends, architecture="amd64")
            for name, package_version, depends in project_packages(version)
        }
        for path in (staging / "packages" / "deb").glob("*.deb"):
            shutil.copy(path, deb / path.name)
        index = subprocess.run(["apt-ftparchive", "packages", "."], cwd=deb, check=True, capture_output=True).stdout
        (deb / "Packages").write_bytes(index)
        release = subprocess.run(["apt-ftparchive", "release", "."], cwd=deb, check=True, capture_output=True).stdout
        (deb / "Release").write_bytes(release)
        self.gpg("--clearsign", "--output", str(deb / "InRelease"), str(deb / "Release"))
        return f"http://127.0.0.1:{self.files_port}/core:/stable:/{minor}", debs

    def rpm_repositories(self, version: str = VERSION, *, stranger_signs: str = "") -> tuple[str, str, dict[str, Path]]:
        """The project's yum repository of `version`'s minor (`<base>/rpm/`, createrepo_c's metadata, the armored key
        at repodata/repomd.xml.key, as pkgs.k8s.io lays it out; an older kubeadm patch beside) and Docker's
        (`/linux/rhel/gpg`, `/linux/rhel/9/x86_64/stable/` with containerd.io, as download.docker.com lays it out),
        every RPM built by rpmbuild and signed by rpmsign with the test's key; `stranger_signs`: that package is signed
        by another key. (the Kubernetes base URL, Docker's key URL, each package's file by name)."""
        minor = "v" + ".".join(version.split(".")[:2])
        signer, stranger = "mlcluster rpm signer", "a stranger"
        for name in (signer, stranger):
            known = ["gpg", "--homedir", str(self.gnupg), "--batch", "--list-keys", name]
            if subprocess.run(known, capture_output=True, check=False).returncode != 0:  # one key per name
                self.gpg(
                    "--passphrase", "", "--quick-gen-key", f"{name} <r@example.invalid>", "rsa3072", "sign", "never"
                )
        key = self.gpg("--armor", "--export", signer).stdout
        kubernetes = self.web / "core:" / "stable:" / minor / "rpm"
        docker_key = self.web / "linux" / "rhel" / "gpg"
        docker = docker_key.parent / "9" / "x86_64" / "stable"
        built: dict[str, Path] = {}
        for name, package_version, _ in project_packages(version):
            requires = {"kubeadm": "cri-tools >= 1.30.0", "kubelet": "kubernetes-cni >= 1.2.0"}.get(name, "")
            built[name] = self._rpm(
                kubernetes, name, package_version, requires, stranger if name == stranger_signs else signer
            )
        built["containerd.io"] = self._rpm(
            docker, "containerd.io", "1.7.27", "", stranger if stranger_signs == "containerd.io" else signer
        )
        for folder in (kubernetes, docker):
            subprocess.run(["createrepo_c", "--quiet", str(folder)], check=True, capture_output=True)
        (kubernetes / "repodata" / "repomd.xml.key").write_text(key)
        docker_key.write_text(key)
        base = f"http://127.0.0.1:{self.files_port}"
        return f"{base}/core:/stable:/{minor}", f"{base}/linux/rhel/gpg", built

    def _rpm(self, folder: Path, name: str, package_version: str, requires: str, signer: str) -> Path:
        staging = self.root / "rpm-staging" / name / package_version
        path = built_rpm(staging, name, package_version.removesuffix("-1.1"), requires, gnupg=self.gnupg, signer=signer)
        folder.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(path, folder / path.name))

    def runner(self, argv: Sequence[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        return subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, check=False)


def unfetched_lock(
    base: str,
    images: Sequence[str] = IMAGES,
    charts: Sequence[tuple[str, str]] = (("lws", "v0.10.0"),),
    version: str = VERSION,
) -> dict[str, Any]:
    """What `lock` writes for a Debian-only stack: names, versions and sources, no digests."""
    return {
        "schema": "mlcluster.io/bundle-lock/v1",
        "stack": "fetch",
        "kubernetesVersion": version,
        "counts": {"charts": len(charts), "images": len(images), "packages": 5, "files": 1},
        "charts": [{"name": n, "chart": n, "version": v, "releases": [], "digest": None} for n, v in charts],
        "images": [{"reference": r, "digest": None, "sources": ["test"]} for r in images],
        "packages": {
            "deb": [
                {
                    "name": name,
                    "version": version if name in ("kubeadm", "kubelet", "kubectl") else None,
                    "digest": None,
                }
                for name in ("kubeadm", "kubelet", "kubectl", "cri-tools", "kubernetes-cni")
            ]
        },
        "files": [{"name": "kubernetes-deb-key", "url": f"{base}/deb/Release.key", "digest": None}],
        "unresolved": [],
        "unrendered": [],
    }


def pulled_charts(into: Path, charts: Sequence[tuple[str, str]] = (("lws", "v0.10.0"),)) -> Path:
    """The charts as `helm pull --untar` leaves them (<chart>/<version>/), from the pinned sources."""
    for name, version in charts:
        shutil.copytree(chart_path(name, version), into / name / version)
    return into


RPM_SPEC = """Name: {name}
Version: {version}
Release: {release}
Summary: built for the air-gap test
License: Apache-2.0
BuildArch: x86_64
{requires}
%description
built for the air-gap test
%install
mkdir -p %{{buildroot}}/usr/share/{name}
echo '{name} {version}' > %{{buildroot}}/usr/share/{name}/README
%files
/usr/share/{name}/README
"""


def built_rpm(into: Path, name: str, version: str, requires: str, *, gnupg: Path, signer: str) -> Path:
    """An RPM built by the real rpmbuild and signed by the real rpmsign with `signer`'s key in `gnupg`, in the
    bundle's yum repository folder (the project's packages are signed; so are Docker's)."""
    top = into / "rpmbuild"
    spec = top / f"{name}.spec"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(
        RPM_SPEC.format(
            name=name, version=version, release="150500.1.1", requires=f"Requires: {requires}" if requires else ""
        )
    )
    subprocess.run(
        ["rpmbuild", "-bb", "--define", f"_topdir {top}", "--define", "__os_install_post %{nil}", str(spec)],
        check=True,
        capture_output=True,
    )
    (built,) = (top / "RPMS" / "x86_64").glob(f"{name}-{version}-*.rpm")
    env = {**os.environ, "GNUPGHOME": str(gnupg)}
    sign = ["rpmsign", "--addsign", "--define", f"_gpg_name {signer}", "--define", "__gpg /usr/bin/gpg", str(built)]
    subprocess.run(sign, check=True, capture_output=True, env=env)
    target = into / "packages" / "rpm" / built.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(built, target)
    return target


def rpm_family(bundle: Path, lock: dict[str, Any], version: str = VERSION, *, kubelet_signer: str = "") -> Path:
    """The rpm family added to a fetched bundle in the layout `fetch` gives it (test_airgap_fetch.py runs the real
    dnf), built here directly so that a bundle can also carry what `fetch` refuses: the project's packages and
    Docker's containerd.io, signed by a key made for the test, that key as both repository keys; the lockfile
    rewritten. `kubelet_signer`: another key signs kubelet's package (and only the test's key is the repository's),
    as a bundle altered after the fetch would. Returns the key's gpg home (forget_gnupg_home it)."""
    gnupg = gnupg_home()
    gpg = ["gpg", "--homedir", str(gnupg), "--batch", "--passphrase", ""]
    for signer in ("mlcluster rpm test", *([kubelet_signer] if kubelet_signer else [])):
        subprocess.run(
            [*gpg, "--quick-gen-key", f"{signer} <r@example.invalid>", "rsa3072", "sign", "never"],
            check=True,
            capture_output=True,
        )
    key = subprocess.run([*gpg, "--armor", "--export", "mlcluster rpm test"], check=True, capture_output=True)
    packages = []
    for name, package_version, requires in (
        ("kubeadm", version, "cri-tools >= 1.30.0"), ("kubelet", version, "kubernetes-cni >= 1.2.0"),
        ("kubectl", version, ""), ("cri-tools", ".".join(version.split(".")[:2]) + ".0", ""),
        ("kubernetes-cni", "1.7.1", ""), ("containerd.io", "1.7.27", ""),
    ):  # fmt: skip
        signer = kubelet_signer if name == "kubelet" and kubelet_signer else "mlcluster rpm test"
        path = built_rpm(bundle, name, package_version, requires, gnupg=gnupg, signer=signer)
        packages.append(
            {
                "name": name,
                "version": version if name in ("kubeadm", "kubelet", "kubectl") else None,
                "digest": "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest(),
                "path": str(path.relative_to(bundle)),
            }
        )
    lock["packages"]["rpm"] = packages
    for name in ("kubernetes-rpm-key", "docker-ce-rpm-key"):
        (bundle / "files" / name).write_bytes(key.stdout)
        lock["files"].append(
            {
                "name": name,
                "url": f"https://example.invalid/{name}",
                "digest": "sha256:" + hashlib.sha256(key.stdout).hexdigest(),
                "path": f"files/{name}",
            }
        )
    (bundle / "bundle.lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    return gnupg
