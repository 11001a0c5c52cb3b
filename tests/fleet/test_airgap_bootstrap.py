"""An air-gapped site bootstrapped through the program (issue 51): hosts with no route outside the fleet, a seed host
(the first control plane) that checks the bundle and serves it with the real distribution registry, apt-ftparchive's
repository and python's file server, and nodes whose packages and images come only from there.

The bundle is built for the test from real formats: Debian packages by dpkg-deb named and versioned as the
Kubernetes project's (their contents are not), images in an OCI layout; the lockfile is what `fetch` writes."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest

from components.airgap.fetch import LOCKFILE, fetch_bundle
from components.config.airgap import KUBEADM_IMAGES
from components.config.spec import DEFAULT_KUBERNETES_VERSION
from components.render.cni import CALICO_VERSION
from components.render.containerd import SANDBOX_IMAGE
from components.render.seed import DEB_REPOSITORY

from .airgap_upstream import Internet, forget_gnupg_home, pulled_charts, rpm_family, unfetched_lock
from .engine import FleetEngine
from .hosts import PREVIOUS_MINOR_VERSION, Fleet, HostSpec
from .steps import step_outputs
from .test_airgap_bundle import BUNDLE_ON_SEED, built_deb, flip_byte, put_on

pytestmark = pytest.mark.fleet

VERSION = DEFAULT_KUBERNETES_VERSION
PACKAGE_VERSION = f"{VERSION}-1.1"
CRI_TOOLS = "1.35.0-1.1"
CNI = "1.7.1-1.1"
MANIFEST_TYPES = "application/vnd.oci.image.manifest.v1+json"
KUBEADM_OWN_IMAGES = ["registry.k8s.io/coredns/coredns:v1.12.1", "registry.k8s.io/etcd:3.6.5-0"]
"""CoreDNS and etcd at a tag each, as `fetch --image` adds them (airGap refuses a lockfile without them:
config/airgap.py KUBEADM_OWN_VERSIONS); the test images are built for the purpose."""
CNI_CHART = (("tigera-operator", CALICO_VERSION),)
"""The fleet's stack installs its CNI (platform layers off): Helm reads the chart from the bundle."""


def fetched_bundle(
    internet: Internet,
    tmp_path: Path,
    version: str = VERSION,
    *,
    charts: tuple[tuple[str, str], ...] = CNI_CHART,
    images: tuple[str, ...] = (),
) -> tuple[Path, dict[str, Any]]:
    """The bundle of a Debian stack at VERSION as `fetch` makes it from the stand-in internet: the Kubernetes
    project's packages (kubeadm depends on cri-tools, kubelet on kubernetes-cni, as theirs do), kubeadm's images and
    the sandbox image, CoreDNS and etcd (and `images`), the CNI's chart (`charts`); its folder and fetched lockfile."""
    references = [f"registry.k8s.io/{name}:v{version}" for name in KUBEADM_IMAGES] + [SANDBOX_IMAGE, *images]
    references += KUBEADM_OWN_IMAGES
    internet.push_images(tmp_path / "built-images", references)
    base, _ = internet.kubernetes_repository(version)
    bundle = tmp_path / "bundle"
    lock = fetch_bundle(
        unfetched_lock(base, references, charts, version),
        pulled_charts(tmp_path / "charts", charts),
        bundle,
        runner=internet.runner,
        registries_conf=internet.registries_conf,
        say=lambda _: None,
    )
    return bundle, lock


def air_gapped_values(hosts: Fleet, names: list[str], lockfile: Path) -> tuple[dict[str, Any], list[str]]:
    """The fleet's stack with airGap on, the seed its first host, Debian nodes only."""
    nodes = [hosts[names[0]].node("control-plane"), *(hosts[n].node() for n in names[1:])]
    return hosts.stack_values(
        nodes, airGap={"enabled": True, "seed": names[0], "lockfile": str(lockfile), "osFamilies": ["deb"]}
    )


def failed_step(run: Any) -> tuple[str, str]:
    """(resource, stdout and stderr) of the one step that failed."""
    assert run.error is not None, "the run did not fail"
    (failed,) = [s for s in run.steps if s.rc != 0]
    return failed.resource, (failed.stdout or "") + failed.stderr


def seed_output(run: Any, seed: str) -> dict[str, str]:
    return step_outputs(run.step(f"{seed}-seed"))


def test_nodes_with_no_route_bootstrap_from_the_seed_and_a_flipped_byte_stops_at_the_seed(
    fleet, internet: Internet, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    hosts = fleet(HostSpec("cp-1", offline=True), HostSpec("w-1", offline=True), HostSpec("w-2", offline=True))
    seed, worker = hosts["cp-1"], hosts["w-1"]
    for host in (seed, worker):
        assert "default" not in host.run("ip route").stdout  # no route leaves the fleet's network
    # Fetched on "a machine with internet", then carried in: the program reads the lockfile fetch wrote.
    bundle, lock = fetched_bundle(internet, tmp_path)
    lockfile = bundle / LOCKFILE
    values, secret = air_gapped_values(hosts, ["cp-1", "w-1"], lockfile)
    put_on(seed, bundle)

    # 1. One bit of kubelet's package flipped on the seed's disk: the seed's check stops the run there, naming it,
    #    before the registry or a repository serves anything and before any node prepares.
    kubelet = next(p for p in lock["packages"]["deb"] if p["name"] == "kubelet")
    flip_byte(seed, f"{BUNDLE_ON_SEED}/{kubelet['path']}")
    engine = FleetEngine()
    try:
        tampered = engine.up(values, secret)
        resource, output = failed_step(tampered)
        assert resource == "cp-1-seed", output
        assert f"error: bundle item package deb:kubelet: {kubelet['path']} has sha256" in output
        assert not [s for s in tampered.steps if s.step == "prepare"], "a node prepared from a tampered bundle"
        for host in (seed, worker):
            assert "kubelet" not in host.state().get("packages", {})
        assert "packages" not in seed.run(f"ls {BUNDLE_ON_SEED}/{DEB_REPOSITORY}").stdout.split()  # no index made

        # 2. The byte flipped back (a fresh copy of the bundle): the same `up` goes on from the seed.
        flip_byte(seed, f"{BUNDLE_ON_SEED}/{kubelet['path']}")
        first = engine.up(values, secret)
        first.raise_error()
    finally:
        engine.close()
    served = seed_output(first, "cp-1")
    items = len(lock["images"]) + len(lock["packages"]["deb"]) + len(lock["files"]) + len(lock["charts"])
    blobs = 2 * len(lock["images"])  # each image's config and one layer
    assert (
        f"ok: bundle at /var/lib/mlcluster/bundle: {items} items match the lockfile ({blobs} image blobs)"
        in (served["bundle-verify"])
    )
    assert f"changed: {len(lock['images'])} image(s) loaded into the seed registry" in served["seed-serve"]
    assert "changed: apt repository index written (5 packages)" in served["seed-serve"]

    for host in (seed, worker):
        state = host.state()
        installed = {name: state["packages"][name] for name in ("kubeadm", "kubelet", "kubectl", "cri-tools")}
        assert installed == {
            "kubeadm": PACKAGE_VERSION,
            "kubelet": PACKAGE_VERSION,
            "kubectl": PACKAGE_VERSION,
            "cri-tools": CRI_TOOLS,
        }
        assert state["packages"]["kubernetes-cni"] == CNI  # kubelet's Depends, from the seed's index
        # Every package came from the seed, downloaded by apt into the cache the node checked it in.
        prepare = step_outputs(first.step(f"{host.name}-prepare"))
        assert (
            "ok: no repository key: each package is checked against the bundle's lockfile" in prepare["kube-packages"]
        )
        assert "ok: 5 package(s) matched the lockfile's digests before install" in prepare["kube-packages"]
        cached = host.run("sha256sum /var/cache/mlcluster/apt-archives/*.deb").stdout
        assert {line.split()[0] for line in cached.splitlines()} == {
            p["digest"].removeprefix("sha256:") for p in lock["packages"]["deb"]
        }
        assert not [c for c in host.calls("curl") if not c.get("real")], "a node fetched from outside the fleet"
        # containerd's hosts.toml names the seed for registry.k8s.io, mirror-only; what it asks the seed's
        # registry for each of kubeadm's images is the lockfile's manifest.
        document = tomllib.loads(host.read("/etc/containerd/certs.d/registry.k8s.io/hosts.toml"))
        endpoint = f"http://{seed.address}:5000/v2/registry.k8s.io"
        assert document == {"host": {endpoint: {"capabilities": ["pull", "resolve"], "override_path": True}}}
        for image in lock["images"]:
            name, tag = image["reference"].removeprefix("registry.k8s.io/").rsplit(":", 1)
            url = f"{endpoint}/{name}/manifests/{tag}"
            head = host.run(f"/usr/bin/curl -fsS -I -H 'Accept: {MANIFEST_TYPES}' {shlex.quote(url)}").stdout
            assert f"Docker-Content-Digest: {image['digest']}" in head, (url, head)
    assert len(hosts.clusters()) == 1 and sorted(hosts.clusters()[0]["nodes"]) == ["cp-1", "w-1"]

    # 3. The same stack with the engine's state lost: every command runs again.
    again_engine = FleetEngine()
    try:
        again = again_engine.up(values, secret)
        again.raise_error()
        # State lost: every command runs again and the seed says only `ok:` (nothing reloaded, nothing rebuilt).
        lines = [line for output in seed_output(again, "cp-1").values() for line in output.splitlines()]
        assert lines and all(line.startswith("ok: ") for line in lines), lines

        # 4. Day 2, a node added while whoever controls the seed's served files swapped kubelet's package: apt's
        #    own check (the package against the index) stops the new node first; with the index rewritten to
        #    match, the node's check against the lockfile does, naming the package, with nothing installed.
        repo = f"{BUNDLE_ON_SEED}/{DEB_REPOSITORY}"
        swapped = built_deb(
            tmp_path / "swapped", "kubelet", PACKAGE_VERSION, "kubernetes-cni (>= 1.2.0)", "amd64", content="not ours"
        )
        seed.run(f"cp {swapped} {repo}/{swapped.name}")
        added, added_secret = air_gapped_values(hosts, ["cp-1", "w-1", "w-2"], lockfile)
        index_stale = again_engine.up(added, added_secret)
        resource, output = failed_step(index_stale)
        assert resource == "w-2-prepare" and f"kubelet_{PACKAGE_VERSION}_amd64.deb  " in output, output
        assert "File has unexpected size" in output or "Hash Sum mismatch" in output, output  # apt: size, then hash
        seed.run(f"cd {repo} && apt-ftparchive packages . > Packages")
        day2 = again_engine.up(added, added_secret)
    finally:
        again_engine.close()
    resource, output = failed_step(day2)
    assert resource == "w-2-prepare", output
    assert f"error: package deb:kubelet: kubelet_{PACKAGE_VERSION}_amd64.deb from the seed has sha256" in output
    assert kubelet["digest"].removeprefix("sha256:") in output
    assert not {"kubelet", "kubeadm"} & set(hosts["w-2"].state().get("packages", {}))


def test_a_seed_that_is_not_debian_is_refused_by_the_step(fleet, internet: Internet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hosts = fleet(HostSpec("cp-1", os="rocky-9", offline=True))
    bundle, _ = fetched_bundle(internet, tmp_path)
    put_on(hosts["cp-1"], bundle)
    values, secret = air_gapped_values(hosts, ["cp-1"], bundle / LOCKFILE)
    engine = FleetEngine()
    try:
        run = engine.up(values, secret)
    finally:
        engine.close()
    resource, output = failed_step(run)
    assert resource == "cp-1-seed"
    assert "ok: bundle at /var/lib/mlcluster/bundle: 14 items match the lockfile" in output  # checked first
    assert "the seed needs Debian's or Ubuntu's docker-registry and apt-utils packages" in output


def test_a_node_of_a_family_the_bundle_lacks_stops_at_its_first_step(fleet, internet: Internet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hosts = fleet(HostSpec("cp-1", offline=True), HostSpec("w-1", os="rocky-9", offline=True))
    bundle, _ = fetched_bundle(internet, tmp_path)
    put_on(hosts["cp-1"], bundle)
    values, secret = air_gapped_values(hosts, ["cp-1", "w-1"], bundle / LOCKFILE)
    engine = FleetEngine(continue_on_error=True)
    try:
        run = engine.up(values, secret)
    finally:
        engine.close()
    failed = [s for s in run.steps if s.rc != 0]
    assert [s.resource for s in failed] == ["w-1-prepare"], [(s.resource, s.stderr) for s in failed]
    assert (
        "error: mlcluster:airGap.osFamilies: this host is rocky (rpm family), but the air-gap bundle holds packages"
        " for deb only" in failed[0].stderr
    )
    assert "kubeadm" not in hosts["w-1"].state().get("packages", {})
    assert hosts["cp-1"].state()["packages"]["kubeadm"] == f"{VERSION}-1.1"  # the Debian seed went on


def test_a_minor_upgrade_runs_from_a_new_bundle_with_nothing_from_outside(
    fleet, internet: Internet, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Day 2: the site bootstrapped at the previous minor from its bundle; a bundle of the new version is fetched,
    carried to the seed (replacing the old one, as `rsync --delete` does) and to the Pulumi machine; `up` with the
    new version upgrades every node from the seed, each package checked against the new lockfile first."""
    hosts = fleet(HostSpec("cp-1", offline=True), HostSpec("w-1", offline=True))
    seed = hosts["cp-1"]
    old_bundle, _ = fetched_bundle(internet, tmp_path / "old", PREVIOUS_MINOR_VERSION)
    put_on(seed, old_bundle)
    values, secret = air_gapped_values(hosts, ["cp-1", "w-1"], old_bundle / LOCKFILE)
    values["kubernetesVersion"] = PREVIOUS_MINOR_VERSION
    engine = FleetEngine()
    try:
        engine.up(values, secret).raise_error()
        assert {h.state()["packages"]["kubelet"] for h in (seed, hosts["w-1"])} == {f"{PREVIOUS_MINOR_VERSION}-1.1"}

        new_bundle, new_lock = fetched_bundle(internet, tmp_path / "new", VERSION)
        seed.run(f"rm -rf {BUNDLE_ON_SEED}")
        put_on(seed, new_bundle)
        upgraded_values, _ = air_gapped_values(hosts, ["cp-1", "w-1"], new_bundle / LOCKFILE)
        upgrade = engine.up(upgraded_values, secret)
        upgrade.raise_error()
    finally:
        engine.close()
    served = seed_output(upgrade, "cp-1")["seed-serve"]
    # The new kubeadm images load; the sandbox, CoreDNS and etcd images, the same in both bundles, are there already.
    kept = 1 + len(KUBEADM_OWN_IMAGES)
    assert f"changed: {len(new_lock['images']) - kept} image(s) loaded into the seed registry ({kept} already" in served
    for host in (seed, hosts["w-1"]):
        packages = host.state()["packages"]
        assert {name: packages[name] for name in ("kubeadm", "kubelet", "kubectl")} == dict.fromkeys(
            ("kubeadm", "kubelet", "kubectl"), f"{VERSION}-1.1"
        )
        kubelet = step_outputs(upgrade.step(f"{host.name}-kubelet"))["upgrade-kubelet"]
        assert "package(s) matched the lockfile's digests before install" in kubelet, kubelet
        assert not [c for c in host.calls("curl") if not c.get("real")], "a node fetched from outside the fleet"
    (cluster,) = hosts.clusters()
    assert {n["kubeletVersion"] for n in cluster["nodes"].values()} == {VERSION}


@pytest.mark.parametrize("kubelet_signer", ["", "someone else"])
def test_a_rocky_node_installs_from_the_seeds_yum_repository_checking_signatures(
    fleet, internet: Internet, tmp_path: Path, kubelet_signer: str
) -> None:  # type: ignore[no-untyped-def]
    """Both families in one bundle: the Debian seed indexes the RPMs with the real createrepo_c; a Rocky node reads
    that metadata, downloads each package and checks its signature with the real rpmkeys against the repository's
    key from the bundle (gpgcheck=1). A kubelet package signed by another key passes the seed's check (its bytes are
    the lockfile's) and stops at the node, by name, before anything is installed."""
    hosts = fleet(HostSpec("cp-1", offline=True), HostSpec("w-1", os="rocky-9", offline=True))
    bundle, lock = fetched_bundle(internet, tmp_path)
    gnupg = rpm_family(bundle, lock, kubelet_signer=kubelet_signer)
    forget_gnupg_home(gnupg)
    put_on(hosts["cp-1"], bundle)
    values, secret = air_gapped_values(hosts, ["cp-1", "w-1"], bundle / LOCKFILE)
    values["airGap"]["osFamilies"] = ["deb", "rpm"]
    engine = FleetEngine()
    try:
        run = engine.up(values, secret)
    finally:
        engine.close()
    served = seed_output(run, "cp-1")["seed-serve"]
    assert "changed: yum repository metadata written (6 packages)" in served
    rocky = hosts["w-1"]
    if not kubelet_signer:
        run.raise_error()
        packages = rocky.state()["packages"]
        assert {name: packages[name] for name in ("kubeadm", "kubelet", "kubectl")} == dict.fromkeys(
            ("kubeadm", "kubelet", "kubectl"), VERSION
        )
        assert packages["containerd.io"] == "1.7.27" and packages["cri-tools"].startswith("1.35.")
        assert "kubernetes-cni" in packages  # kubelet's Requires, from the seed's metadata
        repo = rocky.read("/etc/yum.repos.d/kubernetes.repo")
        assert f"baseurl=http://{hosts['cp-1'].address}:8080/packages/rpm/" in repo and "gpgcheck=1" in repo
        assert len(hosts.clusters()[0]["nodes"]) == 2
        return
    resource, output = failed_step(run)
    assert resource == "w-1-prepare", output
    assert "Public key for kubelet-" in output and "Error: GPG check FAILED" in output
    assert "kubelet" not in rocky.state().get("packages", {})


def test_without_the_seed_an_offline_node_installs_nothing(fleet) -> None:  # type: ignore[no-untyped-def]
    """The stand-in is not kinder than a site with no route: the same hosts without airGap reach no repository."""
    hosts = fleet(HostSpec("cp-1", offline=True), HostSpec("w-1", os="rocky-9", offline=True))
    values, secret = hosts.stack_values([hosts["cp-1"].node("control-plane"), hosts["w-1"].node()])
    engine = FleetEngine(continue_on_error=True)
    try:
        run = engine.up(values, secret)
    finally:
        engine.close()
    failed = {s.resource: (s.stdout or "") + s.stderr for s in run.steps if s.rc != 0}
    assert sorted(failed) == ["cp-1-prepare", "w-1-prepare"], failed
    assert "Could not resolve host: pkgs.k8s.io" in failed["cp-1-prepare"]
    assert "Failed to download metadata for repo 'docker-ce-stable'" in failed["w-1-prepare"]  # containerd.io first
    for host in hosts.hosts.values():
        assert "kubeadm" not in host.state().get("packages", {})
