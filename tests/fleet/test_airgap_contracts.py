"""The apt stub held to the real apt-get (Debian's, on this machine, with a private sources list, state and cache) on
what the air-gapped nodes rely on, against an apt-ftparchive flat repository served over HTTP on loopback as the seed
serves it: `[trusted=yes]` takes the unsigned index; `--download-only -o Dir::Cache::Archives=DIR` leaves the files
there and installs nothing; a package whose size differs from the index is refused with "File has unexpected size", one
of the right size whose bytes differ with "Hash Sum mismatch", both with exit 100 (tests/fleet/stubs/packages.py models
the same). The Spegel model (tests/fleet/spegel_configuration.py) held to Spegel's own test cases at v0.7.4."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.render.seed import FILES_UNIT, REGISTRY_UNIT, files_unit, registry_unit

from .airgap_upstream import built_rpm, forget_gnupg_home, gnupg_home
from .spegel_configuration import add_mirror_configuration
from .test_airgap_bundle import built_deb

pytestmark = pytest.mark.fleet


@pytest.fixture
def flat_repository(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(the repository's URL, its folder): two packages indexed by apt-ftparchive, served by python's http.server."""
    folder = tmp_path / "repo"
    for name in ("mlcluster-a", "mlcluster-b"):
        built = built_deb(tmp_path / "build", name, "1.0")
        folder.mkdir(exist_ok=True)
        shutil.copy(built, folder / built.name)
    index(folder)
    with served(folder) as base:
        yield base, folder


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    """The folder served by python's http.server on loopback, as the seed serves its bundle; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(folder), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(["curl", "-fsS", "-o", "/dev/null", f"http://127.0.0.1:{port}/"], check=False).returncode:
            assert time.monotonic() < deadline, "the file server did not start"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.terminate()
        server.wait(timeout=10)


def index(folder: Path) -> None:
    packages = subprocess.run(["apt-ftparchive", "packages", "."], cwd=folder, check=True, capture_output=True)
    (folder / "Packages").write_bytes(packages.stdout)


def one_byte_flipped(package: Path) -> None:
    """The same size, other bytes (the last byte of the archive's data member)."""
    data = bytearray(package.read_bytes())
    data[-1] ^= 0xFF
    package.write_bytes(bytes(data))


def one_byte_longer(package: Path) -> None:
    package.write_bytes(package.read_bytes() + b"\n")


# Each change to a served package, applied in turn, and the words apt refuses it with.
CHANGES = ((one_byte_flipped, "Hash Sum mismatch"), (one_byte_longer, "File has unexpected size"))


def real_apt(work: Path, base: str) -> list[str]:
    """apt-get with its own sources list (the seed's line, as render/seed.py deb_source writes it), state and cache."""
    (work / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (work / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    (work / "sources.list").write_text(f"deb [trusted=yes] {base} ./\n")
    (work / "status").touch()
    return [
        "apt-get", "-o", f"Dir::Etc::SourceList={work / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/dev/null",
        "-o", f"Dir::State::Lists={work / 'lists'}", "-o", f"Dir::State::status={work / 'status'}",
        "-o", f"Dir::Cache={work / 'cache'}", "-o", "APT::Sandbox::User=root",
    ]  # fmt: skip


def test_real_apt_takes_the_seeds_unsigned_index_downloads_into_the_named_cache_and_installs_nothing(
    flat_repository: tuple[str, Path], tmp_path: Path
) -> None:
    base, folder = flat_repository
    apt = real_apt(tmp_path / "apt", base)
    subprocess.run([*apt, "update", "-q"], check=True, capture_output=True)
    archives = tmp_path / "downloaded"
    (archives / "partial").mkdir(parents=True)
    download = [*apt, "install", "-y", "-q", "--download-only", "-o", f"Dir::Cache::Archives={archives}", "mlcluster-a"]
    got = subprocess.run(download, capture_output=True, text=True, check=False)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "Download complete and in download only mode" in got.stdout
    assert (archives / "mlcluster-a_1.0_all.deb").read_bytes() == (folder / "mlcluster-a_1.0_all.deb").read_bytes()
    assert (tmp_path / "apt" / "status").read_text() == ""  # nothing installed

    # The package changed on the server, its index not: apt refuses it, exit 100, with the size checked first.
    (archives / "mlcluster-a_1.0_all.deb").unlink()
    for change, words in CHANGES:
        change(folder / "mlcluster-a_1.0_all.deb")
        refused = subprocess.run(download, capture_output=True, text=True, check=False)
        assert refused.returncode == 100, refused.stdout + refused.stderr
        assert "E: Failed to fetch" in refused.stderr and words in refused.stderr, refused.stderr
        assert not (archives / "mlcluster-a_1.0_all.deb").exists()


def test_the_stub_refuses_and_downloads_as_real_apt_does(
    flat_repository: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stub's own functions on the same repository: the same file lands, the same mismatch is refused the same
    way (the words and exit status the node's step reads)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "stubs"))  # as the stubs import each other on a host
    import _stub
    import packages

    base, folder = flat_repository
    entries = packages._index((folder / "Packages").read_text())
    archives = tmp_path / "downloaded"
    packages._seed_download(base, entries["mlcluster-a"][0], str(archives))
    assert (archives / "mlcluster-a_1.0_all.deb").read_bytes() == (folder / "mlcluster-a_1.0_all.deb").read_bytes()
    (archives / "mlcluster-a_1.0_all.deb").unlink()
    for change, words in CHANGES:
        change(folder / "mlcluster-a_1.0_all.deb")
        with pytest.raises(_stub.StubExit) as refused:
            packages._seed_download(base, entries["mlcluster-a"][0], str(archives))
        assert refused.value.code == 100
        assert "E: Failed to fetch" in refused.value.message and words in refused.value.message
        assert not (archives / "mlcluster-a_1.0_all.deb").exists()


def test_the_seed_units_are_units_systemd_accepts(tmp_path: Path) -> None:
    """The unit files seed-serve writes, checked by the real `systemd-analyze verify` (its ExecStart binaries are the
    ones Debian's docker-registry and python3 install)."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd (bash .ci/os-packages systemd does it as root)"
    for name, text in (
        (REGISTRY_UNIT, registry_unit()),
        (FILES_UNIT, files_unit("/var/lib/mlcluster/bundle", "0.0.0.0", 8080)),
    ):
        unit = tmp_path / f"{name}.service"
        unit.write_text(text)
        checked = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, check=False)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    broken = tmp_path / "mlcluster-seed-broken.service"
    broken.write_text(registry_unit().replace("/usr/bin/docker-registry", "/usr/bin/no-such-registry"))
    refused = subprocess.run([analyze, "verify", str(broken)], capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "no-such-registry" in refused.stdout + refused.stderr


# Spegel's own cases at v0.7.4 (pkg/oci/containerd_test.go TestMirrorConfiguration, "prepend to existing
# configuration" and "prepend existing disabled"): the files before, and every file after, AddMirrorConfiguration.
SPEGEL_EXISTING_DOCKER_HOSTS = """server = 'https://registry-1.docker.io'

[host.'http://example.com:30020']
capabilities = ['pull', 'resolve']
client = ['/etc/certs/xxx/client.cert', '/etc/certs/xxx/client.key']

[host.'http://example.com:30021']
client = ['/etc/certs/xxx/client.cert', '/etc/certs/xxx/client.key']
capabilities = ['pull', 'resolve']

[host.'http://bar.com:30020']
capabilities = ['pull', 'resolve']
client = ['/etc/certs/xxx/client.cert', '/etc/certs/xxx/client.key']"""
SPEGEL_OWN_DOCKER_HOSTS = """server = 'https://registry-1.docker.io'

[host.'http://127.0.0.1:5000']
capabilities = ['pull', 'resolve']
dial_timeout = '200ms'"""
SPEGEL_PREPENDED_DOCKER_HOSTS = (
    SPEGEL_OWN_DOCKER_HOSTS
    + """

[host.'http://example.com:30020']
capabilities = ['pull', 'resolve']
client = ['/etc/certs/xxx/client.cert', '/etc/certs/xxx/client.key']

[host.'http://example.com:30021']
capabilities = ['pull', 'resolve']
client = ['/etc/certs/xxx/client.cert', '/etc/certs/xxx/client.key']

[host.'http://bar.com:30020']
capabilities = ['pull', 'resolve']
client = ['/etc/certs/xxx/client.cert', '/etc/certs/xxx/client.key']"""
)
SPEGEL_FOO_HOSTS = """server = 'http://foo.bar:5000'

[host.'http://127.0.0.1:5000']
capabilities = ['pull', 'resolve']
dial_timeout = '200ms'"""


@pytest.mark.parametrize(
    ("prepend", "expected"),
    [
        (
            True,
            {
                "_backup/docker.io/hosts.toml": SPEGEL_EXISTING_DOCKER_HOSTS,
                "_backup/docker.io/hello.txt": "Hello World",
                "_backup/docker.io/nested/cert.tls": "Foo Bar",
                "docker.io/hosts.toml": SPEGEL_PREPENDED_DOCKER_HOSTS,
                "docker.io/hello.txt": "Hello World",
                "docker.io/nested/cert.tls": "Foo Bar",
                "foo.bar:5000/hosts.toml": SPEGEL_FOO_HOSTS,
            },
        ),
        (
            False,
            {
                "_backup/docker.io/hosts.toml": SPEGEL_EXISTING_DOCKER_HOSTS,
                "docker.io/hosts.toml": SPEGEL_OWN_DOCKER_HOSTS,
                "foo.bar:5000/hosts.toml": SPEGEL_FOO_HOSTS,
            },
        ),
    ],
)
def test_the_spegel_model_writes_what_spegels_own_tests_expect(
    tmp_path: Path, prepend: bool, expected: dict[str, str]
) -> None:
    config = tmp_path / "etc" / "containerd" / "certs.d"
    existing = {"docker.io/hosts.toml": SPEGEL_EXISTING_DOCKER_HOSTS}
    if prepend:
        existing |= {"docker.io/hello.txt": "Hello World", "docker.io/nested/cert.tls": "Foo Bar"}
    for name, text in existing.items():
        (config / name).parent.mkdir(parents=True, exist_ok=True)
        (config / name).write_text(text)
    add_mirror_configuration(
        config, ["https://docker.io", "http://foo.bar:5000"], ["http://127.0.0.1:5000"], prepend=prepend
    )
    written = {str(p.relative_to(config)): p.read_text() for p in config.rglob("*") if p.is_file()}
    assert written == expected

    # A second start of the pod: the backup is kept as it was, the files are written again the same.
    add_mirror_configuration(
        config, ["https://docker.io", "http://foo.bar:5000"], ["http://127.0.0.1:5000"], prepend=prepend
    )
    assert {str(p.relative_to(config)): p.read_text() for p in config.rglob("*") if p.is_file()} == expected


@pytest.fixture
def yum_repository(tmp_path: Path) -> Iterator[tuple[str, Path, str]]:
    """(the repository's URL, its folder, its key's URL): createrepo_c's metadata over two RPMs built by rpmbuild,
    kubectl signed by the repository's key and kubelet by another, served by python's http.server."""
    folder = tmp_path / "yum"
    gnupg = gnupg_home()
    try:
        gpg = ["gpg", "--homedir", str(gnupg), "--batch", "--passphrase", ""]
        for signer in ("repository", "stranger"):
            generate = [*gpg, "--quick-gen-key", f"{signer} <r@example.invalid>", "rsa3072", "sign", "never"]
            subprocess.run(generate, check=True, capture_output=True)
        for name, signer in (("kubectl", "repository"), ("kubelet", "stranger")):
            built = built_rpm(tmp_path / "build" / name, name, "1.35.8", "", gnupg=gnupg, signer=signer)
            folder.mkdir(exist_ok=True)
            shutil.copy(built, folder / built.name)
        subprocess.run(["createrepo_c", "--quiet", str(folder)], check=True, capture_output=True)
        key = subprocess.run([*gpg, "--armor", "--export", "repository"], check=True, capture_output=True).stdout
        (folder / "repodata" / "repomd.xml.key").write_bytes(key)
    finally:
        forget_gnupg_home(gnupg)
    with served(folder) as base:
        yield base, folder, f"{base}repodata/repomd.xml.key"


def test_the_dnf_stub_refuses_what_the_real_dnf_refuses_in_its_words(
    yum_repository: tuple[str, Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real dnf (Debian's dnf 4.14, installing into a root of its own with gpgcheck=1 and the repository's key) and
    the dnf stub's download check, on the same repository: a package another key signed, then a package whose bytes
    differ from the metadata at the same size. Both exit 1 with the same words."""
    assert shutil.which("dnf"), "dnf is missing: bash .ci/os-packages fleet installs it"
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "stubs"))
    import _stub
    import packages

    base, folder, key = yum_repository
    index = packages._rpm_index(base)
    nevra = {name: f"{name}-1.35.8-150500.1.1.x86_64" for name in ("kubectl", "kubelet")}
    cases = (
        ("kubelet", ["Public key for {file} is not installed. Failing package is: {nevra}", "Error: GPG check FAILED"]),
        (
            "kubectl",
            [
                "{file}: Downloading successful, but checksum doesn't match.",
                "Error: Error downloading packages:",
                "{nevra}: Cannot download, all mirrors were already tried without success",
            ],
        ),
    )
    one_byte_flipped(next(folder.glob("kubectl-*.rpm")))
    for name, words in cases:
        file = f"{nevra[name]}.rpm"
        expected = [w.format(file=file, nevra=nevra[name]) for w in words]
        real = subprocess.run(
            [
                "dnf", "install", "-y", f"--installroot={tmp_path / name / 'root'}", "--releasever=9",
                f"--setopt=cachedir={tmp_path / name / 'cache'}", f"--repofrompath=seed,{base}", "--repo=seed",
                "--setopt=seed.gpgcheck=1", f"--setopt=seed.gpgkey={key}", name,
            ],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert real.returncode == 1, real.stdout + real.stderr
        assert all(w in real.stdout + real.stderr for w in expected), (expected, real.stdout + real.stderr)
        with pytest.raises(_stub.StubExit) as refused:
            packages._rpm_fetched(base, index[name][-1], key, name)
        assert refused.value.code == 1
        assert all(w in refused.value.message for w in expected), (expected, refused.value.message)
