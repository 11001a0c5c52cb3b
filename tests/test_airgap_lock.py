"""The air-gap bundle's lockfile (issue 51, first part): what a stack needs from outside its site, read from the
objects it applies, rendered with the real Helm engine; the check that names what a bundle lacks; the diff of two
lockfiles on a chart upgrade."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.airgap import needs
from components.airgap.__main__ import main as airgap_main
from components.airgap.charts import pulled_chart
from components.airgap.fetch import chart_archive
from components.airgap.lock import ChartUnavailableError, normalized, stack_lock
from components.plan.__main__ import main as plan_main
from components.plan.bundle import lock_diff, missing

from .helm_render import chart_path
from .rendered_stack import NOT_IN_FIXTURES, _render, rendered_stack

pytestmark = [pytest.mark.timeout(1800), pytest.mark.xdist_group("rendered-stacks")]

LOOKS_LIKE_AN_IMAGE = re.compile(
    r"(?<![\w/.:-])((?:[a-z0-9-]+\.)+[a-z]{2,}(?::\d+)?/[a-z0-9._/-]+(?::[A-Za-z0-9_][A-Za-z0-9._-]*|@sha256:[0-9a-f]{64}))"
)
"""A registry host with a dot, a path, and a tag or digest, anywhere in any string: wider than what the lockfile's
reader looks at (container images, image fields, image flags, embedded config), on purpose."""


def named_anywhere(objects: Iterable[Mapping[str, Any]]) -> set[str]:
    """Every string in the objects that reads as a registry image (not a URL): the test's own, independent scan."""
    found = set()
    for obj in objects:
        if obj.get("kind") == "CustomResourceDefinition":
            continue  # a schema's examples and descriptions, not what runs
        # Every string of the object at once: a reference never holds a character JSON escapes.
        text = json.dumps(obj)
        for match in LOOKS_LIKE_AN_IMAGE.finditer(text):
            if text[max(0, match.start() - 3) : match.start()] != "://":
                found.add(match.group(1))
    return found


def fixture_render(kube_version: str) -> Any:
    """Renders as the tests render the pinned charts (stand-ins included), through the same engine."""

    def render(chart: str, version: str, values: Mapping[str, Any], release: str, namespace: str) -> Any:
        if chart in NOT_IN_FIXTURES:
            raise ChartUnavailableError(chart)
        return _render(chart, version, json.dumps(values, sort_keys=True), release, namespace, kube_version).objects

    return render


def lock_of(variant: str) -> dict[str, Any]:
    stack = rendered_stack(variant)
    return stack_lock(stack.spec, stack.resources, fixture_render(stack.spec.kubernetes_version), stack=variant)


VARIANTS = ("onprem", "cloud", "knative", "dra", "rdma", "llm")


@pytest.mark.render
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_image_a_rendered_object_names_is_in_the_lockfile(
    variant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = rendered_stack(variant)
    lock = lock_of(variant)
    locked = {i["reference"] for i in lock["images"]}
    objects = [o for r in stack.releases for o in r.chart.objects]
    objects += [dict(r.inputs) for r in stack.resources if r.custom and r.type.startswith("kubernetes:")]
    scanned = {normalized(image) for image in named_anywhere(objects)}
    assert sorted(scanned - locked) == []
    # Only what the fixtures cannot render goes unrendered, and the lockfile says so.
    assert {u.split("@")[0] for u in lock["unrendered"]} == {r for r in NOT_IN_FIXTURES if variant == "llm"}
    with capsys.disabled():
        counts = lock["counts"]
        print(
            f"\n{variant}: {counts['charts']} charts, {counts['images']} images ({len(scanned)} found by the wide"
            f" scan), {counts['packages']} packages, {counts['files']} files; unresolved: {len(lock['unresolved'])}"
        )


@pytest.mark.render
def test_the_wide_scan_catches_a_reader_that_misses_embedded_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: with ConfigMaps' embedded configuration unread, KServe's agent and router images (named
    only in inferenceservice-config) and Trainer's runtimes (in its installer's ConfigMap) go missing."""
    real = needs.object_images
    monkeypatch.setattr(needs, "object_images", lambda obj: [] if obj.get("kind") == "ConfigMap" else real(obj))
    stack = rendered_stack("onprem")
    lock = stack_lock(stack.spec, stack.resources, fixture_render(stack.spec.kubernetes_version), stack="onprem")
    locked = {i["reference"] for i in lock["images"]}
    objects = [o for r in stack.releases for o in r.chart.objects]
    lost = {normalized(i) for i in named_anywhere(objects)} - locked
    assert "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0" in lost


def test_the_reader_finds_images_where_operators_and_charts_put_them() -> None:
    policy = {
        "kind": "ClusterPolicy",
        "spec": {
            "driver": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "driver", "version": "595.91.07"},
            "gds": {
                "enabled": False,
                "repository": "nvcr.io/nvidia/cloud-native",
                "image": "nvidia-fs",
                "version": "2",
            },
            "toolkit": {
                "repository": "nvcr.io/nvidia/k8s",
                "image": "container-toolkit",
                "version": "sha256:" + "a" * 64,
            },
        },
    }
    assert needs.object_images(policy) == [
        "nvcr.io/nvidia/driver:595.91.07",
        "nvcr.io/nvidia/k8s/container-toolkit@sha256:" + "a" * 64,
    ]
    operator = {
        "kind": "Deployment",
        "spec": {
            "template": {
                "spec": {
                    "initContainers": [{"name": "init", "image": "busybox:1.36"}],
                    "containers": [
                        {
                            "name": "operator",
                            "image": "quay.io/prometheus-operator/prometheus-operator:v0.93.1",
                            "args": ["--prometheus-config-reloader=quay.io/prometheus-operator/reloader:v0.93.1"],
                        }
                    ],
                }
            }
        },
    }
    assert sorted(needs.object_images(operator)) == [
        "busybox:1.36",
        "quay.io/prometheus-operator/prometheus-operator:v0.93.1",
        "quay.io/prometheus-operator/reloader:v0.93.1",
    ]
    # Prose is not an image: a flag or variable must name a registry path with a tag or digest.
    assert needs.object_images(
        {"kind": "Pod", "spec": {"containers": [{"image": "x", "args": ["--image=latest"]}]}}
    ) == ["x"]
    switched_off = {"kind": "ClusterPolicy", "spec": {"vgpuManager": {"enabled": False, "image": "vgpu-manager"}}}
    assert needs.object_images(switched_off) == []
    config = {"kind": "ConfigMap", "data": {"agent": json.dumps({"image": "kserve/agent:v0.20.0"}), "note": "x: y"}}
    assert needs.object_images(config) == ["kserve/agent:v0.20.0"]
    assert [normalized(r) for r in ("busybox:1.36", "kserve/agent:v0.20.0", "quay.io/x/y:1")] == [
        "docker.io/library/busybox:1.36",
        "docker.io/kserve/agent:v0.20.0",
        "quay.io/x/y:1",
    ]


@pytest.mark.render
def test_the_on_prem_lockfile_names_packages_files_charts_and_what_it_cannot_resolve() -> None:
    lock = lock_of("onprem")
    assert {c["name"] for c in lock["charts"]} >= {"gpu-operator", "kserve-resources", "kueue", "tigera-operator"}
    # The Kubernetes project's packages; containerd on Debian/Ubuntu, keepalived and haproxy are the OS mirror's.
    assert {p["name"] for p in lock["packages"]["deb"]} == {
        "kubeadm",
        "kubelet",
        "kubectl",
        "cri-tools",
        "kubernetes-cni",
    }
    assert {p["name"] for p in lock["packages"]["rpm"]} == {
        "kubeadm", "kubelet", "kubectl", "cri-tools", "kubernetes-cni", "containerd.io"
    }  # fmt: skip
    assert [f["name"] for f in lock["files"]] == ["kubernetes-deb-key", "kubernetes-rpm-key", "docker-ce-rpm-key"]
    version = lock["kubernetesVersion"]
    assert f"registry.k8s.io/kube-apiserver:v{version}" in {i["reference"] for i in lock["images"]}
    unresolved = " ".join(lock["unresolved"])
    assert "kubeadm config images list" in unresolved
    # Calico's images and Envoy's proxy, launched by operators at the pinned versions, read from their source.
    assert "--print-images=list" not in unresolved and "EnvoyProxy default" not in unresolved
    launched = {i["reference"]: i["sources"] for i in lock["images"]}
    assert {f"docker.io/calico/{c}:v3.30.3" for c in ("node", "cni", "typha", "kube-controllers", "csi")} <= set(
        launched
    )
    assert any("tigera/operator v1.38.6" in s for s in launched["docker.io/calico/node:v3.30.3"])
    assert any("DefaultEnvoyProxyImage" in s for s in launched["docker.io/envoyproxy/envoy:distroless-v1.39.0"])
    assert all(i["digest"] is None for i in lock["images"])
    # Named without a tag: the bundle needs the tag the launching controller adds, so the lockfile says so.
    assert any(u.startswith("docker.io/kserve/art-explainer (untagged") for u in lock["unresolved"])
    assert all(":" in i["reference"].rsplit("/", 1)[-1] or "@" in i["reference"] for i in lock["images"])


def test_check_names_each_item_a_bundle_lacks_and_diff_shows_what_changed() -> None:
    needed = {
        "charts": [{"name": "lws", "version": "v0.10.0", "digest": None}],
        "images": [{"reference": "registry.k8s.io/lws/lws:v0.10.0", "digest": None}],
        "packages": {"deb": [{"name": "kubeadm", "version": "1.35.8", "digest": None}]},
        "files": [],
    }
    bundle = {"charts": [], "images": [], "packages": {"deb": [{"name": "kubeadm", "version": "1.35.7"}]}, "files": []}
    assert missing(needed, bundle) == [
        "chart lws@v0.10.0",
        "image registry.k8s.io/lws/lws:v0.10.0",
        "package deb:kubeadm=1.35.8",
    ]
    fetched = json.loads(json.dumps(needed))
    fetched["images"][0]["digest"] = "sha256:" + "1" * 64
    assert lock_diff(needed, fetched) == [f"~ image registry.k8s.io/lws/lws:v0.10.0: None -> sha256:{'1' * 64}"]


# --- the command, on a folder of pulled charts -------------------------------------------------------------------


def pulled_charts(into: Path) -> Path:
    """What `helm pull --untar` leaves, for every chart the fixtures hold: <chart>/<version>/ (links)."""
    charts = into / "charts"
    for folder in sorted(p for p in chart_path("kueue", "0.19.2").parents[1].iterdir() if p.is_dir()):
        for version in folder.iterdir():
            if (version / "Chart.yaml").is_file():
                published = str(yaml.safe_load((version / "Chart.yaml").read_text()).get("version"))
                (charts / folder.name).mkdir(parents=True, exist_ok=True)
                (charts / folder.name / version.name).symlink_to(version)
                if published != version.name and not (charts / folder.name / published).exists():
                    (charts / folder.name / published).symlink_to(version)
    (charts / "nvsentinel" / "v1.19.0").symlink_to(chart_path("nvsentinel", "v1.19.0"))
    return charts


def upgraded_metrics_server(charts: Path) -> None:
    """A chart upgrade built for the test: metrics-server 3.13.0's source as 3.13.1 with the next image tag."""
    source = chart_path("metrics-server", "3.13.0")
    target = charts / "metrics-server" / "3.13.1"
    shutil.copytree(source, target, symlinks=True)
    chart = yaml.safe_load((target / "Chart.yaml").read_text())
    chart["version"], chart["appVersion"] = "3.13.1", "0.8.1"
    (target / "Chart.yaml").write_text(yaml.safe_dump(chart))


@pytest.mark.render
def test_a_chart_upgrade_shows_in_the_lockfile_diff_and_the_plans_compare_with_the_image_it_brings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    charts = pulled_charts(tmp_path)
    upgraded_metrics_server(charts)
    stack = yaml.safe_load((Path(__file__).parents[1] / "stacks" / "Pulumi.onprem.yaml").read_text())
    before, after = tmp_path / "before.lock.json", tmp_path / "after.lock.json"
    (tmp_path / "Pulumi.before.yaml").write_text(yaml.safe_dump(stack))
    stack["config"]["mlcluster:kserve"]["metricsServerVersion"] = "3.13.1"
    (tmp_path / "Pulumi.after.yaml").write_text(yaml.safe_dump(stack))
    for name, out in (("before", before), ("after", after)):
        assert (
            airgap_main(
                [
                    "lock",
                    "--stack-file",
                    str(tmp_path / f"Pulumi.{name}.yaml"),
                    "--charts",
                    str(charts),
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
    changes = lock_diff(json.loads(before.read_text()), json.loads(after.read_text()))
    assert changes == [
        "- chart metrics-server@3.13.0",
        "+ chart metrics-server@3.13.1",
        "- image registry.k8s.io/metrics-server/metrics-server:v0.8.0",
        "+ image registry.k8s.io/metrics-server/metrics-server:v0.8.1",
    ]
    # The plan lists the lockfile, and --compare shows the same lines beside the release's change.
    at = ["--at", "2026-12-05T12:00:00Z"]
    first = ["--stack-file", str(tmp_path / "Pulumi.before.yaml"), "--out", str(tmp_path / "plan-before")]
    assert plan_main([*first, "--bundle-lock", str(before), *at]) == 0
    capsys.readouterr()
    second = ["--stack-file", str(tmp_path / "Pulumi.after.yaml"), "--out", str(tmp_path / "plan-after")]
    assert plan_main([*second, "--bundle-lock", str(after), "--compare", str(tmp_path / "plan-before"), *at]) == 0
    out = capsys.readouterr().out
    section = out.split("bundle (the air-gap lockfile", 1)[1].split("\n\n", 1)[0]
    assert [line.strip() for line in section.splitlines()[1:]] == changes
    plan = json.loads((tmp_path / "plan-after" / "plan.json").read_text())
    assert plan["bundle"]["lock"] == "after.lock.json" and plan["bundle"]["digests"].startswith("0 of ")


@pytest.mark.render
def test_check_refuses_a_bundle_that_lacks_what_the_stack_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    charts = pulled_charts(tmp_path)
    lock = tmp_path / "bundle.lock.json"
    assert airgap_main(["lock", "--stack", "onprem", "--charts", str(charts), "--out", str(lock)]) == 0
    assert airgap_main(["check", "--stack", "onprem", "--charts", str(charts), "--lock", str(lock)]) == 0
    document = json.loads(lock.read_text())
    document["images"] = [i for i in document["images"] if "kueue" not in i["reference"]]
    lock.write_text(json.dumps(document))
    capsys.readouterr()
    assert airgap_main(["check", "--stack", "onprem", "--charts", str(charts), "--lock", str(lock)]) == 2
    err = capsys.readouterr().err
    assert "lacks 1 item(s)" in err and "image us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue" in err


@pytest.mark.render
def test_check_inside_the_site_reads_the_charts_from_the_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No pulled-charts folder on the site: `check` unpacks the bundle's own archives beside the lockfile."""
    charts = pulled_charts(tmp_path / "pulled")
    lock = tmp_path / "bundle" / "bundle.lock.json"
    lock.parent.mkdir()
    assert airgap_main(["lock", "--stack", "onprem", "--charts", str(charts), "--out", str(lock)]) == 0
    document = json.loads(lock.read_text())
    for chart in document["charts"]:
        archive = lock.parent / "charts" / f"{chart['name']}-{chart['version']}.tgz"
        chart_archive(pulled_chart(charts, chart["name"], chart["version"]), chart["name"], archive)
        chart["path"] = str(archive.relative_to(lock.parent))
    document["images"] = [i for i in document["images"] if "kueue" not in i["reference"]]
    lock.write_text(json.dumps(document))
    capsys.readouterr()
    assert airgap_main(["check", "--stack", "onprem", "--lock", str(lock)]) == 2
    err = capsys.readouterr().err
    assert "lacks 1 item(s)" in err and "image us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue" in err
    # One archive missing: its chart cannot be rendered, so the check says so instead of passing.
    (lock.parent / document["charts"][0]["path"]).unlink()
    assert airgap_main(["check", "--stack", "onprem", "--lock", str(lock)]) == 2
    assert f"not under the bundle beside {lock}" in capsys.readouterr().err
