"""A Kubernetes minor upgrade as ordered node steps, and the version-skew model every step is checked against.

Changing `kubernetesVersion` is the upgrade. The steps exist from day 1 and print `ok:` while every node is at
the version (their text names the version, so a change makes them run again, in this order):

0. Before it, every node's preparation (`kube-packages`) checked that node's repository offers the target's
   packages: the upgrade waits for every node's membership, and so for every preparation.
1. `upgrade-preflight` on the first control plane: one minor at a time, no downgrade; `kubeadm upgrade plan`.
2. `etcd-snapshot` (pre-upgrade) on the first control plane.
3. `upgrade-control-plane` on each control plane, one at a time, the first one first: kubeadm package, then
   `kubeadm upgrade apply` on the first and `kubeadm upgrade node` on the others (the static pods move).
4. Only then the kubelets, batch after batch (`restart_batches`: control planes
   `kubelet.restart.maxUnavailableControlPlanes` at a time, then workers `maxUnavailableWorkers` at a time):
   `upgrade-drain` of the batch, each node's `kubelet` command, `upgrade-uncordon` of the batch. Control-plane
   batches are drained from their own first node, worker batches from the first control plane.

Each node's `kubelet` command is also where its day-2 tuning restarts happen: one command (one resource) holds
the kubelet upgrade (on workers `kubeadm upgrade node` first) and then the restarts its tuning marked. A tuning
change alone re-runs only the `kubelet` commands, batch after batch (drain and uncordon are unchanged and do not
run); a version change runs the whole chain.

A kubelet moving while any kube-apiserver is still on the old minor would be newer than that API server,
outside the version-skew policy (kubeadm's own guide upgrades each control plane's kubelet right after it;
with more than one control plane that breaks the policy until the last one is done).

Each step checks before it acts (a node already at the target prints `ok:`), so a stack that stopped half-way
resumes where it stopped on the next `up`. Packages stay held (DEB) / excluded (RPM) between upgrades.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..config.care import EtcdSnapshotSpec
from ..config.checks import duration_seconds, version_tuple
from ..config.gpu import KUEUE_ADMITTED_SELECTOR
from ..config.nodes import NodeSpec
from ..config.spec import Spec
from .kueue import QUEUE_NAME_LABEL
from .seed import deb_digests
from .shell import NodeStep, merge_steps, rendered_step
from .tuning_steps import restart_batches, restart_step

UPGRADE_LOG_DIR = "/var/log/mlcluster"
CORDON_MARKERS = "/var/lib/mlcluster/upgrade-cordoned"
"""On the draining control plane: the nodes the upgrade cordoned (only those are uncordoned after it)."""
KUEUE_POD_LABELS = (KUEUE_ADMITTED_SELECTOR, QUEUE_NAME_LABEL)
"""Pods of Kueue-admitted jobs carry the first (Kueue sets it on admission); pods whose own template names a
queue carry the second."""
POLL_SECONDS = 5
PROGRESS_SECONDS = 60
"""How often a long wait (running GPU jobs before a drain, up to upgrade.gpuJobsTimeout) prints a `waiting:` line."""
KUBEADM_UPGRADE_TIMEOUT_SECONDS = 2700
"""The outer bound of `kubeadm upgrade plan/apply/node`: past kubeadm's own deadlines (5 min for each of the four
static pods it moves, after which it restores that pod's old manifest), so that kubeadm, not a signal, ends a slow
upgrade and rolls back."""
KUBELET_STEP = "kubelet"
"""Each node's kubelet command: the upgrade's kubelet part, then the restarts its tuning marked."""
BATCH_STEPS = ("upgrade-drain", "upgrade-uncordon")
"""Steps of a restart batch, run on one node for all of the batch's nodes."""


@dataclass(frozen=True)
class UpgradeStep:
    """One resource of the upgrade: the step, the node it runs on, and the nodes it upgrades or drains."""

    node: NodeSpec
    step: NodeStep
    targets: tuple[str, ...]

    @property
    def resource_name(self) -> str:
        # A drain/uncordon step names the nodes it touches, its batch's first and last (a batch is a run of the
        # stack's nodes, in order): `cp-1-upgrade-drain-gpu-1..gpu-4`. Names carry no position.
        if self.step.name not in BATCH_STEPS:
            return f"{self.node.name}-{self.step.name}"
        span = self.targets[0] if len(self.targets) == 1 else f"{self.targets[0]}..{self.targets[-1]}"
        return f"{self.node.name}-{self.step.name}-{span}"

    @property
    def previous_name(self) -> str | None:
        """The name a batch of several nodes had before it named its last node too (after its first only): the
        alias that lets a stack deployed before keep the resource (nothing is replaced for the rename)."""
        if self.step.name not in BATCH_STEPS or len(self.targets) == 1:
            return None
        return f"{self.node.name}-{self.step.name}-{self.targets[0]}"


def _version(kubernetes_version: str) -> str:
    return kubernetes_version.lstrip("v")


def snapshot_settings(etcd_snapshots: EtcdSnapshotSpec, reason: str) -> dict[str, str]:
    snapshots = etcd_snapshots
    return {
        "SNAPSHOT_DIR": snapshots.directory,
        "SNAPSHOT_COPY_TO": snapshots.copy_to or "",
        "SNAPSHOT_RETAIN": str(snapshots.retain),
        "SNAPSHOT_REASON": reason,
    }


def _drain_settings(spec: Spec) -> dict[str, str]:
    upgrade = spec.upgrade
    return {
        "DRAIN_TIMEOUT": upgrade.drain_timeout,
        "GPU_JOBS": upgrade.gpu_jobs,
        "GPU_JOBS_TIMEOUT_SECONDS": str(math.ceil(duration_seconds(upgrade.gpu_jobs_timeout))),
        "KUEUE_POD_LABELS": " ".join(KUEUE_POD_LABELS),
        "CORDON_MARKERS": CORDON_MARKERS,
        "POLL_SECONDS": str(POLL_SECONDS),
        "PROGRESS_SECONDS": str(PROGRESS_SECONDS),
    }


def upgrade_steps(spec: Spec) -> list[list[UpgradeStep]]:
    """The upgrade as stages: the steps of one stage run at once, each stage after the one before it."""
    version = _version(spec.kubernetes_version)
    first = spec.control_planes[0]
    common = {"TARGET_VERSION": version, "UPGRADE_LOG_DIR": UPGRADE_LOG_DIR}
    stages: list[list[UpgradeStep]] = [
        [
            UpgradeStep(
                first, rendered_step("upgrade-preflight", f"Check the upgrade to Kubernetes {version}", common), ()
            )
        ],
        [
            UpgradeStep(
                first,
                rendered_step(
                    "etcd-snapshot",
                    f"Snapshot etcd before upgrading to {version}",
                    {"TARGET_VERSION": version, **snapshot_settings(spec.etcd_snapshots, "pre-upgrade")},
                ),
                (),
            )
        ],
    ]
    # Every control plane's static pods first, one node at a time (etcd membership stays quorate), the first
    # one applying: only then may any kubelet move, or it would be newer than a kube-apiserver still behind.
    for node in spec.control_planes:
        stages.append([_control_plane_step(spec.kubernetes_version, node, first, deb_digests(spec.air_gap))])
    # Then the kubelets in their restart batches, each batch drained first: control planes drain from their own
    # batch (every control plane holds the admin kubeconfig), workers from the first control plane.
    for batch in restart_batches(spec.kubelet, spec.control_planes, spec.workers):
        stages += _drained(spec, batch[0] if batch[0].is_control_plane else first, batch)
    return stages


def _drained(spec: Spec, runs_on: NodeSpec, nodes: list[NodeSpec]) -> list[list[UpgradeStep]]:
    """The batch drained, its kubelets upgraded, the batch uncordoned; on a one-node cluster the kubelet moves in
    place: a drain there has nowhere to move the pods to, and would wait on every PodDisruptionBudget forever."""
    if len(spec.nodes) == 1:
        return [[_kubelet_step(spec, node) for node in nodes]]
    names = tuple(n.name for n in nodes)
    version = _version(spec.kubernetes_version)
    settings = {"TARGET_VERSION": version, **_drain_settings(spec), "NODES": " ".join(names)}
    listed = ", ".join(names)
    return [
        [
            UpgradeStep(
                runs_on, rendered_step("upgrade-drain", f"Cordon and drain {listed} for {version}", settings), names
            )
        ],
        [_kubelet_step(spec, node) for node in nodes],
        [UpgradeStep(runs_on, rendered_step("upgrade-uncordon", f"Uncordon {listed} at {version}", settings), names)],
    ]


def _bundle(digests: str) -> dict[str, str]:
    """An air-gapped site's upgrade checks each Debian package against the lockfile before it installs it."""
    return {"BUNDLE_DEB_DIGESTS": digests} if digests else {}


def _control_plane_step(kubernetes_version: str, node: NodeSpec, first: NodeSpec, digests: str = "") -> UpgradeStep:
    version = _version(kubernetes_version)
    is_first = node.name == first.name
    settings = {
        "TARGET_VERSION": version,
        "UPGRADE_LOG_DIR": UPGRADE_LOG_DIR,
        "NODE_NAME": node.name,
        "FIRST_CONTROL_PLANE": str(is_first).lower(),
        "KUBEADM_UPGRADE_TIMEOUT_SECONDS": str(KUBEADM_UPGRADE_TIMEOUT_SECONDS),
        **_bundle(digests),
    }
    title = f"kubeadm upgrade {'apply' if is_first else 'node'}: control plane to {version}"
    return UpgradeStep(node, rendered_step("upgrade-control-plane", title, settings), (node.name,))


def _kubelet_step(spec: Spec, node: NodeSpec) -> UpgradeStep:
    return UpgradeStep(node, kubelet_step(spec, node), (node.name,))


def kubelet_step(spec: Spec, node: NodeSpec) -> NodeStep:
    """The node's `kubelet` command: its kubelet upgrade first (a no-op at the version), then the restarts its
    tuning marked (a no-op with nothing marked). Upgrade first: flags written for a new minor then start a
    kubelet of that minor, never the old one. One resource for both: both restart the kubelet of a drained (or,
    for tuning, a running) node in the same batches."""
    parts = [upgrade_kubelet_step(spec.kubernetes_version, node, deb_digests(spec.air_gap)), restart_step(spec, node)]
    title = f"kubelet of {node.name}: {' > '.join(part.name for part in parts)}"
    return merge_steps(KUBELET_STEP, title, parts)


def upgrade_kubelet_step(kubernetes_version: str, node: NodeSpec, digests: str = "") -> NodeStep:
    version = _version(kubernetes_version)
    settings = {
        "TARGET_VERSION": version,
        "UPGRADE_LOG_DIR": UPGRADE_LOG_DIR,
        "NODE_NAME": node.name,
        "CONTROL_PLANE": str(node.is_control_plane).lower(),
        **_bundle(digests),
    }
    title = f"kubelet and kubectl to {version}" + ("" if node.is_control_plane else " (after kubeadm upgrade node)")
    return rendered_step("upgrade-kubelet", title, settings)


# The version-skew model (https://kubernetes.io/releases/version-skew-policy/), used to prove the order above.

Versions = dict[tuple[str, str], tuple[int, int]]
"""(node, component) -> (major, minor) of what runs there: kube-apiserver, kube-controller-manager,
kube-scheduler on control planes, kubelet on every node."""

CONTROL_PLANE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


VERSION_OUTPUT = "kubernetesVersion"
"""The stack output with the version the last successful `up` brought every node to (exported once every upgrade
step succeeded): what a preview checks a new kubernetesVersion against."""


def version_change_problem(recorded: object, wanted: str) -> str | None:
    """Why the cluster cannot go from `recorded` (the last successful `up`'s version; anything but a version before
    the first one) to `wanted`, by upgrade-preflight.sh's rules (one minor at a time, never down), or None. The
    same refusal as that step's, at plan time: a preview refuses before any node is touched."""
    if not isinstance(recorded, str) or not re.fullmatch(r"\d+\.\d+\.\d+", recorded):
        return None
    if not re.fullmatch(r"\d+\.\d+\.\d+", wanted) or wanted == recorded:
        return None
    old = tuple(int(part) for part in recorded.split("."))
    new = tuple(int(part) for part in wanted.split("."))
    key = "mlcluster:kubernetesVersion"
    if new[0] != old[0]:
        return f"{key}: {wanted} changes the major version of the cluster ({recorded}, the last successful up)"
    if new < old:
        return (
            f"{key}: {wanted} is older than the cluster's {recorded} (the last successful up): downgrades are not"
            " supported (restore an etcd snapshot instead, docs/cluster-care.md)"
        )
    if new[1] > old[1] + 1:
        return (
            f"{key}: {wanted} skips a minor: the cluster runs {recorded} (the last successful up); upgrade to"
            f" {old[0]}.{old[1] + 1}.x first (one minor at a time)"
        )
    return None


def skew_problems(versions: Versions) -> list[str]:
    """What breaks the version-skew policy in `versions` (empty: nothing)."""
    apiservers = {node: v for (node, component), v in versions.items() if component == "kube-apiserver"}
    if not apiservers:
        return ["no kube-apiserver"]
    oldest, newest = min(apiservers.values()), max(apiservers.values())
    problems = []
    if newest[1] - oldest[1] > 1 or newest[0] != oldest[0]:
        problems.append(f"kube-apiservers more than one minor apart ({_fmt(oldest)} and {_fmt(newest)})")
    for (node, component), version in sorted(versions.items()):
        if component == "kubelet":
            if version > oldest:
                problems.append(f"kubelet on {node} ({_fmt(version)}) is newer than kube-apiserver {_fmt(oldest)}")
            if newest[1] - version[1] > 3:
                problems.append(f"kubelet on {node} ({_fmt(version)}) is more than 3 minors older than {_fmt(newest)}")
        elif component in ("kube-controller-manager", "kube-scheduler"):
            # kubeadm points them at their own node's kube-apiserver.
            local = apiservers[node]
            if version > local or local[1] - version[1] > 1:
                problems.append(f"{component} on {node} ({_fmt(version)}) vs its kube-apiserver {_fmt(local)}")
    return problems


def _fmt(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


EFFECTS = {
    "upgrade-preflight": (),
    "etcd-snapshot": (),
    "upgrade-drain": (),
    "upgrade-uncordon": (),
    "upgrade-control-plane": CONTROL_PLANE_COMPONENTS,
    KUBELET_STEP: ("kubelet",),
}
"""What each step upgrades on its target nodes, in the order its script does it."""


def simulate(spec: Spec, from_version: str) -> Iterable[tuple[str, Versions]]:
    """The versions running after each component an upgrade from `from_version` moves, in the order above."""
    major, minor, _ = version_tuple(from_version)
    target = version_tuple(spec.kubernetes_version)[:2]
    versions: Versions = {}
    for node in spec.nodes:
        if node.is_control_plane:
            versions |= {(node.name, c): (major, minor) for c in CONTROL_PLANE_COMPONENTS}
        versions[(node.name, "kubelet")] = (major, minor)
    yield "before", dict(versions)
    for stage in upgrade_steps(spec):
        for upgrade in stage:
            for target_node in upgrade.targets:
                for component in EFFECTS[upgrade.step.name]:
                    if (target_node, component) in versions:
                        versions[(target_node, component)] = target
                        yield f"{upgrade.resource_name}: {component} on {target_node}", dict(versions)
