"""An air-gapped stack on the mock engine: the seed's command before every node's preparation, the nodes' package
sources and registry hosts on the seed, nothing on a node fetched from outside the site, and the refusals by key."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from components.config.airgap import _read_lock
from components.config.schema import ConfigError
from components.plan.diff import load_plan
from components.plan.writer import write_plan
from components.render.seed import bundle_items

from .conftest import load_spec, stack_values

SEED = "cp-1"
SEED_HOST = "10.20.0.11"
OUTSIDE = re.compile(r"https?://(?!10\.20\.0\.11[:/])[A-Za-z0-9.-]+")


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


ONPREM_CHARTS = (
    ("tigera-operator", "v3.30.3"), ("local-path-provisioner", "0.0.37"), ("kube-prometheus-stack", "88.5.3"),
    ("prometheus-adapter", "5.3.0"), ("kueue", "0.19.2"), ("cert-manager", "v1.21.1"), ("metrics-server", "3.13.0"),
    ("kubeflow-trainer", "2.3.0"), ("gpu-operator", "v26.7.0"), ("kserve-crd", "v0.20.0"), ("nvsentinel", "v1.19.0"),
    ("gateway-helm", "v1.9.0"), ("kserve-resources", "v0.20.0"), ("kserve-runtime-configs", "v0.20.0"),
)  # fmt: skip
"""The on-prem example's releases (its plan's first screen): the program installs each from the bundle."""


def _charts(folder: Path, drop: str) -> list[dict[str, Any]]:
    """An archive per chart beside the lockfile (its bytes stand in for the chart's: Helm does not run here)."""
    (folder / "charts").mkdir(parents=True, exist_ok=True)
    charts = []
    for name, version in ONPREM_CHARTS:
        if name == drop:
            continue
        archive = folder / "charts" / f"{name}-{version}.tgz"
        archive.write_bytes(f"{name} {version}".encode())
        charts.append(
            {"name": name, "version": version, "digest": _digest(f"{name} {version}"), "path": f"charts/{archive.name}"}
        )
    return charts


def fetched_lock(path: Path, version: str = "1.35.8", *, drop: str = "", unfetched: bool = False) -> Path:
    """A fetched lockfile (digests and paths filled) with what the program reads: the Kubernetes packages of both
    families, kubeadm's images and a few of the platform's, from three registries, and the charts of every
    release (archives beside the lockfile)."""
    images = [f"registry.k8s.io/{c}:v{version}" for c in ("kube-apiserver", "kube-controller-manager")]
    images += [f"registry.k8s.io/{c}:v{version}" for c in ("kube-scheduler", "kube-proxy")]
    images += [
        "registry.k8s.io/pause:3.10",
        "registry.k8s.io/coredns/coredns:v1.12.1",  # a tag of each image kubeadm pins per release
        "registry.k8s.io/etcd:3.6.5-0",
        "nvcr.io/nvidia/gpu-operator:v25.10.1",
        "quay.io/jetstack/cert-manager-controller:v1.19.1",
    ]
    packages: dict[str, list[dict[str, Any]]] = {}
    for family, suffix in (("deb", "_amd64.deb"), ("rpm", ".x86_64.rpm")):
        packages[family] = [
            {
                "name": name,
                "version": version if name in ("kubeadm", "kubelet", "kubectl") else None,
                "digest": None if unfetched else _digest(f"{family}{name}"),
                "path": f"packages/{family}/{name}-{version}{suffix}",
            }
            for name in ("kubeadm", "kubelet", "kubectl", "cri-tools", "kubernetes-cni")
            if name != drop
        ]
    document = {
        "schema": "mlcluster.io/bundle-lock/v1",
        "stack": "onprem",
        "kubernetesVersion": version,
        "counts": {"charts": len(ONPREM_CHARTS), "images": len(images), "packages": 10, "files": 2},
        "charts": _charts(path.parent, drop),
        "images": [{"reference": r, "digest": _digest(r)} for r in images if not r.startswith(drop or "-")],
        "packages": packages,
        "files": [
            {"name": "kubernetes-rpm-key", "url": "u1", "digest": _digest("k"), "path": "files/kubernetes-rpm-key"},
            {"name": "docker-ce-rpm-key", "url": "u2", "digest": _digest("d"), "path": "files/docker-ce-rpm-key"},
        ],
    }
    path.write_text(json.dumps(document))
    return path


def air_gapped(lock: Path, **air_gap: Any) -> tuple[dict[str, Any], list[str]]:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["images"] = {**values["images"], "spegel": {"enabled": False}, "mirrors": []}
    values["airGap"] = {"enabled": True, "seed": SEED, "lockfile": str(lock), **air_gap}
    return values, secret


def errors(values: dict[str, Any], secret: list[str]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_spec(values, secret)
    return [str(p) for p in info.value.problems.errors]


def test_the_seed_serves_before_any_node_prepares_and_no_node_reaches_outside(run_stack, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lockfile = fetched_lock(tmp_path / "lock.json")
    values, secret = air_gapped(lockfile)
    run = run_stack(values=values, secret=secret)
    seed = run.named(f"{SEED}-seed")
    prepares = [r for r in run.resources if r.name.endswith("-prepare") and r.type == "command:remote:Command"]
    assert len(prepares) == 9
    for prepare in prepares:
        assert seed.urn in prepare.depends_on, f"{prepare.name} does not wait for the seed"

    # The seed's command checks every item of the lockfile (its digests are in the text), then serves.
    seed_command = seed.inputs["create"]
    items, problems = bundle_items(json.loads(lockfile.read_text()))
    assert problems == []
    for row in items.splitlines():
        assert row.split("\t")[0] in seed_command
    assert seed_command.index("bundle-verify") < seed_command.index("seed-serve")
    assert f"deb [trusted=yes] http://{SEED_HOST}:8080/packages/deb/ ./" in prepares[0].inputs["create"]

    for prepare in prepares:
        text = prepare.inputs["create"]
        # Every registry of the bundle resolves to the seed, mirror-only, under its own path.
        for registry in ("nvcr.io", "quay.io", "registry.k8s.io"):
            hosts = re.search(
                rf"HOSTS_TOML_\d+='(\[host\.\"http://{SEED_HOST}:5000/v2/{re.escape(registry)}\"\][^']*)'", text
            )
            assert hosts is not None, f"{prepare.name}: no hosts.toml for {registry}"
            document = tomllib.loads(hosts.group(1))
            assert "server" not in document
            assert document["host"][f"http://{SEED_HOST}:5000/v2/{registry}"]["override_path"] is True
        assert "BUNDLE_DEB_DIGESTS=" in text and _digest("debkubeadm").removeprefix("sha256:") in text
        assert f"gpgkey=http://{SEED_HOST}:8080/files/kubernetes-rpm-key" in text
        # Nothing a node runs names a place outside the site (the package repositories, Docker's, a key URL).
        outside = sorted(set(OUTSIDE.findall(text)))
        assert outside == [], f"{prepare.name} reaches outside: {outside}"


def test_without_air_gap_the_nodes_use_the_upstream_repositories(run_stack) -> None:  # type: ignore[no-untyped-def]
    """The check above can fail: the same look finds the outside repositories on an ordinary stack."""
    run = run_stack()
    text = run.named("cp-1-prepare").inputs["create"]
    assert "https://pkgs.k8s.io" in OUTSIDE.findall(text) or any("pkgs.k8s.io" in u for u in OUTSIDE.findall(text))
    assert not [r for r in run.resources if r.name.endswith("-seed")]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"seed": "nobody"}, 'mlcluster:airGap.seed: "nobody" names no node: the nodes are cp-1, cp-2'),
        ({"seed": None}, "mlcluster:airGap.seed: is required when airGap.enabled"),
        ({"filesPort": 5000}, "mlcluster:airGap.filesPort: is the registry's port too (5000)"),
        ({"registryPort": 6443}, "mlcluster:airGap.registryPort: 6443 is the API server's port on a node"),
        ({"bundleDir": "/etc"}, 'mlcluster:airGap.bundleDir: "/etc" is a system directory'),
        ({"lockfile": "/nonexistent/lock.json"}, "mlcluster:airGap.lockfile: cannot read /nonexistent/lock.json"),
        ({"lockfile": "bundle/\nlock.json"}, 'mlcluster:airGap.lockfile: "bundle/\\nlock.json" contains a control'),
        ({"lockfile": " "}, 'mlcluster:airGap.lockfile: " " is empty: give the fetched bundle\'s lockfile'),
        ({"osFamilies": ["deb", "deb"]}, "mlcluster:airGap.osFamilies: must list deb, rpm or both, each once"),
        ({"osFamilies": ["suse"]}, "mlcluster:airGap.osFamilies[0]: "),
    ],
)
def test_settings_refused_by_key(tmp_path: Path, change: dict[str, Any], expected: str) -> None:
    values, secret = air_gapped(fetched_lock(tmp_path / "lock.json"), **change)
    found = errors(values, secret)
    assert any(e.startswith(expected) for e in found), found
    assert all("\n" not in e for e in found), found  # one line each


@pytest.mark.parametrize(
    ("lock", "expected"),
    [
        (
            {"unfetched": True},
            "mlcluster:airGap.lockfile: 10 item(s) have no sha256 digest, first package deb:kubeadm: a lockfile from"
            " `lock` lists what to fetch",
        ),
        (
            {"version": "1.34.4"},
            "mlcluster:airGap.lockfile: is the bundle of Kubernetes 1.34.4, the stack runs 1.35.8: lock and fetch",
        ),
        (
            {"drop": "kubelet"},
            "mlcluster:airGap.lockfile: holds no kubelet 1.35.8 for the deb family (airGap.osFamilies): its nodes",
        ),
        (
            {"drop": "registry.k8s.io/kube-proxy"},
            "mlcluster:airGap.lockfile: holds no registry.k8s.io/kube-proxy:v1.35.8, which kubeadm pulls",
        ),
        (
            {"drop": "registry.k8s.io/coredns/"},
            "mlcluster:airGap.lockfile: holds no registry.k8s.io/coredns/coredns image (CoreDNS, which kubeadm deploys"
            " as the cluster's DNS): fetch again with --image <each image `kubeadm config images list"
            " --kubernetes-version v1.35.8` names>",
        ),
        (
            {"drop": "registry.k8s.io/etcd:"},
            "mlcluster:airGap.lockfile: holds no registry.k8s.io/etcd image (etcd, which kubeadm runs",
        ),
    ],
)
def test_a_bundle_that_cannot_serve_the_stack_is_refused(tmp_path: Path, lock: dict[str, Any], expected: str) -> None:
    values, secret = air_gapped(fetched_lock(tmp_path / "lock.json", **lock))
    found = errors(values, secret)
    assert any(e.startswith(expected) for e in found), found


def test_a_lockfile_that_is_not_one_is_refused(tmp_path: Path) -> None:
    for name, text, expected in (
        ("broken.json", "{", "is not JSON"),
        ("other.json", json.dumps({"schema": "x"}), "is not a bundle lockfile (schema mlcluster.io/bundle-lock/v1)"),
    ):
        (tmp_path / name).write_text(text)
        found = errors(*air_gapped(tmp_path / name))
        assert any(e.startswith("mlcluster:airGap.lockfile: ") and expected in e for e in found), found
    escaping = json.loads(fetched_lock(tmp_path / "lock.json").read_text())
    escaping["packages"]["deb"][0]["path"] = "../../etc/passwd"
    (tmp_path / "escaping.json").write_text(json.dumps(escaping))
    found = errors(*air_gapped(tmp_path / "escaping.json"))
    assert (
        "mlcluster:airGap.lockfile: package deb:kubeadm: path '../../etc/passwd' is not a plain path inside the bundle"
        in found
    )


def test_a_mirror_of_a_served_registry_and_a_spegel_list_without_one_are_refused(tmp_path: Path) -> None:
    values, secret = air_gapped(fetched_lock(tmp_path / "lock.json"))
    values["images"] = {
        "spegel": {"enabled": True, "mirroredRegistries": ["https://nvcr.io", "https://docker.io"]},
        "mirrors": [{"registry": "nvcr.io", "endpoints": ["https://cache.lab.example"]}],
    }
    found = errors(values, secret)
    assert any(
        e.startswith('mlcluster:images.mirrors[0].registry: "nvcr.io" is served by the air-gap seed') for e in found
    ), found
    assert any(
        e.startswith("mlcluster:images.spegel.mirroredRegistries: leaves out quay.io, registry.k8s.io, served by the")
        for e in found
    ), found


SPEGEL_CHART = ("spegel", "0.7.4")
HELM = "kubernetes:helm.sh/v3:Release"


def with_spegel_chart(lockfile: Path) -> Path:
    """The lockfile with Spegel's chart archive beside the on-prem example's."""
    name, version = SPEGEL_CHART
    document = json.loads(lockfile.read_text())
    archive = lockfile.parent / "charts" / f"{name}-{version}.tgz"
    archive.write_bytes(f"{name} {version}".encode())
    document["charts"].append(
        {"name": name, "version": version, "digest": _digest(f"{name} {version}"), "path": f"charts/{archive.name}"}
    )
    document["counts"]["charts"] += 1
    lockfile.write_text(json.dumps(document))
    _read_lock.cache_clear()
    return lockfile


def spegel_beside_the_seed(run_stack, lockfile: Path, **air_gap: Any) -> tuple[dict[str, Any], str]:  # type: ignore[no-untyped-def]
    """(Spegel's release values, cp-2's preparation) of the air-gapped example with Spegel on."""
    values, secret = air_gapped(lockfile, **air_gap)
    values["images"] = {**values["images"], "spegel": {"enabled": True}}
    run = run_stack(values=values, secret=secret)
    (spegel,) = [r for r in run.of_type(HELM) if r.inputs["name"] == "spegel"]
    return spegel.inputs["values"], run.named("cp-2-prepare").inputs["create"]


def test_spegel_beside_the_seed_keeps_the_seeds_hosts_beneath_its_own(run_stack, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Spegel mirrors exactly the seed's registries and keeps their hosts.toml after its own host (prependExisting);
    the node step writes them where Spegel reads them, and a change of them restarts Spegel's pods."""
    lockfile = with_spegel_chart(fetched_lock(tmp_path / "lock.json"))
    values, prepare = spegel_beside_the_seed(run_stack, lockfile)
    assert values["spegel"]["prependExisting"] is True
    assert values["spegel"]["mirroredRegistries"] == ["https://nvcr.io", "https://quay.io", "https://registry.k8s.io"]
    assert "SPEGEL_BACKUP_DIR=/etc/containerd/certs.d/_backup" in prepare
    for registry in ("nvcr.io", "quay.io", "registry.k8s.io"):
        assert f'[host."http://{SEED_HOST}:5000/v2/{registry}"]' in prepare, registry
    digest = values["podAnnotations"]["mlcluster.io/site-mirrors"]
    assert re.fullmatch(r"[0-9a-f]{16}", digest)

    # The seed's files port is not in any hosts.toml: Spegel's pods stay; its registry port is: they restart.
    same, _ = spegel_beside_the_seed(run_stack, lockfile, filesPort=8081)
    moved, moved_prepare = spegel_beside_the_seed(run_stack, lockfile, registryPort=5001)
    assert same["podAnnotations"] == values["podAnnotations"]
    assert moved["podAnnotations"]["mlcluster.io/site-mirrors"] != digest
    assert f'[host."http://{SEED_HOST}:5001/v2/nvcr.io"]' in moved_prepare

    values, secret = air_gapped(lockfile)
    values["images"] = {**values["images"], "spegel": {"enabled": True}}
    review = planned(run_stack, values, secret, tmp_path / "plan")
    # A mirror of a registry the seed does not serve stays mirrored by Spegel, through its mirror targets.
    values["images"]["mirrors"] = [{"registry": "docker.io", "endpoints": ["https://cache.lab.example"]}]
    (own,) = [r for r in run_stack(values=values, secret=secret).of_type(HELM) if r.inputs["name"] == "spegel"]
    assert own.inputs["values"]["spegel"]["mirroredRegistries"][-1] == "https://docker.io"
    assert own.inputs["values"]["spegel"]["additionalMirrorTargets"] == ["https://cache.lab.example"]
    assert "containerd hosts.toml name the seed, mirror-only, after Spegel's host on each node\n" in review


def planned(run_stack, values: dict[str, Any], secret: list[str], out: Path, earlier: Path | None = None) -> str:  # type: ignore[no-untyped-def]
    """The plan of the stack written to `out` (compared with the plan in `earlier`); its first screen."""
    return write_plan(
        run_stack(values=values, secret=secret).run,
        out,
        project="mlcluster",
        stack="onprem",
        spec=load_spec(values, secret),
        earlier=load_plan(earlier) if earlier is not None else None,
        compared_with=str(earlier) if earlier is not None else None,
    )


def test_the_plan_lists_the_bundle_and_a_new_bundle_shows_in_the_compare(run_stack, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The first screen names the seed and what it serves; plan.json holds every item with its digest; a stack moved
    to a new bundle (an image's new digest, an image added) shows item by item in the plan diff."""
    lockfile = fetched_lock(tmp_path / "lock.json")
    values, secret = air_gapped(lockfile)
    first = planned(run_stack, values, secret, tmp_path / "before")
    assert f"bundle: {lockfile}: 14 charts, 9 images, 10 packages, 2 files; digests 35 of 35 filled" in first
    assert (
        f"  air gap: seed {SEED} checks every item, then serves images at http://{SEED_HOST}:5000 (nvcr.io, quay.io,"
        f" registry.k8s.io) and packages, charts and files at http://{SEED_HOST}:8080; every node's package sources"
        " and containerd hosts.toml name the seed, mirror-only\n" in first
    )
    plan = json.loads((tmp_path / "before" / "plan.json").read_text())
    assert plan["bundle"]["seed"] == SEED and plan["bundle"]["items"]["image"]["registry.k8s.io/pause:3.10"] == (
        _digest("registry.k8s.io/pause:3.10")
    )

    newer = json.loads(lockfile.read_text())
    newer["images"][-1]["digest"] = _digest("a rebuilt cert-manager")
    newer["images"].append({"reference": "quay.io/jetstack/cert-manager-webhook:v1.19.1", "digest": _digest("w")})
    (tmp_path / "newer.json").write_text(json.dumps(newer))
    values, secret = air_gapped(tmp_path / "newer.json")
    second = planned(run_stack, values, secret, tmp_path / "after", tmp_path / "before")
    assert "bundle (the air-gap lockfile: items added, removed, or whose digest changed)" in second
    assert "  + image quay.io/jetstack/cert-manager-webhook:v1.19.1" in second
    controller = "quay.io/jetstack/cert-manager-controller:v1.19.1"
    assert f"  ~ image {controller}: {_digest(controller)} -> {_digest('a rebuilt cert-manager')}" in second
    # The seed's command holds the digests: a new bundle re-runs the seed's step, and only it (no node's preparation:
    # the registries it serves are the same).
    rerun = f"  {SEED}\n    ~ seed                     re-runs: script changed in bundle-verify, seed-serve"
    assert rerun in second, second
    assert "summary: 1 step(s) re-run and 0 replaced on 1 node(s)" in second


def test_every_release_installs_its_chart_from_the_bundle(run_stack, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Helm runs where Pulumi runs, which has no route out either: each release names the bundle's archive, checked
    against the lockfile's digest before Helm reads it; no release names a repository."""
    lockfile = fetched_lock(tmp_path / "lock.json")
    run = run_stack(values=air_gapped(lockfile)[0], secret=air_gapped(lockfile)[1])
    releases = run.of_type("kubernetes:helm.sh/v3:Release")
    assert len(releases) == len(ONPREM_CHARTS)
    for release in releases:
        chart = release.inputs["chart"]
        assert chart == str(tmp_path / "charts" / f"{Path(chart).name}"), chart
        assert Path(chart).name == f"{Path(chart).name.rsplit('-', 1)[0]}-{release.inputs['version']}.tgz"
        assert not release.inputs.get("repositoryOpts"), release.name


@pytest.mark.parametrize("fault", ["missing", "altered", "not in the lockfile"])
def test_a_chart_the_bundle_cannot_give_stops_the_program_by_name(run_stack, tmp_path: Path, fault: str) -> None:  # type: ignore[no-untyped-def]
    lockfile = fetched_lock(tmp_path / "lock.json", drop="kueue" if fault == "not in the lockfile" else "")
    archive = tmp_path / "charts" / "kueue-0.19.2.tgz"
    if fault == "missing":
        archive.unlink()
    elif fault == "altered":
        archive.write_bytes(b"kueue 0.19.3")
    values, secret = air_gapped(lockfile)
    with pytest.raises(Exception, match="kueue") as info:
        run_stack(values=values, secret=secret)
    expected = {
        "missing": f"bundle item chart kueue@0.19.2: {archive}: No such file or directory",
        "altered": f"bundle item chart kueue@0.19.2: {archive} has {_digest('kueue 0.19.3')}, the lockfile says"
        f" {_digest('kueue 0.19.2')}",
        "not in the lockfile": "mlcluster:airGap.lockfile: holds no chart oci://registry.k8s.io/kueue/charts/kueue"
        " 0.19.2, which release kueue-system/kueue installs",
    }[fault]
    assert expected in str(info.value), str(info.value)


def test_a_chart_upgrade_from_a_new_bundle_shows_the_release_and_the_bundle_delta(run_stack, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Day 2: kueue.version moved to 0.19.3 and a new bundle, in the old one's place, holding that chart and the image
    it brings: the compare shows that release and those items, and no other release."""
    lockfile = fetched_lock(tmp_path / "lock.json")
    values, secret = air_gapped(lockfile)
    planned(run_stack, values, secret, tmp_path / "before")
    newer = json.loads(lockfile.read_text())
    archive = tmp_path / "charts" / "kueue-0.19.3.tgz"
    archive.write_bytes(b"kueue 0.19.3")
    for chart in newer["charts"]:
        if chart["name"] == "kueue":
            chart.update(version="0.19.3", digest=_digest("kueue 0.19.3"), path="charts/kueue-0.19.3.tgz")
    image = "registry.k8s.io/kueue/kueue:v0.19.3"
    newer["images"].append({"reference": image, "digest": _digest(image)})
    lockfile.write_text(json.dumps(newer))
    _read_lock.cache_clear()  # the program reads a lockfile once per run; this process runs it twice
    values["kueue"] = {**values["kueue"], "version": "0.19.3"}
    run = run_stack(values=values, secret=secret)
    kueue = next(r for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.name == "kueue")
    assert kueue.inputs["chart"] == str(archive) and kueue.inputs["version"] == "0.19.3"
    text = planned(run_stack, values, secret, tmp_path / "after", tmp_path / "before")
    assert "  - chart kueue@0.19.2" in text and "  + chart kueue@0.19.3" in text
    assert f"  + image {image}" in text
    assert f"  ~ kueue\n      ~ chart: {tmp_path}/charts/kueue-0.19.2.tgz -> {archive}" in text, text
    assert "; 1 release(s) change;" in text


def test_a_relative_lockfile_names_charts_relative_to_the_project(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Helm runs in the project folder: a chart named relative to it reads the same from any checkout."""
    from components.config import airgap
    from components.platform.helm_release import bundled_chart
    from components.render.helm import ChartRelease

    monkeypatch.setattr(airgap, "PROJECT_DIR", tmp_path)
    (tmp_path / "bundle").mkdir()
    fetched_lock(tmp_path / "bundle" / "bundle.lock.json")
    spec = load_spec(*air_gapped(Path("bundle/bundle.lock.json")))
    release = ChartRelease(
        name="kueue", chart="oci://registry.k8s.io/kueue/charts/kueue", version="0.19.2", namespace="k"
    )
    assert bundled_chart(spec.air_gap, release) == "bundle/charts/kueue-0.19.2.tgz"


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("images", "reference", "registry.k8s.io/pause:3.10\tpackages/deb/x.deb\tmine"),
        ("images", "reference", "registry.k8s.io/pause:$(reboot)"),
        ("charts", "name", "kueue\nevil"),
        ("files", "name", "../key"),
    ],
)
def test_a_hostile_lockfile_name_is_refused_before_any_step_carries_it(
    tmp_path: Path, section: str, field: str, value: str
) -> None:
    """Names go into the seed's and nodes' steps as tab-separated rows: a tab, a newline or a shell expansion in one
    would add a row or a command there."""
    document = json.loads(fetched_lock(tmp_path / "lock.json").read_text())
    document[section][0][field] = value
    (tmp_path / "hostile.json").write_text(json.dumps(document))
    found = errors(*air_gapped(tmp_path / "hostile.json"))
    assert any(e.startswith("mlcluster:airGap.lockfile: ") and repr(value) in e for e in found), found
    assert all("\n" not in e and "\t" not in e for e in found), found
