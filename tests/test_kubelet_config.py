"""Kubelet tuning config: per-node overrides merged over the cluster, one data-driven case per rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.config.kubelet import effective_kubelet

from .test_config_validation import base, errors_of, parse, set_path


def with_changes(changes: dict[str, Any]) -> dict[str, Any]:
    values = copy.deepcopy(base())
    for path, value in changes.items():
        set_path(values, path, value)
    return values


CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "node threshold order after merge",
        {"nodes.2.kubelet": {"imageGCLowThresholdPercent": 85}},
        "mlcluster:nodes[2].kubelet.imageGCLowThresholdPercent: (85) must be lower than imageGCHighThresholdPercent"
        " (80) on node gpu-1 (its kubelet section merged over mlcluster:kubelet)",
    ),
    (
        "node high below cluster low",
        {"nodes.1.kubelet": {"imageGCHighThresholdPercent": 60}},
        "mlcluster:nodes[1].kubelet.imageGCLowThresholdPercent: (70) must be lower than imageGCHighThresholdPercent"
        " (60) on node w-1",
    ),
    ("node threshold range", {"nodes.1.kubelet": {"imageGCHighThresholdPercent": 101}}, "must be between 0 and 100"),
    ("low threshold range", {"kubelet.imageGCLowThresholdPercent": -1}, "-1 must be between 0 and 100"),
    ("node duration", {"nodes.1.kubelet": {"imagePullProgressDeadline": "soon"}}, "is not a duration such as 30m"),
    (
        "gc ages order",
        {"kubelet.imageMinimumGCAge": "2h", "kubelet.imageMaximumGCAge": "1h"},
        'mlcluster:kubelet.imageMaximumGCAge: ("1h") must be longer than imageMinimumGCAge ("2h")',
    ),
    (
        "static needs a cpu reservation",
        {"kubelet.cpuManagerPolicy": "static"},
        'mlcluster:kubelet.cpuManagerPolicy: "static" needs a cpu reservation',
    ),
    (
        "node static needs a cpu reservation",
        {"nodes.2.kubelet": {"cpuManagerPolicy": "static", "systemReserved": {"memory": "1Gi"}}},
        'mlcluster:nodes[2].kubelet.cpuManagerPolicy: "static" needs a cpu reservation',
    ),
    (
        "eviction signal",
        {"kubelet.evictionHard": {"imagefs.avail": "10%"}},
        "has unknown eviction signal 'imagefs.avail'",
    ),
    ("eviction quantity", {"kubelet.evictionHard": {"imagefs.available": "ten"}}, "not a quantity or percentage"),
    ("reserved resource", {"kubelet.systemReserved": {"gpu": "1"}}, "reserves unknown resource 'gpu'"),
    ("containerd version", {"kubelet.containerdVersion": "latest"}, "is not `auto` or a containerd version"),
    ("max unavailable zero", {"kubelet.restart": {"maxUnavailableWorkers": 0}}, "is not a node count"),
    ("max unavailable percent", {"kubelet.restart": {"maxUnavailableWorkers": "150%"}}, "is not a node count"),
    ("device path", {"nodes.2.imageDisk": {"device": "/dev/../etc/passwd"}}, "is not a block device path"),
    ("image disk mount point", {"nodes.2.imageDisk": {"device": "/dev/sdb", "mountPoint": "/var"}}, "system directory"),
    ("image disk path", {"nodes.2.imageDisk": {"path": "/"}}, 'mlcluster:nodes[2].imageDisk.path: "/" is a system'),
    ("unknown node key", {"nodes.1.kubelet": {"imageGCHigh": 90}}, "nodes[1].kubelet.imageGCHigh: unknown key"),
]


@pytest.mark.parametrize(("rule", "changes", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rule(rule: str, changes: dict[str, Any], expected: str) -> None:
    errors = errors_of(with_changes(changes))
    assert any(expected in e for e in errors), f"{rule}: {expected!r} not in {errors}"


def test_a_broken_cluster_rule_is_reported_once_not_per_node() -> None:
    values = with_changes({"kubelet.imageGCLowThresholdPercent": 90, "nodes.1.kubelet": {"maxParallelImagePulls": 2}})
    errors = errors_of(values)
    assert [e for e in errors if "must be lower than" in e] == [
        "mlcluster:kubelet.imageGCLowThresholdPercent: (90) must be lower than imageGCHighThresholdPercent (80)"
    ]


def test_a_node_may_fix_what_the_cluster_breaks_only_for_itself() -> None:
    values = with_changes(
        {"kubelet.imageGCLowThresholdPercent": 90, "nodes.1.kubelet": {"imageGCHighThresholdPercent": 95}}
    )
    errors = errors_of(values)
    assert not any(e.startswith("mlcluster:nodes[1]") for e in errors)
    assert any(e.startswith("mlcluster:kubelet.imageGCLowThresholdPercent") for e in errors)


def test_merge_takes_node_values_and_merges_maps_key_by_key() -> None:
    spec = parse(
        with_changes(
            {
                "kubelet.evictionHard": {"imagefs.available": "10%", "nodefs.available": "10%"},
                "kubelet.imagePullProgressDeadline": "20m",
                "nodes.2.kubelet": {"imageGCLowThresholdPercent": 50, "evictionHard": {"imagefs.available": "15%"}},
            }
        )
    )
    merged = effective_kubelet(spec.kubelet, spec.nodes[2].kubelet)
    assert merged.image_gc_low_threshold_percent == 50 and merged.image_gc_high_threshold_percent == 80
    assert dict(merged.eviction_hard) == {"imagefs.available": "15%", "nodefs.available": "10%"}
    assert merged.image_pull_progress_deadline == "20m"
    assert effective_kubelet(spec.kubelet, spec.nodes[1].kubelet) is spec.kubelet


def test_every_tunable_can_be_overridden_per_node() -> None:
    import dataclasses

    from components.config.kubelet import KubeletOverrideSpec, KubeletSpec

    cluster_only = {"restart", "apply_as"}  # how many restart at once, and how tuning is written: one choice
    tunables = {f.name for f in dataclasses.fields(KubeletSpec)} - cluster_only
    assert {f.name for f in dataclasses.fields(KubeletOverrideSpec)} == tunables
