"""Where tuning lands per Kubernetes minor and containerd line; checked against upstream, rendered, documented."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from typing import Any

import pytest
import yaml

from components.config.load import spec_from_values
from components.config.spec import DEFAULT_KUBERNETES_VERSION, Spec
from components.render import kubeadm
from components.render.containerd import containerd_config_toml
from components.render.kubelet import kubelet_configuration
from components.render.kubelet_placement import (
    CONTAINERD_CONFIG_VERSION,
    CONTAINERD_LINES,
    DOCUMENTED_MINORS,
    DROP_IN_SINCE,
    MANAGED_FLAGS,
    PULL_TIMEOUT_TABLE,
    SETTINGS,
    TABLE_END,
    TABLE_START,
    drop_in_configuration,
    kubelet_flags,
    placement_markdown,
    spec_warnings,
)
from components.render.tuning_steps import restart_batches, tuning_step

from .conftest import PROJECT
from .upstream import config_schema, containerd_errors, kubelet_errors

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG1sY2x1c3Rlci10ZXN0LWhvc3Qta2V5LTAwMDAwMDAw"
# Every kubelet flag the tuning may emit, from the upstream kubelet command-line reference (kubernetes/website
# content/en/docs/reference/command-line-tools-reference/kubelet.md, 1.34 era). `--max-parallel-image-pulls`
# and `--image-maximum-gc-age` are absent there: those fields are config-only.
UPSTREAM_KUBELET_FLAGS = {
    "--image-gc-high-threshold",
    "--image-gc-low-threshold",
    "--minimum-image-ttl-duration",
    "--eviction-hard",
    "--system-reserved",
    "--kube-reserved",
    "--cpu-manager-policy",
    "--topology-manager-policy",
    "--serialize-image-pulls",
    "--config-dir",
}
FULL_TUNING = {
    "imageGCHighThresholdPercent": 85,
    "imageGCLowThresholdPercent": 75,
    "imagePullProgressDeadline": "1h",
    "imageMinimumGCAge": "5m",
    "imageMaximumGCAge": "168h",
    "evictionHard": {"imagefs.available": "10%", "nodefs.available": "5%", "memory.available": "500Mi"},
    "maxParallelImagePulls": 3,
    "systemReserved": {"cpu": "500m", "memory": "1Gi"},
    "kubeReserved": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "10Gi"},
    "cpuManagerPolicy": "static",
    "topologyManagerPolicy": "single-numa-node",
}


def make_spec(
    version: str = "1.34.2",
    kubelet: dict[str, Any] | None = None,
    workers: int = 0,
    control_planes: int = 1,
    node: dict[str, Any] | None = None,
) -> Spec:
    """cp-1 (with `node`'s extra keys), further control planes, then workers."""
    first = {"name": "cp-1", "host": "198.18.0.10", "roles": ["control-plane"], "hostKey": HOST_KEY, **(node or {})}
    nodes = [first]
    nodes += [
        {"name": f"cp-{i}", "host": f"198.18.0.{10 + i}", "roles": ["control-plane"], "hostKey": HOST_KEY}
        for i in range(2, control_planes + 1)
    ]
    nodes += [
        {"name": f"w-{i}", "host": f"198.18.1.{i}", "roles": ["worker"], "hostKey": HOST_KEY}
        for i in range(1, workers + 1)
    ]
    values = {
        "kubernetesVersion": DEFAULT_KUBERNETES_VERSION,
        "cluster": {"name": "lab", **({"controlPlaneEndpoint": "198.18.0.100"} if control_planes > 1 else {})},
        "ssh": {"privateKey": "KEY"},
        "nodes": nodes,
        "kubelet": kubelet or {},
        # The platform layers have their own version floors; this is about the nodes.
        **{layer: {"enabled": False} for layer in ("gpuOperator", "kueue", "kserve", "kubeflow", "storage")},
    }
    # Placed at any minor the renderers document (docs/kubelet-tuning.md); a kubeadm stack below 1.31 is refused
    # by the support calendar (kubeadm's v1beta4), which tests/test_support_calendar.py proves.
    return replace(spec_from_values(values, lambda key: key == "ssh"), kubernetes_version=version)


def since(text: str) -> tuple[int, int]:
    major, minor = text.lstrip("<=v").split(".")[:2]
    return int(major), int(minor)


def test_config_fields_exist_upstream_no_earlier_than_we_use_them() -> None:
    schema = config_schema("kubelet-config-v1beta1.json")["kinds"]["KubeletConfiguration"]["properties"]
    for setting in SETTINGS:
        for field in setting.fields:
            assert field in schema, f"{field} is not a KubeletConfiguration field"
            assert setting.config_since >= since(schema[field]["x-since"]), (setting.key, schema[field]["x-since"])
    # imageMaximumGCAge appeared in 1.29 behind an alpha gate; we only use it from 1.30 (beta, on by default).
    assert since(schema["imageMaximumGCAge"]["x-since"]) == (1, 29)


def test_pull_timeout_tables_match_the_containerd_schemas() -> None:
    for line, table in PULL_TIMEOUT_TABLE.items():
        if table is None:
            continue
        version = CONTAINERD_CONFIG_VERSION[line]
        paths = config_schema(f"containerd-cri-v{version}.json")["paths"]
        plugin = table.split(".", 1)[1].strip("\"'")
        assert f'plugins."{plugin}".image_pull_progress_timeout' in paths


@pytest.mark.parametrize("minor", DOCUMENTED_MINORS, ids=lambda m: f"{m[0]}.{m[1]}")
def test_every_emitted_flag_exists_and_the_dockershim_deadline_never_appears(minor) -> None:
    spec = make_spec(f"{minor[0]}.{minor[1]}.0", FULL_TUNING)
    flags = [a for a in kubelet_flags(spec.kubelet, spec.kubelet, minor) if a.startswith("--")]
    assert {f.split("=")[0] for f in flags} <= UPSTREAM_KUBELET_FLAGS
    assert "--image-pull-progress-deadline" not in " ".join(flags)
    assert set(MANAGED_FLAGS) >= {f.split("=")[0] for f in flags}
    if minor >= DROP_IN_SINCE:
        assert flags == ["--config-dir=/etc/kubernetes/kubelet.conf.d"]
    else:
        assert "--cpu-manager-policy" in flags and "--eviction-hard" in flags


@pytest.mark.parametrize("minor", DOCUMENTED_MINORS, ids=lambda m: f"{m[0]}.{m[1]}")
def test_rendered_kubelet_configurations_validate_upstream(minor) -> None:
    spec = make_spec(f"{minor[0]}.{minor[1]}.0", FULL_TUNING)
    day1 = kubelet_configuration(spec.kubelet, minor)
    assert kubelet_errors(day1) == []
    assert ("imageMaximumGCAge" in day1) == (minor >= (1, 30))
    assert ("maxParallelImagePulls" in day1) == (minor >= (1, 27))
    drop_in = drop_in_configuration(spec.kubelet, minor)
    if minor >= DROP_IN_SINCE:
        assert drop_in is not None and kubelet_errors(drop_in) == []
        assert drop_in["evictionHard"]["imagefs.available"] == "10%"
    else:
        assert drop_in is None


def test_kubeadm_init_carries_the_version_filtered_kubelet_configuration() -> None:
    spec = make_spec("1.29.4", FULL_TUNING)
    documents = list(yaml.safe_load_all(kubeadm.init_config(spec, spec.nodes[0])))
    kubelet = documents[2]
    assert kubelet["imageGCLowThresholdPercent"] == 75 and "imageMaximumGCAge" not in kubelet
    assert kubelet_errors(kubelet) == []


@pytest.mark.parametrize("line", CONTAINERD_LINES)
def test_containerd_config_per_line_uses_only_upstream_keys(line) -> None:
    spec = make_spec(kubelet=FULL_TUNING, node={"imageDisk": {"device": "/dev/sdb", "mountPoint": "/data/images"}})
    document = tomllib.loads(containerd_config_toml(spec.kubelet, spec.images, line, spec.nodes[0]))
    version = CONTAINERD_CONFIG_VERSION[line]
    assert document["version"] == version and document["root"] == "/data/images"
    assert containerd_errors(document, version) == []
    text = containerd_config_toml(spec.kubelet, spec.images, line)
    assert ("image_pull_progress_timeout" in text) == (line != "1.6")


def test_the_seed_line_for_default_tuning_before_1_30() -> None:
    spec = make_spec("1.29.10")
    assert " ".join(kubelet_flags(spec.kubelet, spec.kubelet, (1, 29))) == (
        "--image-gc-low-threshold 70 --image-gc-high-threshold 80"
    )
    step = tuning_step(spec.kubelet, spec.kubernetes_version, spec.images, spec.nodes[0])
    assert step.settings["KUBELET_FLAGS"] == "--image-gc-low-threshold 70 --image-gc-high-threshold 80"
    assert step.settings["KUBELET_DROP_IN"] == ""


def test_node_override_merges_over_the_cluster() -> None:
    spec = make_spec(
        "1.29.10",
        {"evictionHard": {"imagefs.available": "10%"}, "cpuManagerPolicy": "static", "systemReserved": {"cpu": "1"}},
        node={"kubelet": {"imageGCLowThresholdPercent": 60, "evictionHard": {"nodefs.available": "5%"}}},
    )
    flags = tuning_step(spec.kubelet, spec.kubernetes_version, spec.images, spec.nodes[0]).settings["KUBELET_FLAGS"]
    assert "--image-gc-low-threshold 60 " in flags
    assert "--eviction-hard imagefs.available<10%,nodefs.available<5%" in flags
    assert "--cpu-manager-policy static" in flags and "--system-reserved cpu=1" in flags


def test_node_back_to_the_default_policy_is_still_written_when_the_cluster_differs() -> None:
    spec = make_spec(
        "1.29.10",
        {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "1"}},
        node={"kubelet": {"cpuManagerPolicy": "none"}},
    )
    assert (
        "--cpu-manager-policy none"
        in tuning_step(spec.kubelet, spec.kubernetes_version, spec.images, spec.nodes[0]).settings["KUBELET_FLAGS"]
    )


WARNINGS = [
    (
        "containerd 1.6 cannot honour the deadline",
        "1.34.2",
        {"containerdVersion": "1.6.20"},
        {},
        "kubelet.imagePullProgressDeadline: (30m) cannot be honoured: containerd 1.6 has no"
        " image_pull_progress_timeout",
    ),
    (
        "config-only setting before 1.30",
        "1.29.3",
        {"maxParallelImagePulls": 3},
        {},
        "kubelet.maxParallelImagePulls: lands only in kubeadm's KubeletConfiguration at init on Kubernetes 1.29",
    ),
    (
        "per-node config-only setting before 1.30",
        "1.29.3",
        {},
        {"kubelet": {"maxParallelImagePulls": 5}},
        "nodes[0].kubelet.maxParallelImagePulls: lands only in kubeadm's KubeletConfiguration at init on Kubernetes"
        " 1.29 (no kubelet flag, no drop-in directory before 1.30): this node's value cannot be honoured (node cp-1)",
    ),
    (
        "field the minor does not have",
        "1.29.3",
        {"imageMaximumGCAge": "168h"},
        {},
        "kubelet.imageMaximumGCAge: is not set: Kubernetes 1.29 has no imageMaximumGCAge (needs >= 1.30)",
    ),
    (
        "config-only setting applied as flags",
        "1.35.8",
        {"applyAs": "flags", "maxParallelImagePulls": 3},
        {},
        "kubelet.maxParallelImagePulls: lands only in kubeadm's KubeletConfiguration at init on Kubernetes 1.35 (no"
        " kubelet flag, kubelet.applyAs is flags): a change after init is not applied",
    ),
    (
        "one node on containerd 1.6",
        "1.34.2",
        {},
        {"kubelet": {"containerdVersion": "1.6"}},
        "nodes[0].kubelet.imagePullProgressDeadline: (30m) cannot be honoured (node cp-1): containerd 1.6",
    ),
]


@pytest.mark.parametrize(("case", "version", "kubelet", "node", "expected"), WARNINGS, ids=[w[0] for w in WARNINGS])
def test_preview_warns_when_settings_cannot_be_honoured(case, version, kubelet, node, expected) -> None:
    warnings = [f"{w.path}: {w.message}" for w in spec_warnings(make_spec(version, kubelet, node=node))]
    assert any(w.startswith(expected) for w in warnings), warnings


@pytest.mark.parametrize("apply_as", ["drop-in", "flags"])
def test_apply_as_chooses_the_kubelet_drop_in_or_the_classic_flags(apply_as: str) -> None:
    spec = make_spec("1.35.8", {"applyAs": apply_as, "imageGCHighThresholdPercent": 85})
    tuning, minor = spec.kubelet, (1, 35)
    if apply_as == "drop-in":
        assert kubelet_flags(tuning, tuning, minor) == ["--config-dir=/etc/kubernetes/kubelet.conf.d"]
        assert (drop_in_configuration(tuning, minor) or {})["imageGCHighThresholdPercent"] == 85
    else:
        assert kubelet_flags(tuning, tuning, minor) == [
            "--image-gc-low-threshold",
            "70",
            "--image-gc-high-threshold",
            "85",
        ]
        assert drop_in_configuration(tuning, minor) is None


def test_supported_settings_give_no_warning() -> None:
    assert spec_warnings(make_spec("1.34.2", {**FULL_TUNING, "containerdVersion": "2.1"})) == []


BATCHES = [
    # (control planes, workers, restart settings, expected batch sizes)
    (1, 0, {}, [1]),
    (3, 4, {}, [1, 1, 1, 1, 1, 1, 1]),
    (1, 8, {}, [1, 2, 2, 2, 2]),
    (1, 10, {}, [1, 2, 2, 2, 2, 2]),
    (3, 8, {"maxUnavailableControlPlanes": 2, "maxUnavailableWorkers": "50%"}, [2, 1, 4, 4]),
    (1, 5, {"maxUnavailableWorkers": 3}, [1, 3, 2]),
]


@pytest.mark.parametrize(("control_planes", "workers", "restart", "sizes"), BATCHES)
def test_restart_batches(control_planes, workers, restart, sizes) -> None:
    spec = make_spec(kubelet={"restart": restart}, workers=workers, control_planes=control_planes)
    batches = restart_batches(spec.kubelet, spec.control_planes, spec.workers)
    assert [len(b) for b in batches] == sizes
    assert [n.name for b in batches for n in b] == [n.name for n in (*spec.control_planes, *spec.workers)]
    assert all(all(n.is_control_plane for n in b) or not any(n.is_control_plane for n in b) for b in batches)


def test_the_docs_table_is_generated_and_current() -> None:
    page = (PROJECT / "docs" / "kubelet-tuning.md").read_text()
    assert TABLE_START in page and TABLE_END in page
    current = page[page.index(TABLE_START) + len(TABLE_START) : page.index(TABLE_END)].strip("\n")
    assert current == placement_markdown().strip("\n"), "stale: python -m components.render.kubelet_placement --write"
    for minor in ("1.23", "1.30", "1.34", "1.36"):
        for line in ("1.6", "1.7", "2.x"):
            assert f"\n| {minor} | {line} |" in "\n" + current
    readme = (PROJECT / "README.md").read_text()
    assert "(docs/kubelet-tuning.md)" in readme
