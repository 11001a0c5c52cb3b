"""`python -m components.airgap fetch` against the stand-ins for the internet in airgap_upstream.py (the real
registry, skopeo, apt-ftparchive, gpg and apt-get); the fetched folder is then checked with the seed's own check."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.airgap.__main__ import main as airgap_main
from components.airgap.fetch import LOCKFILE, FetchError, chart_archive, fetch_bundle, sha256_of

from ..helm_render import chart_path
from .airgap_upstream import (
    IMAGES,
    VERSION,
    Internet,
    forget_gnupg_home,
    gnupg_home,
    pulled_charts,
    unfetched_lock,
)

pytestmark = pytest.mark.fleet


def test_fetch_fills_every_digest_from_real_tools_and_resumes(internet: Internet, tmp_path: Path) -> None:
    pushed = internet.push_images(tmp_path / "built-images")
    base, debs = internet.kubernetes_repository()
    out = tmp_path / "bundle"
    said: list[str] = []
    fetched = fetch_bundle(
        unfetched_lock(base),
        pulled_charts(tmp_path / "charts"),
        out,
        runner=internet.runner,
        registries_conf=internet.registries_conf,
        say=said.append,
    )

    # Images: the manifest digest the registry served, in the bundle's OCI layout.
    assert {i["reference"]: i["digest"] for i in fetched["images"]} == pushed
    # Packages: the exact versions the lockfile pins (kubeadm 1.35.7 is in the repository too), at their digests.
    by_name = {p["name"]: p for p in fetched["packages"]["deb"]}
    assert by_name["kubeadm"]["file"] == f"kubeadm_{VERSION}-1.1_amd64.deb"
    for name, package in by_name.items():
        assert package["digest"] == sha256_of(debs[name] if name != "kubeadm" else out / package["path"])
        assert (out / package["path"]).is_file()
    assert by_name["kubelet"]["digest"] == sha256_of(debs["kubelet"])
    # The chart, archived the same way every time; the file, as served.
    chart = fetched["charts"][0]
    again = tmp_path / "again.tgz"
    chart_archive(chart_path("lws", "v0.10.0"), "lws", again)
    assert chart["digest"] == sha256_of(again) == sha256_of(out / chart["path"])
    assert fetched["files"][0]["digest"] == sha256_of(
        internet.web / "core:" / "stable:" / "v1.35" / "deb" / "Release.key"
    )
    # The lockfile beside it, and the program takes it (every item with a digest and a path).
    assert json.loads((out / LOCKFILE).read_text()) == fetched
    tools = [call[0] for call in internet.calls]
    assert tools.count("skopeo") == len(IMAGES) and tools.count("bash") == 1  # bash: the seed's check

    # A second run resumes: nothing is fetched again, everything is checked again.
    internet.calls.clear()
    fetch_bundle(
        unfetched_lock(base),
        tmp_path / "charts",
        out,
        runner=internet.runner,
        registries_conf=internet.registries_conf,
        say=said.append,
    )
    assert [call[0] for call in internet.calls] == ["apt-get", "bash"]  # apt's index is read again, nothing else


def fetch_with(internet: Internet, lock: dict[str, Any], charts: Path, out: Path) -> dict[str, Any]:
    """fetch_bundle against the stand-in internet, quietly."""
    return fetch_bundle(
        lock, charts, out, runner=internet.runner, registries_conf=internet.registries_conf, say=lambda _: None
    )


def test_fetch_stops_by_name_at_what_upstream_cannot_prove(internet: Internet, tmp_path: Path) -> None:
    internet.push_images(tmp_path / "built-images")
    base, _ = internet.kubernetes_repository()
    charts = pulled_charts(tmp_path / "charts")

    # A repository signed by another key than the one the lockfile's Release.key URL serves: apt refuses its index.
    other = unfetched_lock(base)
    stranger = gnupg_home()
    try:
        gpg = ["gpg", "--homedir", str(stranger), "--batch"]
        subprocess.run([*gpg, "--passphrase", "", "--quick-gen-key", "x <x@x.invalid>", "ed25519"], check=True)
        key = subprocess.run([*gpg, "--armor", "--export"], check=True, capture_output=True)
    finally:
        forget_gnupg_home(stranger)
    release_key = internet.web / "core:" / "stable:" / "v1.35" / "deb" / "Release.key"
    signer = release_key.read_bytes()
    release_key.write_bytes(key.stdout)
    with pytest.raises(FetchError, match=rf"the Debian repository {base}/deb/: .*(NO_PUBKEY|not signed)"):
        fetch_with(internet, other, charts, tmp_path / "signed-by-another")
    release_key.write_bytes(signer)

    # An image pinned by a digest the registry does not serve for it.
    pinned = unfetched_lock(base)
    pinned["images"] = [{"reference": f"registry.k8s.io/kube-apiserver@sha256:{'0' * 64}", "digest": None}]
    with pytest.raises(FetchError, match=r"image registry.k8s.io/kube-apiserver@sha256:0{64}: "):
        fetch_with(internet, pinned, charts, tmp_path / "pinned")

    # A package version the repository does not have.
    newer = unfetched_lock(base)
    newer["packages"]["deb"][0]["version"] = "1.35.9"
    with pytest.raises(FetchError, match="package deb:kubeadm: "):
        fetch_with(internet, newer, charts, tmp_path / "newer")


def test_a_machine_without_dnf_is_told_before_anything_downloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The RPM family on a machine whose PATH has skopeo but neither dnf nor rpmkeys: both named, with the way out."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("skopeo", "apt-get"):
        found = shutil.which(tool)
        assert found, f"{tool} is missing: bash .ci/os-packages fleet installs it"
        (tools / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(tools))
    rpm = unfetched_lock("http://127.0.0.1:9")
    rpm["packages"] = {"rpm": [{"name": "kubeadm", "version": VERSION, "digest": None}]}
    with pytest.raises(FetchError) as stopped:
        fetch_bundle(rpm, tmp_path / "charts", tmp_path / "rpm", say=lambda _: None)
    assert str(stopped.value) == (
        "dnf is not on this machine: it fetches the rpm family's packages: fetch on a RHEL-family machine (or install"
        " dnf and dnf-plugins-core), or leave the family out with airGap.osFamilies: [deb]; rpmkeys is not on this"
        " machine: it fetches the rpm family's signatures (it comes with rpm)"
    )
    assert not (tmp_path / "rpm").exists()  # nothing downloaded


RPM_PACKAGES = ("kubeadm", "kubelet", "kubectl", "cri-tools", "kubernetes-cni", "containerd.io")


def rpm_lock(base: str, docker_key: str) -> dict[str, Any]:
    """What `lock` writes for an rpm-only stack (osFamilies: [rpm]) with one image and one chart."""
    lock = unfetched_lock(base, IMAGES[:1])
    lock["packages"] = {
        "rpm": [
            {"name": name, "version": VERSION if name in ("kubeadm", "kubelet", "kubectl") else None, "digest": None}
            for name in RPM_PACKAGES
        ]
    }
    lock["files"] = [
        {"name": "kubernetes-rpm-key", "url": f"{base}/rpm/repodata/repomd.xml.key", "digest": None},
        {"name": "docker-ce-rpm-key", "url": docker_key, "digest": None},
    ]
    return lock


def test_fetch_takes_rpms_with_the_real_dnf_and_checks_each_signature(internet: Internet, tmp_path: Path) -> None:
    """The real `dnf download` (Debian's dnf 4.14 and dnf-plugins-core) from createrepo_c repositories laid out as the
    project's and Docker's; each RPM then checked against its repository's key by the real rpmkeys."""
    internet.push_images(tmp_path / "built-images", IMAGES[:1])
    base, docker_key, first = internet.rpm_repositories(stranger_signs="kubelet")
    kubeadm = first["kubeadm"].read_bytes()  # fetched before kubelet stops the run, kept by the resume
    charts = pulled_charts(tmp_path / "charts")

    # kubelet is signed by another key than the repository's: dnf download takes it (it checks no signature), the
    # fetch's own check stops there, by name, and removes the file.
    out = tmp_path / "bundle"
    with pytest.raises(FetchError) as stopped:
        fetch_with(internet, rpm_lock(base, docker_key), charts, out)
    assert str(stopped.value).startswith(
        f"package rpm:kubelet: {first['kubelet'].name} is not signed by the repository's key (rpmkeys --checksig:"
    ), stopped.value
    assert "SIGNATURES NOT OK" in str(stopped.value) and str(stopped.value).endswith("; it was removed")
    assert not (out / "packages" / "rpm" / first["kubelet"].name).exists()

    # The repository re-signed by its key (served again by the same URLs): the fetch resumes and completes.
    internet.calls.clear()
    base, docker_key, served = internet.rpm_repositories()
    fetched = fetch_with(internet, rpm_lock(base, docker_key), charts, out)
    by_name = {p["name"]: p for p in fetched["packages"]["rpm"]}
    assert set(by_name) == set(RPM_PACKAGES)
    assert by_name["kubeadm"]["file"] == f"kubeadm-{VERSION}-150500.1.1.x86_64.rpm"  # the pin, not the older patch
    for name, package in by_name.items():
        expected = "sha256:" + hashlib.sha256(kubeadm).hexdigest() if name == "kubeadm" else sha256_of(served[name])
        assert package["digest"] == expected == sha256_of(out / package["path"]), name
    downloads = [call for call in internet.calls if call[:2] == ["dnf", "download"]]
    assert len(downloads) == len(RPM_PACKAGES) - 1  # kubeadm was fetched before kubelet stopped the first run
    assert any("--repofrompath=mlcluster-docker,http://127.0.0.1:" in a and a.endswith("/linux/rhel/9/x86_64/stable")
               for call in downloads for a in call)  # fmt: skip
    checked = [call for call in internet.calls if call[0] == "rpmkeys" and "--checksig" in call]
    assert len(checked) == len(RPM_PACKAGES)

    # A resumed folder holding a package another key signed (carried in from elsewhere) is refused as well.
    planted = out / by_name["kubectl"]["path"]
    planted.unlink()
    stranger_built = internet.rpm_repositories(stranger_signs="kubectl")[2]["kubectl"]
    shutil.copy(stranger_built, planted)
    with pytest.raises(FetchError, match=r"^package rpm:kubectl: .* is not signed by the repository's key"):
        fetch_with(internet, rpm_lock(base, docker_key), charts, out)
    assert not planted.exists()


def test_the_fetch_command_adds_what_unresolved_asks_for_and_says_what_is_left(
    internet: Internet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pushed = internet.push_images(tmp_path / "built-images")
    base, _ = internet.kubernetes_repository()
    lock = unfetched_lock(base, IMAGES[:1])
    lock["unresolved"] = [f"CoreDNS and etcd images: `kubeadm config images list --kubernetes-version v{VERSION}`"]
    (tmp_path / "lock.json").write_text(json.dumps(lock))
    out = tmp_path / "bundle"
    argv = ["fetch", "--lock", str(tmp_path / "lock.json"), "--charts", str(pulled_charts(tmp_path / "charts"))]
    argv += ["--out", str(out), "--registries-conf", str(internet.registries_conf), "--image", IMAGES[1]]
    assert airgap_main(argv) == 0
    said = capsys.readouterr()
    assert f"fetched {out}: 1 charts, 2 images, 5 packages, 1 files, each at its digest; lockfile {out / LOCKFILE}" in (
        said.out
    )
    assert "note: the lockfile leaves unresolved: CoreDNS and etcd images" in said.err
    written = json.loads((out / LOCKFILE).read_text())
    assert {i["reference"]: i["digest"] for i in written["images"]} == pushed
    assert written["images"][1]["sources"] == ["fetch --image"]

    # An item upstream no longer has stops the command by name, exit 2, and the run can be resumed.
    (tmp_path / "lock.json").write_text(json.dumps(unfetched_lock(base, ["registry.k8s.io/gone:v1"])))
    assert (
        airgap_main([*argv[:5], "--out", str(tmp_path / "other"), "--registries-conf", str(internet.registries_conf)])
        == 2
    )
    assert "airgap: fetch stopped: image registry.k8s.io/gone:v1: " in capsys.readouterr().err
