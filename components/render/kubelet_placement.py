"""Where each kubelet/containerd tuning setting lands, by Kubernetes minor and containerd line: the one table.

Day 1: kubeadm init's KubeletConfiguration carries the cluster values (kubeadm stores it in the kubelet-config
ConfigMap and writes /var/lib/kubelet/config.yaml on every node at init and join). Every node also runs the
tuning step, which writes that node's merged values where the node's kubelet reads them on top of config.yaml:

- Kubernetes >= 1.30: a KubeletConfiguration drop-in in /etc/kubernetes/kubelet.conf.d (`--config-dir`, beta
  in 1.30, GA in 1.35). Every config field can go there, flags are deprecated, and `kubeadm upgrade` rewriting
  config.yaml cannot undo it.
- Kubernetes < 1.30: the `KUBELET_EXTRA_ARGS` line of /etc/default/kubelet (DEB) or /etc/sysconfig/kubelet (RPM),
  for the settings that still have a flag. Config-only fields (maxParallelImagePulls, imageMaximumGCAge) only
  exist in kubeadm's KubeletConfiguration there: cluster-wide, at init; preview says so.

The pull deadline is containerd's: `image_pull_progress_timeout` from containerd 1.7.0 (config v2, CRI plugin
table) and 2.x (config v3, images plugin table). The kubelet's `--image-pull-progress-deadline` existed only
before 1.24 and only ever applied to dockershim, so it is never emitted (mlcluster runs containerd); containerd
1.6 has no such setting, which preview reports.

Flag existence (kubelet --help / the kubelet reference) and the config fields' first minor (`x-since` in the
kubelet-config-v1beta1 schema) are checked against upstream in tests/test_kubelet_placement.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from ..config.generated import generated_main
from ..config.kubelet import KubeletSpec, containerd_series, effective_kubelet, overridden_keys
from ..config.spec import Spec

Minor = tuple[int, int]
ContainerdLine = Literal["1.6", "1.7", "2"]
Mechanism = Literal["drop-in", "flag", "init-only", "unavailable"]

CONFIG_DIR = "/etc/kubernetes/kubelet.conf.d"
DROP_IN_FILE = f"{CONFIG_DIR}/50-mlcluster-tuning.conf"
CONFIG_DIR_FLAG = "--config-dir"
DROP_IN_SINCE: Minor = (1, 30)
"""--config-dir is beta (on by default) from 1.30 and GA from 1.35; in 1.28-1.29 it is alpha behind an env var."""
CONTAINERD_LINES: tuple[ContainerdLine, ...] = ("1.6", "1.7", "2")
DOCUMENTED_MINORS: tuple[Minor, ...] = ((1, 23), (1, 27), (1, 29), (1, 30), (1, 34), (1, 35), (1, 36))
CONTAINERD_CONFIG_VERSION: Mapping[ContainerdLine, int] = {"1.6": 2, "1.7": 2, "2": 3}
PULL_TIMEOUT_TABLE: Mapping[ContainerdLine, str | None] = {
    "1.6": None,
    "1.7": 'plugins."io.containerd.grpc.v1.cri"',
    "2": "plugins.'io.containerd.cri.v1.images'",
}


@dataclass(frozen=True)
class KubeletSetting:
    key: str
    """The mlcluster:kubelet key (also the KubeletConfiguration field it sets)."""
    fields: tuple[str, ...]
    """KubeletConfiguration fields it writes."""
    flag: str | None
    """The kubelet flag that still exists for it, if any."""
    config_since: Minor
    """First minor where the field works without a feature gate."""
    default: object = None
    """Upstream default: a setting at it is left out of flags (the kubelet already runs with it)."""


SETTINGS: tuple[KubeletSetting, ...] = (
    KubeletSetting("imageGCLowThresholdPercent", ("imageGCLowThresholdPercent",), "--image-gc-low-threshold", (1, 17)),
    KubeletSetting(
        "imageGCHighThresholdPercent", ("imageGCHighThresholdPercent",), "--image-gc-high-threshold", (1, 17)
    ),
    KubeletSetting("imageMinimumGCAge", ("imageMinimumGCAge",), "--minimum-image-ttl-duration", (1, 17)),
    # 1.29: alpha behind the ImageMaximumGCAge feature gate; beta and on by default from 1.30.
    KubeletSetting("imageMaximumGCAge", ("imageMaximumGCAge",), None, (1, 30)),
    KubeletSetting("maxParallelImagePulls", ("serializeImagePulls", "maxParallelImagePulls"), None, (1, 27)),
    KubeletSetting("evictionHard", ("evictionHard",), "--eviction-hard", (1, 17)),
    KubeletSetting("systemReserved", ("systemReserved",), "--system-reserved", (1, 17)),
    KubeletSetting("kubeReserved", ("kubeReserved",), "--kube-reserved", (1, 17)),
    KubeletSetting("cpuManagerPolicy", ("cpuManagerPolicy",), "--cpu-manager-policy", (1, 17), "none"),
    KubeletSetting("topologyManagerPolicy", ("topologyManagerPolicy",), "--topology-manager-policy", (1, 17), "none"),
)
MANAGED_FLAGS: tuple[str, ...] = (
    *(s.flag for s in SETTINGS if s.flag),
    "--serialize-image-pulls",
    "--image-pull-progress-deadline",
    CONFIG_DIR_FLAG,
)
"""Flags the tuning step owns in KUBELET_EXTRA_ARGS: removed and rewritten; every other flag there is kept."""


def parse_minor(version: str) -> Minor:
    major, minor, *_ = version.lstrip("v").split(".")
    return int(major), int(minor)


def show_minor(minor: Minor) -> str:
    return f"{minor[0]}.{minor[1]}"


def uses_drop_in(minor: Minor, apply_as: str = "drop-in") -> bool:
    """Whether a node's tuning goes to the kubelet's drop-in directory (else to KUBELET_EXTRA_ARGS flags)."""
    return apply_as == "drop-in" and minor >= DROP_IN_SINCE


def node_mechanism(setting: KubeletSetting, minor: Minor, apply_as: str = "drop-in") -> Mechanism:
    """How the tuning step sets `setting` on one node (day 2 and per-node values)."""
    if minor < setting.config_since:
        return "unavailable"
    if uses_drop_in(minor, apply_as):
        return "drop-in"
    return "flag" if setting.flag else "init-only"


def setting_value(tuning: KubeletSpec, key: str) -> object:
    return {
        "imageGCLowThresholdPercent": tuning.image_gc_low_threshold_percent,
        "imageGCHighThresholdPercent": tuning.image_gc_high_threshold_percent,
        "imageMinimumGCAge": tuning.image_minimum_gc_age,
        "imageMaximumGCAge": tuning.image_maximum_gc_age,
        "maxParallelImagePulls": tuning.max_parallel_image_pulls,
        "evictionHard": dict(tuning.eviction_hard) or None,
        "systemReserved": dict(tuning.system_reserved) or None,
        "kubeReserved": dict(tuning.kube_reserved) or None,
        "cpuManagerPolicy": tuning.cpu_manager_policy,
        "topologyManagerPolicy": tuning.topology_manager_policy,
    }[key]


def _fields(setting: KubeletSetting, value: object) -> dict[str, object]:
    if setting.key == "maxParallelImagePulls":
        return {"serializeImagePulls": False, "maxParallelImagePulls": value}
    return {setting.key: value}


def configuration_fields(tuning: KubeletSpec, minor: Minor) -> dict[str, object]:
    """KubeletConfiguration fields of a tuning that this Kubernetes minor understands (unset ones left out)."""
    fields: dict[str, object] = {}
    for setting in SETTINGS:
        value = setting_value(tuning, setting.key)
        if value is not None and minor >= setting.config_since:
            fields.update(_fields(setting, value))
    return fields


def _flag_value(value: object) -> str:
    if isinstance(value, Mapping):
        separator = "<" if any(k.endswith((".available", ".inodesFree")) for k in value) else "="
        return ",".join(f"{k}{separator}{v}" for k, v in sorted(value.items()))
    return str(value)


def kubelet_flags(tuning: KubeletSpec, cluster: KubeletSpec, minor: Minor) -> list[str]:
    """KUBELET_EXTRA_ARGS for a node: --config-dir where drop-ins work, else the flags that exist.

    A setting at its upstream default is left out unless the cluster's init config holds something else."""
    if uses_drop_in(minor, tuning.apply_as):
        return [f"{CONFIG_DIR_FLAG}={CONFIG_DIR}"]
    args: list[str] = []
    for setting in SETTINGS:
        if node_mechanism(setting, minor, tuning.apply_as) != "flag":
            continue
        value = setting_value(tuning, setting.key)
        at_default = value == setting.default and setting_value(cluster, setting.key) == setting.default
        if value is not None and not at_default:
            args += [setting.flag or "", _flag_value(value)]
    return args


def drop_in_configuration(tuning: KubeletSpec, minor: Minor) -> dict[str, object] | None:
    """The node's KubeletConfiguration drop-in, or None where the kubelet has no --config-dir."""
    if not uses_drop_in(minor, tuning.apply_as):
        return None
    return {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"} | configuration_fields(
        tuning, minor
    )


def _no_drop_in(minor: Minor) -> str:
    if minor < DROP_IN_SINCE:
        return f"no drop-in directory before {show_minor(DROP_IN_SINCE)}"
    return "kubelet.applyAs is flags"


def pull_deadline_table(line: ContainerdLine) -> str | None:
    return PULL_TIMEOUT_TABLE[line]


@dataclass(frozen=True)
class TuningWarning:
    path: str
    message: str


def tuning_warnings(
    tuning: KubeletSpec, minor: Minor, path: str, own_keys: frozenset[str] = frozenset(), node: str | None = None
) -> Iterator[TuningWarning]:
    """What a tuning asks for that this Kubernetes minor / containerd line cannot honour (said at preview)."""
    where = f" (node {node})" if node else ""
    for setting in SETTINGS:
        if setting_value(tuning, setting.key) is None or (node is not None and setting.key not in own_keys):
            continue
        mechanism = node_mechanism(setting, minor, tuning.apply_as)
        version = show_minor(minor)
        if mechanism == "unavailable":
            yield TuningWarning(
                f"{path}.{setting.key}",
                f"is not set{where}: Kubernetes {version} has no {setting.key}"
                f" (needs >= {show_minor(setting.config_since)})",
            )
        elif mechanism == "init-only":
            what = "this node's value cannot be honoured" if node else "a change after init is not applied"
            yield TuningWarning(
                f"{path}.{setting.key}",
                f"lands only in kubeadm's KubeletConfiguration at init on Kubernetes {version} (no kubelet flag,"
                f" {_no_drop_in(minor)}): {what}{where}",
            )
    if node is not None and "imagePullProgressDeadline" not in own_keys and "containerdVersion" not in own_keys:
        return
    series = containerd_series(tuning.containerd_version)
    if series == "1.6":
        yield TuningWarning(
            f"{path}.imagePullProgressDeadline",
            f"({tuning.image_pull_progress_deadline}) cannot be honoured{where}: containerd 1.6 has no"
            " image_pull_progress_timeout (added in 1.7.0); upgrade containerd to enforce a pull deadline",
        )


def spec_warnings(spec: Spec) -> list[TuningWarning]:
    """Every tuning the target versions cannot honour, cluster section first, then per node."""
    if spec.cluster.mode != "kubeadm":
        return []
    minor = parse_minor(spec.kubernetes_version)
    found = list(tuning_warnings(spec.kubelet, minor, "kubelet"))
    for index, node in enumerate(spec.nodes):
        if node.kubelet is not None:
            merged = effective_kubelet(spec.kubelet, node.kubelet)
            own = frozenset(overridden_keys(node.kubelet))
            found += tuning_warnings(merged, minor, f"nodes[{index}].kubelet", own, node.name)
    return found


# --- the generated table (docs/kubelet-tuning.md) ------------------------------------------------------------

TABLE_START = "<!-- kubelet-placement:start (generated by python -m components.render.kubelet_placement) -->"
TABLE_END = "<!-- kubelet-placement:end -->"
_CELL = {
    "drop-in": "init + drop-in",
    "flag": "init + flag",
    "init-only": "init only ⚠",
    "unavailable": "— ⚠",
}


def _deadline_cell(minor: Minor, line: ContainerdLine) -> str:
    table = pull_deadline_table(line)
    if table is None:
        return "not honoured ⚠"
    return f"config v{CONTAINERD_CONFIG_VERSION[line]} `[{table}]`"


def placement_markdown() -> str:
    keys = [s.key for s in SETTINGS]
    header = [
        "Kubernetes",
        "containerd",
        "KUBELET_EXTRA_ARGS",
        *(f"`{k}`" for k in keys),
        "`imagePullProgressDeadline`",
    ]
    lines = [
        "| " + " | ".join(header) + " |",
        "|---|---|---|" + "---|" * (len(keys) + 1),
    ]
    for minor in DOCUMENTED_MINORS:
        for line in CONTAINERD_LINES:
            cells = [_CELL[node_mechanism(s, minor)] for s in SETTINGS]
            extra = f"`{CONFIG_DIR_FLAG}={CONFIG_DIR}`" if minor >= DROP_IN_SINCE else "flags"
            label = "2.x" if line == "2" else line
            row = [show_minor(minor), label, extra, *cells, _deadline_cell(minor, line)]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return generated_main(
        argv,
        "Where each kubelet tuning setting lands, as a markdown table.",
        TABLE_START,
        TABLE_END,
        placement_markdown,
    )


if __name__ == "__main__":
    sys.exit(main())
