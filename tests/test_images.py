"""Big-image logistics: hosts.toml, containerd registry settings, Spegel, pre-pull DaemonSets, capacity."""

from __future__ import annotations

import copy
import os
import stat
import subprocess
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from components.config.images import MirrorSpec
from components.config.schema import ConfigError
from components.render import images
from components.render.containerd import containerd_config
from components.render.shell import render_script

from .conftest import TEST_CA_PEM, load_spec, stack_values
from .helm_render import render_chart
from .upstream import containerd_errors, kubernetes_errors

CA = TEST_CA_PEM
# Fields containerd reads from hosts.toml (remotes/docker/config/hosts.go: hostFileConfig + server/host).
HOST_FIELDS = {"capabilities", "ca", "client", "skip_verify", "header", "override_path"}


def onprem(**images_config: Any):
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["images"] = images_config
    return values, secret


def spec_with(**images_config: Any):
    values, secret = onprem(**images_config)
    return load_spec(values, secret)


def errors_with(secret_extra: tuple[str, ...] = (), **images_config: Any) -> list[str]:
    values, secret = onprem(**images_config)
    with pytest.raises(ConfigError) as info:
        load_spec(values, [*secret, *secret_extra])
    return [str(p) for p in info.value.problems.errors]


MIRRORS = [
    {"registry": "docker.io", "endpoints": ["https://mirror-a.lab.example", "https://mirror-b.lab.example"]},
    {"registry": "nvcr.io", "endpoints": ["https://nvcr-cache.lab.example"], "ca": CA, "mirrorsOnly": True},
]


def test_hosts_toml_is_containerds_format() -> None:
    spec = spec_with(mirrors=MIRRORS)
    docker, nvcr = (tomllib.loads(images.hosts_toml(m)) for m in spec.images.mirrors)
    assert docker == {
        "server": "https://registry-1.docker.io",
        "host": {
            "https://mirror-a.lab.example": {"capabilities": ["pull", "resolve"]},
            "https://mirror-b.lab.example": {"capabilities": ["pull", "resolve"]},
        },
    }
    assert list(docker["host"]) == ["https://mirror-a.lab.example", "https://mirror-b.lab.example"]
    assert "server" not in nvcr  # mirror only: never fall back to the internet
    assert nvcr["host"]["https://nvcr-cache.lab.example"]["ca"] == "/etc/containerd/certs.d/nvcr.io/ca.crt"
    for document in (docker, nvcr):
        assert set(document) <= {"server", "host", *HOST_FIELDS}
        for host in document["host"].values():
            assert set(host) <= HOST_FIELDS


def test_override_path_keeps_the_endpoints_path_as_the_api_root() -> None:
    """A registry serving several upstreams under path prefixes (a Harbor proxy-cache project, the air-gap seed):
    containerd uses the host's path as written only with override_path (remotes/docker/config/hosts.go
    parseHostConfig); without it, it appends /v2 to any path that does not end in /v2."""
    endpoint = "https://harbor.lab.example/v2/proxy-quay"
    spec = spec_with(mirrors=[{"registry": "quay.io", "endpoints": [endpoint], "overridePath": True}])
    document = tomllib.loads(images.hosts_toml(spec.images.mirrors[0]))
    assert document["host"][endpoint] == {"capabilities": ["pull", "resolve"], "override_path": True}
    plain = spec_with(mirrors=[{"registry": "quay.io", "endpoints": ["https://harbor.lab.example"]}])
    assert (
        "override_path"
        not in tomllib.loads(images.hosts_toml(plain.images.mirrors[0]))["host"]["https://harbor.lab.example"]
    )


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("spegel", [False, True])
def test_registry_settings_are_known_containerd_keys(version: int, spegel: bool) -> None:
    mirrors = [{"registry": "docker.io", "endpoints": ["https://mirror.lab.example"]}]
    spec = spec_with(mirrors=mirrors, spegel={"enabled": spegel})
    document = containerd_config(spec.kubelet, spec.images, "1.7" if version == 2 else "2")
    assert containerd_errors(document, version) == []
    table = document["plugins"]["io.containerd.grpc.v1.cri" if version == 2 else "io.containerd.cri.v1.images"]
    assert table["registry"]["config_path"] == "/etc/containerd/certs.d"
    discard = (table.get("containerd", {}) if version == 2 else table).get("discard_unpacked_layers")
    assert discard is (False if spegel else None)


def test_spegel_values_follow_the_containerd_root() -> None:
    values, secret = onprem(spegel={"enabled": True})
    for node in values["nodes"]:
        node["imageDisk"] = {"path": "/data/containerd"}
    spec = load_spec(values, secret)
    release = images.spegel_release(spec.images, spec.nodes)
    assert release.values["spegel"]["containerdContentPath"] == "/data/containerd/io.containerd.content.v1.content"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"spegel": {"enabled": True}, "mirrors": [MIRRORS[1]]},
            "mlcluster:images.mirrors[0]: sets ca/authorization/skipVerify, which Spegel cannot carry",
        ),
        (
            {"spegel": {"enabled": True}, "mirrors": [MIRRORS[0], {**MIRRORS[1], "ca": None}]},
            "mlcluster:images.mirrors: lists different endpoints per registry",
        ),
        ({"mirrors": [MIRRORS[0], MIRRORS[0]]}, 'mlcluster:images.mirrors[1].registry: "docker.io" is already'),
        ({"mirrors": [{"registry": "docker.io", "endpoints": []}]}, "mirrors[0].endpoints: must list at least one"),
        ({"mirrors": [{"registry": "docker.io", "endpoints": ["mirror.lab"]}]}, "is not an http(s) URL"),
        ({"mirrors": [{**MIRRORS[1], "ca": "not a pem"}]}, "mirrors[0].ca: is not a PEM certificate"),
        (
            {
                "mirrors": [
                    {"registry": "quay.io", "endpoints": ["https://harbor.lab.example/quay"], "overridePath": True}
                ]
            },
            "mirrors[0].endpoints[0]: names no /v2 path, but with overridePath",
        ),
        ({"prepull": [{"name": "x", "images": [{"image": "Bad Image"}]}]}, "is not an image reference"),
        ({"prepull": [{"name": "x", "images": []}, {"name": "x", "images": []}]}, 'prepull[1].name: "x" is used'),
    ],
)
def test_validation(config: dict[str, Any], expected: str) -> None:
    config = {k: v for k, v in config.items()}
    if "mirrors" in config:
        config["mirrors"] = [{k: v for k, v in m.items() if v is not None} for m in config["mirrors"]]
    errors = errors_with(**config)
    assert any(expected in e for e in errors), errors


def test_spegel_refuses_differing_containerd_roots() -> None:
    values, secret = onprem(spegel={"enabled": True})
    values["nodes"][5]["imageDisk"] = {"path": "/data/containerd"}
    with pytest.raises(ConfigError) as info:
        load_spec(values, secret)
    (error,) = [str(p) for p in info.value.problems.errors]
    assert error.startswith("mlcluster:images.spegel.enabled: needs one containerd root on every node")
    assert "/data/containerd: gpu-1;" in error


@pytest.mark.parametrize(
    "registry", ["https://docker.io/", "https://docker.io/v2", "ftp://docker.io", "https://user@docker.io"]
)
def test_spegel_registries_are_refused_as_spegel_refuses_them(registry: str) -> None:
    """spegel v0.7.4 pkg/oci/filter.go validateRegistryURL: http or https, no path (not even "/"), no user."""
    values, secret = onprem(spegel={"enabled": True, "mirroredRegistries": ["https://ghcr.io", registry]})
    with pytest.raises(ConfigError) as info:
        load_spec(values, secret)
    (error,) = [str(p) for p in info.value.problems.errors]
    assert error.startswith("mlcluster:images.spegel.mirroredRegistries: "), error
    assert "is not a registry URL such as" in error or "is not an http(s) URL such as" in error, error
    assert spec_with(spegel={"enabled": True, "mirroredRegistries": ["https://docker.io", "http://reg.lab:5000"]})


def test_prepull_daemonset_validates_and_targets_gpu_nodes() -> None:
    spec = spec_with(prepull=[{"name": "ml-base", "images": [{"image": "nvcr.io/nvidia/pytorch:25.01-py3"}]}])
    document = images.prepull_daemonset(spec.images.prepull[0], spec.kubelet.image_pull_progress_deadline)
    assert kubernetes_errors(document, spec.kubernetes_version) == []
    pod = document["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["initContainers"]][1:] == ["nvcr.io/nvidia/pytorch:25.01-py3"]
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == [{"matchExpressions": [{"key": "mlcluster.io/gpu-model", "operator": "Exists"}]}]
    assert document["metadata"]["annotations"]["mlcluster.io/pull-deadline"] == "30m"
    broken = copy.deepcopy(document)
    broken["spec"]["template"]["spec"]["initContainers"][0]["pullPolicy"] = "Always"
    assert kubernetes_errors(broken, spec.kubernetes_version)


def test_planned_images_per_node() -> None:
    spec = load_spec(*stack_values("onprem"))
    planned = images.planned_images(spec)
    assert sorted(planned) == ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
    acceptance = [spec.acceptance.dcgm_image, spec.acceptance.nccl_tests_image]
    acceptance_off = ["nvcr.io/nvidia/pytorch:25.01-py3", "ultralytics/ultralytics:latest"]
    assert planned["gpu-1"] == [*acceptance_off, *acceptance]
    # Acceptance off: only the stack's own sets.
    spec = replace(spec, acceptance=replace(spec.acceptance, enabled=False))
    assert images.planned_images(spec)["gpu-1"] == [
        "nvcr.io/nvidia/pytorch:25.01-py3",
        "ultralytics/ultralytics:latest",
    ]


# --- the node scripts, run here against a temporary root with a stubbed df ----------------------------


def run_step(script: str, stdin: str = "", path_prefix: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path_prefix is not None:
        env["PATH"] = f"{path_prefix}:{env['PATH']}"
    return subprocess.run(["bash", "-c", script], input=stdin, capture_output=True, text=True, env=env, check=False)


def fake_df(folder: Path, size: int, used: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    df = folder / "df"
    df.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> {folder}/df.calls\n'
        "echo '     1B-blocks         Used        Avail'\n"
        f"echo '{size} {used} {size - used}'\n"
    )
    df.chmod(df.stat().st_mode | stat.S_IEXEC)
    return folder


GIB = 1024**3


@pytest.mark.parametrize(
    ("used_gib", "required_gib", "outcome"),
    [
        (100, 50, "ok"),  # 150 of 1000 GiB: 15%
        (700, 99, "ok"),  # 79.9% just under the 80% high threshold
        (700, 100, "warning"),  # exactly 80%
        (700, 250, "warning"),  # 95%: fits, but GC would start
        (700, 300, "warning"),  # 100%: fits exactly
        (700, 301, "error"),  # needs more than is free
    ],
)
def test_capacity_preflight_numbers(tmp_path: Path, used_gib: int, required_gib: int, outcome: str) -> None:
    stubs = fake_df(tmp_path / "bin", 1000 * GIB, used_gib * GIB)
    root = tmp_path / "containerd"
    root.mkdir()
    script = render_script(
        "image-capacity",
        {"CONTAINERD_ROOT": str(root), "REQUIRED_BYTES": str(required_gib * GIB), "HIGH_THRESHOLD_PERCENT": "80"},
    )
    result = run_step(script, path_prefix=stubs)
    output = result.stdout + result.stderr
    assert f"pre-pulled images need {required_gib:.1f} GiB" in output
    assert f"has {1000 - used_gib:.1f} GiB free of 1000.0 GiB" in output
    if outcome == "error":
        assert result.returncode == 1 and "error:" in result.stderr and "cannot fit" in result.stderr
    else:
        assert result.returncode == 0, output
        assert result.stdout.startswith("warning:" if outcome == "warning" else "ok:"), output
    assert (tmp_path / "bin" / "df.calls").read_text().strip().endswith(str(root))


def test_mirror_step_writes_hosts_files_reads_secrets_on_stdin_and_is_idempotent(tmp_path: Path) -> None:
    from components.render.node_steps import image_steps

    certs = tmp_path / "certs.d"
    values, secret = onprem(
        mirrors=[MIRRORS[0], {**MIRRORS[1], "authorization": "Basic c2VjcmV0LXRva2Vu"}], spegel={"enabled": False}
    )
    spec = load_spec(values, [*secret, "images"])
    node = spec.nodes[5]
    (step,) = [s for s in image_steps(spec, node) if s.name == "registry-mirrors"]
    assert step.stdin is not None and "c2VjcmV0LXRva2Vu" not in step.script
    script = step.script.replace("CERTS_DIR=/etc/containerd/certs.d", f"CERTS_DIR={certs}")
    stale = certs / "quay.io"
    stale.mkdir(parents=True)
    (stale / ".mlcluster-managed").write_text("")
    foreign = certs / "ghcr.io"
    foreign.mkdir()
    first = run_step(script, stdin=step.stdin.reveal())
    assert first.returncode == 0, first.stderr
    assert "changed: " in first.stdout and not stale.exists() and foreign.exists()
    nvcr = certs / "nvcr.io" / "hosts.toml"
    assert 'Authorization = "Basic c2VjcmV0LXRva2Vu"' in nvcr.read_text()
    assert stat.S_IMODE(nvcr.stat().st_mode) == 0o600
    assert (certs / "nvcr.io" / "ca.crt").read_text().strip() == CA
    assert tomllib.loads((certs / "docker.io" / "hosts.toml").read_text()) == tomllib.loads(
        images.hosts_toml(spec.images.mirrors[0])
    )
    second = run_step(script, stdin=step.stdin.reveal())
    assert second.returncode == 0 and "changed:" not in second.stdout, second.stdout
    missing = run_step(script, stdin="")
    assert missing.returncode == 1 and "no authorization for nvcr.io on stdin" in missing.stderr


def test_mirror_step_secret_never_reaches_the_plan(run_stack) -> None:
    values, secret = onprem(
        mirrors=[{"registry": "docker.io", "endpoints": ["https://m.lab.example"], "authorization": "Basic zzTOPzz"}]
    )
    run = run_stack("onprem", values=values, secret=[*secret, "images"])
    # The mirrors step runs inside the node's prepare command, which takes its authorizations on stdin.
    step = run.named("gpu-2-prepare")
    assert "# ---- mlcluster step: registry-mirrors:" in step.inputs["create"]
    assert step.inputs["stdin"] == "[secret]"
    assert "zzTOPzz" not in str([r.inputs for r in run.resources])
    assert step.raw_inputs["stdin"] == "docker.io\tBasic zzTOPzz\n"


@pytest.mark.render
def test_spegel_beside_a_seed_renders_the_arguments_and_annotation_the_chart_gives_its_pods() -> None:
    """The values the program gives Spegel beside an air-gap seed, through the real chart (charts/spegel 0.7.4
    templates/daemonset.yaml): the init container reads each seed registry and prependExisting; the pod template
    carries the digest of the seed's hosts.toml, so a new one rolls the DaemonSet."""
    spec = spec_with(spegel={"enabled": True})
    seed = [
        MirrorSpec(registry=r, endpoints=(f"http://10.20.0.11:5000/v2/{r}",), mirrors_only=True, override_path=True)
        for r in ("ghcr.io", "registry.k8s.io")
    ]
    release = images.spegel_release(spec.images, spec.nodes, tuple(seed))
    chart = render_chart(
        "spegel", release.version, release.values, release="spegel", namespace="spegel", kube_version="1.35.8"
    )
    template = chart.named("DaemonSet", "spegel")["spec"]["template"]
    (init,) = template["spec"]["initContainers"]
    args = init["args"]
    at = args.index("--mirrored-registries")
    assert args[at + 1 : at + 3] == ["https://ghcr.io", "https://registry.k8s.io"]
    assert "--prepend-existing=true" in args
    digest = template["metadata"]["annotations"][images.SITE_MIRRORS_ANNOTATION]

    moved = [replace(m, endpoints=(m.endpoints[0].replace(":5000", ":5001"),)) for m in seed]
    again = images.spegel_release(spec.images, spec.nodes, tuple(moved))
    assert again.values["podAnnotations"][images.SITE_MIRRORS_ANNOTATION] != digest
    without = images.spegel_release(spec.images, spec.nodes)
    assert "podAnnotations" not in without.values and "prependExisting" not in without.values["spegel"]
