"""`nodes`: the servers, each with its SSH address, roles, labels, taints, GPUs, topology and image disk.

A node's own checks read only the node; what ties the nodes to each other or to other sections (one first control
plane, distinct names, the VIP's subnet, etcd's quorum) is in rules.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ..acceptance.verdict import QUARANTINE_TAINT
from . import checks, formats
from .gpu import DERIVED_GPU_LABELS
from .kubelet import ImageDiskSpec, KubeletOverrideSpec
from .schema import LabelText, Problems, join_path, setting
from .ssh import pinned_host_key

Role = Literal["control-plane", "worker"]

GPU_MODEL_LABEL = "mlcluster.io/gpu-model"
GPU_COUNT_LABEL = "mlcluster.io/gpu-count"
"""GPUs in the node, so GPU inventory (Kueue quotas, the policy pack) can be read off the node labels."""
DERIVED_NODE_LABELS = {GPU_MODEL_LABEL: "nodes[].gpu.model", GPU_COUNT_LABEL: "nodes[].gpu.count", **DERIVED_GPU_LABELS}
"""Every label mlcluster sets on a node from other settings: no other setting may name one of them."""
HOSTNAME_LABEL = "kubernetes.io/hostname"
CONTROL_PLANE_TAINT_KEY = "node-role.kubernetes.io/control-plane"
LIFECYCLE_TAINTS = (
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable",
    "node.kubernetes.io/out-of-service",
    "node.cloudprovider.kubernetes.io/uninitialized",
    "node.cloudprovider.kubernetes.io/shutdown",
)
"""Taints the node lifecycle controller, the kubelet or an operator's `kubectl cordon` set and lift from the node's
state (k8s.io/api core/v1 well_known_taints.go, v1.35): declared here, every `up` would set again what the cluster
lifted."""


@dataclass(frozen=True)
class GpuSpec:
    count: int = setting(doc="GPUs in the node.", check=checks.between(1, 16))
    model: str = setting(
        doc="GPU model name as Kueue flavors use it, e.g. H100-SXM-80GB.",
        check=checks.gpu_model,
    )
    mig_config: str | None = setting(
        None,
        doc="MIG profile for this node (nvidia.com/mig.config label), e.g. all-1g.10gb.",
        check=lambda v: None if not checks.labels({"nvidia.com/mig.config": v}) else "is not a valid label value",
    )
    time_slicing_replicas: int | None = setting(
        None, doc="Per-node time-slicing replicas (overrides the cluster default).", check=checks.between(2, 64)
    )
    driver: Literal["operator", "preinstalled"] | None = setting(
        None, doc="Who provides this node's NVIDIA driver (default: gpuOperator.driver)."
    )


@dataclass(frozen=True)
class NodeSpec:
    name: str = setting(doc="Node name (becomes the Kubernetes node name).", check=checks.k8s_name)
    host: str = setting(doc="IP address or DNS name reached over SSH.", check=checks.host)
    roles: tuple[Role, ...] = setting(doc="`control-plane` and/or `worker`.")
    host_key: str | None = setting(
        None,
        doc="Pinned SSH host key (`ssh-keyscan -t ed25519 HOST`; a pasted `HOST ssh-ed25519 AAAA…` line is fine);"
        " required unless `ssh.insecureIgnoreHostKeys`.",
        check=formats.ssh_host_key,
    )
    user: str | None = setting(None, doc="SSH user for this node (default ssh.user).", check=formats.user_name)
    port: int | None = setting(None, doc="SSH port for this node (default ssh.port).", check=checks.between(1, 65535))
    labels: Mapping[str, LabelText] = setting(
        default_factory=dict,
        doc="Node labels: registered at join, kept as declared on day 2 (a removed one goes; one set by others stays).",
        check=checks.labels,
    )
    taints: tuple[str, ...] = setting(
        (),
        doc="Node taints, key=value:Effect: registered at join, kept as declared on day 2 like the labels.",
        check=checks.each(checks.taint),
    )
    gpu: GpuSpec | None = setting(None, doc="GPUs in this node; GPU nodes get the GPU label and taint.")
    topology: Mapping[str, LabelText] = setting(
        default_factory=dict,
        doc="Where the node sits, one domain per kueue.topology level, e.g. {block: b1, rack: r07} (from the"
        " operator's inventory); set as node labels at join. Required on GPU nodes when kueue.topology is set.",
    )
    image_disk: ImageDiskSpec | None = setting(None, doc="Dedicated disk for container images.")
    kubelet: KubeletOverrideSpec | None = setting(
        None, doc="This node's kubelet tuning: any `mlcluster:kubelet` key, merged over the cluster's."
    )
    gone: bool = setting(
        False,
        doc="The host is gone for good: set it, `pulumi up`, then remove the node. Its removal then opens no SSH"
        " session to it (no kubeadm reset) and deletes its Node without a drain; a control plane's etcd member"
        " is removed first, through the first control plane's etcd.",
    )

    @property
    def is_control_plane(self) -> bool:
        return "control-plane" in self.roles

    @property
    def pinned_host_key(self) -> str | None:
        return pinned_host_key(self.host_key)

    def _validate_taints(self, path: str, problems: Problems) -> None:
        seen: dict[tuple[str, str], int] = {}
        for i, taint in enumerate(self.taints):
            if checks.taint(taint):
                continue  # the setting's own check said why
            at, parsed = join_path(join_path(path, "taints"), i), checks.parse_taint(taint)
            key, effect = parsed["key"], parsed["effect"]
            if key == QUARANTINE_TAINT.key:
                problems.error(
                    at,
                    f"uses {QUARANTINE_TAINT.key}, the acceptance quarantine's taint, which mlcluster sets and lifts"
                    " from the acceptance verdicts: use another key",
                )
            elif key in LIFECYCLE_TAINTS:
                problems.error(
                    at,
                    f"uses {key}, a taint the cluster sets and lifts from the node's state (the node lifecycle"
                    " controller, kubectl cordon): declared here, every up would set it again",
                )
            elif key == CONTROL_PLANE_TAINT_KEY and "value" in parsed:
                problems.error(
                    at,
                    f"gives {CONTROL_PLANE_TAINT_KEY} a value: kubeadm registers it without one on control planes,"
                    " and with a value it would be a second taint of the same key and effect",
                )
            if (key, effect) in seen:
                # The API server refuses a Node with two taints of one key and effect (k8s.io/kubernetes
                # pkg/apis/core/validation validateNodeTaints: "taints must be unique by key and effect pair").
                problems.error(
                    at, f"has key {key} and effect {effect} like taints[{seen[key, effect]}]: a node takes one"
                )
            seen.setdefault((key, effect), i)

    def validate(self, path: str, problems: Problems) -> None:
        scanned = self.host_key.split()[0] if self.host_key else ""
        if self.host_key and scanned not in formats.SSH_KEY_TYPES:
            # A pasted ssh-keyscan line starts with the host it scanned ([host]:port for another port).
            names = {formats.dns_key(n.strip("[]").rsplit("]:", 1)[0]) for n in scanned.split(",")}
            if formats.dns_key(self.host) not in names:
                problems.error(
                    join_path(path, "hostKey"),
                    f"was scanned from {scanned!r}, not from this node's host {self.host!r}: scan the right host",
                )
        if not self.roles:
            problems.error(join_path(path, "roles"), "must name at least one role (control-plane, worker)")
        if len(set(self.roles)) != len(self.roles):
            problems.error(join_path(path, "roles"), "lists a role twice")
        for key in self.labels:
            if not checks.kubelet_may_set_label(key):
                problems.error(join_path(path, "labels"), checks.kubelet_label_problem(key))
            if key.startswith("nvidia.com/") and self.gpu is None:
                problems.error(join_path(path, "labels"), f"sets GPU label {key!r} on a node with no gpu section")
            elif key in DERIVED_NODE_LABELS:
                problems.error(
                    join_path(path, "labels"),
                    f"sets {key!r}, which mlcluster sets from {DERIVED_NODE_LABELS[key]}: set that instead",
                )
        if self.labels.get(HOSTNAME_LABEL, self.name) != self.name:
            problems.error(
                join_path(join_path(path, "labels"), HOSTNAME_LABEL),
                f"{self.labels[HOSTNAME_LABEL]!r} is not this node's name {self.name!r}: the kubelet registers its own"
                " name here, and selectors on it (Kueue's hostname level) would find another node",
            )
        self._validate_taints(path, problems)
        for level, domain in self.topology.items():
            # Each domain becomes a label value; the levels themselves are checked against kueue.topology.
            message = checks.labels({level: domain}) if domain else "is empty: name the node's domain, e.g. r07"
            if message:
                problems.error(join_path(join_path(path, "topology"), level), message)
