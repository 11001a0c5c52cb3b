"""The support calendar: when each Kubernetes minor ends, which minors each pinned component documents, and what a
node needs to run a minor. Data with its sources, dated; the rules below read it and nothing else does.

- A component whose documentation *requires* a range (a support matrix, a Chart.yaml `kubeVersion` Helm enforces,
  a "requires Kubernetes >= X") is refused outside it, by its version's key, naming the range and what fits.
- A component that only lists the minors it is *tested* against (Calico: other versions "may work") is warned
  outside them.
- The Kubernetes minor itself is warned 60 days before its end of life and after it (the plan's `--at` clock):
  an end-of-life cluster still works, it only gets no more fixes.

Generated views: the README's version table (`python -m components.config.support --write README.md`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

from .generated import generated_main

Minor = tuple[int, int]

CALENDAR_AS_OF = date(2026, 12, 5)
"""When the calendar below was last read against its sources: a minor released after it is not known here."""
EOL_WARNING_DAYS = 60
"""A stack whose minor ends within this many days is told which minor to move to."""

_K8S_EOL = "kubernetes/website data/releases/eol.yaml @ 0637786b"
_SIG_RELEASE = "kubernetes/sig-release releases/release-{}/README.md"


@dataclass(frozen=True)
class KubernetesMinor:
    minor: Minor
    released: date
    end_of_life: date
    newest_patch: str
    """The newest patch release this calendar could establish from the upstream release pages."""
    newest_patch_date: date | None
    source: str


KUBERNETES_MINORS: tuple[KubernetesMinor, ...] = (
    KubernetesMinor(
        (1, 29), date(2023, 12, 13), date(2025, 2, 28), "1.29.14", None, f"{_K8S_EOL}; {_SIG_RELEASE.format('1.29')}"
    ),
    KubernetesMinor(
        (1, 30), date(2024, 4, 17), date(2025, 7, 15), "1.30.14", None, f"{_K8S_EOL}; {_SIG_RELEASE.format('1.30')}"
    ),
    KubernetesMinor(
        (1, 31), date(2024, 8, 13), date(2025, 11, 11), "1.31.14", None, f"{_K8S_EOL}; {_SIG_RELEASE.format('1.31')}"
    ),
    KubernetesMinor(
        (1, 32),
        date(2024, 12, 11),
        date(2026, 2, 28),
        "1.32.13",
        None,
        f"kubernetes.io/releases; {_SIG_RELEASE.format('1.32')}",
    ),
    KubernetesMinor(
        (1, 33),
        date(2025, 4, 23),
        date(2026, 6, 28),
        "1.33.13",
        date(2026, 6, 12),
        f"kubernetes.io/releases/1.33; {_SIG_RELEASE.format('1.33')}",
    ),
    KubernetesMinor(
        (1, 34),
        date(2025, 8, 27),
        date(2026, 10, 27),
        "1.34.11",
        date(2026, 8, 19),
        f"kubernetes.io/releases/1.34; {_SIG_RELEASE.format('1.34')}",
    ),
    KubernetesMinor(
        (1, 35),
        date(2025, 12, 17),
        date(2027, 2, 28),
        "1.35.8",
        date(2026, 8, 19),
        f"kubernetes.io/releases/1.35; {_SIG_RELEASE.format('1.35')}",
    ),
    KubernetesMinor(
        (1, 36),
        date(2026, 4, 22),
        date(2027, 6, 28),
        "1.36.4",
        date(2026, 8, 20),
        f"kubernetes.io/releases/1.36; {_SIG_RELEASE.format('1.36')}",
    ),
    KubernetesMinor(
        (1, 37),
        date(2026, 8, 26),
        date(2027, 10, 28),
        "1.37.0",
        date(2026, 8, 26),
        f"kubernetes.io/releases/1.37; {_SIG_RELEASE.format('1.37')}",
    ),
)
"""Release and end-of-life dates (the end of patch support) per minor. 1.29-1.31: the final patches, from eol.yaml;
1.32-1.37: the release pages' dates (the 2026 patch batches slipped: 1.34.11/1.35.8 shipped 2026-08-19, 1.36.4
2026-08-20; later patches were not established and may exist: the plan says which patch it knows)."""

Strength = Literal["requires", "tested"]


@dataclass(frozen=True)
class ComponentRange:
    """The Kubernetes minors one release line of a component documents."""

    component: str
    key: str
    """The stack key of its version (or of the setting that installs it)."""
    release: str
    """The release line this row covers: versions starting with it (v-prefix ignored), e.g. 26.7."""
    lowest: Minor
    highest: Minor | None
    """None: the component documents only a floor."""
    strength: Strength
    source: str
    tested: tuple[Minor, ...] = field(default=())
    """Minors the component's own CI runs on, where it names them beside a wider requirement (shown, not enforced)."""

    def covers(self, version: str) -> bool:
        plain = version.lstrip("v")
        return plain == self.release or plain.startswith(self.release + ".") or plain.startswith(self.release + "-")

    def admits(self, minor: Minor) -> bool:
        return self.lowest <= minor and (self.highest is None or minor <= self.highest)

    def cite(self) -> str:
        """The source in a few words (repository and file), for a one-line message; the README's table has it all."""
        first, *rest = self.source.split()
        repo, _, inline = first.partition(":")
        path = inline or (rest[0] if rest else "")
        return f"{repo} {path.rsplit('/', 1)[-1]}".strip()

    def span(self) -> str:
        if self.highest is None:
            return f">= {show(self.lowest)}"
        return show(self.lowest) if self.lowest == self.highest else f"{show(self.lowest)}-{show(self.highest)}"


COMPONENT_RANGES: tuple[ComponentRange, ...] = (
    ComponentRange(
        "kubeadm config v1beta4",
        "kubernetesVersion",
        "kubeadm.k8s.io/v1beta4",
        (1, 31),
        (1, 37),
        "requires",
        "kubernetes/kubernetes CHANGELOG-1.31.md (v1beta4 introduced), CHANGELOG-1.37.md (v1beta3 removed, v1beta4"
        " kept; v1 a placeholder)",
    ),
    ComponentRange(
        "Calico (tigera-operator)",
        "cluster.cni",
        "3.30",
        (1, 31),
        (1, 35),
        "tested",
        "tigera/docs calico_versioned_docs/version-3.30/_includes/partials/_system-requirements.mdx @ f2a27624"
        " (1.34 and 1.35 added by f81996f7, 2026-01-27)",
    ),
    ComponentRange(
        "Calico (tigera-operator)",
        "cluster.cni",
        "3.31",
        (1, 32),
        (1, 35),
        "tested",
        "tigera/docs calico_versioned_docs/version-3.31/_includes/partials/_system-requirements.mdx @ f2a27624",
    ),
    ComponentRange(
        "Calico (tigera-operator)",
        "cluster.cni",
        "3.32",
        (1, 34),
        (1, 36),
        "tested",
        "tigera/docs calico_versioned_docs/version-3.32/_includes/partials/_system-requirements.mdx @ f2a27624",
    ),
    ComponentRange(
        "NVIDIA GPU Operator",
        "gpuOperator.version",
        "26.7",
        (1, 33),
        (1, 36),
        "requires",
        "NVIDIA/cloud-native-docs gpu-operator/platform-support.rst @ 52dcb7b8 (version 26.7)",
    ),
    ComponentRange(
        "NVIDIA DRA driver for GPUs",
        "gpuOperator.draDriverVersion",
        "25.8",
        (1, 32),
        None,
        "requires",
        "NVIDIA/k8s-dra-driver-gpu deployments/helm/nvidia-dra-driver-gpu/Chart.yaml @ v25.8.0 (kubeVersion"
        " >=1.32.0-0, enforced by Helm)",
    ),
    ComponentRange(
        "NVIDIA Network Operator",
        "network.rdma.version",
        "26.4",
        (1, 31),
        (1, 35),
        "requires",
        "Mellanox/network-operator-docs docs/platform-support.rst @ 0c0ecad4 (26.4 docs: Kubernetes >=1.31 and <=1.35)",
    ),
    ComponentRange(
        "Kueue",
        "kueue.version",
        "0.19",
        (1, 29),
        None,
        "requires",
        'kubernetes-sigs/kueue README.md @ v0.19.2 ("Requires Kubernetes 1.29 or newer"; CI on 1.34-1.36)',
        tested=((1, 34), (1, 35), (1, 36)),
    ),
    ComponentRange(
        "KServe",
        "kserve.version",
        "0.20",
        (1, 32),
        None,
        "requires",
        'kserve/website versioned_docs/version-0.20/getting-started/quickstart-guide.md @ 05b83a6c ("1.32 or'
        ' higher is required"); CI on 1.34',
        tested=((1, 34),),
    ),
    ComponentRange(
        "cert-manager",
        "kserve.certManagerVersion",
        "1.21",
        (1, 33),
        (1, 36),
        "requires",
        "cert-manager/website content/docs/releases/README.md @ 776e5dba (1.21: supported and tested 1.33-1.36)",
    ),
    ComponentRange(
        "Envoy Gateway",
        "kserve.gateway.version",
        "1.9",
        (1, 33),
        (1, 36),
        "requires",
        "envoyproxy/gateway site/content/en/news/releases/matrix.md @ v1.9.0",
    ),
    ComponentRange(
        "KEDA",
        "kserve.kedaVersion",
        "2.20",
        (1, 33),
        (1, 35),
        "requires",
        "kedacore/keda-docs:content/docs/2.20/operate/cluster.md @ a55c5d34 (Kubernetes Compatibility: v1.33 - v1.35)",
    ),
    ComponentRange(
        "Kubeflow Trainer",
        "kubeflow.version",
        "2.3",
        (1, 31),
        None,
        "requires",
        'kubeflow/trainer:docs/operator-guides/installation.md @ v2.3.0 ("Kubernetes >= 1.31"); CI on 1.32-1.35'
        " (.github/workflows/test-e2e.yaml)",
        tested=((1, 32), (1, 33), (1, 34), (1, 35)),
    ),
    ComponentRange(
        "kube-prometheus-stack",
        "monitoring.version",
        "88.5",
        (1, 25),
        None,
        "requires",
        "prometheus-community/helm-charts charts/kube-prometheus-stack/Chart.yaml @ kube-prometheus-stack-88.5.3"
        " (kubeVersion >=1.25.0-0, enforced by Helm)",
    ),
    ComponentRange(
        "NVIDIA NVSentinel",
        "monitoring.faultHandling.version",
        "1.19",
        (1, 34),
        None,
        "requires",
        'NVIDIA/NVSentinel README.md @ 42672ae8, read from its fork lalitadithya/NVSentinel ("Kubernetes 1.34+";'
        ' NVSentinel:docs/platform-connectors.md: "requires Kubernetes 1.34")',
    ),
)
"""Per release line, the Kubernetes minors its documentation names (the component's own support matrix, release
notes or Chart.yaml). JobSet 0.12 ("one of the last 3 minors") and LWS ("1.26 or newer") come inside the Trainer
chart and name no range of their own; metrics-server, prometheus-adapter, the storage provisioners, Spegel and the
Knative operator document none that this calendar could read."""


@dataclass(frozen=True)
class NodeNeed:
    since: Minor
    need: str
    settings: tuple[tuple[str, str], ...]
    """What the os and containerd steps are told from this minor on (a later need replaces an earlier one's)."""
    source: str


_CONTAINERD_1_6 = "the kubelet speaks CRI v1 only, which containerd has from 1.6"
_CONTAINERD_2_0 = "the kubelet needs the RuntimeConfig CRI call, which containerd has from 2.0"
_CGROUP_V2 = "the kubelet refuses cgroup v1 hosts from 1.35 (failCgroupV1), and kubeadm's preflight with it"

NODE_NEEDS: tuple[NodeNeed, ...] = (
    NodeNeed(
        (1, 26),
        "containerd >= 1.6 (CRI v1)",
        (("CONTAINERD_MINIMUM", "1.6"), ("CONTAINERD_MINIMUM_REASON", _CONTAINERD_1_6)),
        "containerd/containerd RELEASES.md, Kubernetes support (1.26: containerd 1.6.4+, CRI v1 only)",
    ),
    NodeNeed(
        (1, 35),
        "cgroup v2",
        (("CGROUP_V2_REQUIRED", "yes"), ("CGROUP_V2_REASON", _CGROUP_V2)),
        "kubernetes/kubernetes CHANGELOG-1.35.md (failCgroupV1 true by default; kubeadm SystemVerification errors on"
        " cgroup v1 with a 1.35+ kubelet); kubernetes/enhancements keps/sig-node/5573-remove-cgroup-v1",
    ),
    NodeNeed(
        (1, 38),
        "containerd >= 2.0 (RuntimeConfig CRI call)",
        (("CONTAINERD_MINIMUM", "2.0"), ("CONTAINERD_MINIMUM_REASON", _CONTAINERD_2_0)),
        "kubernetes/enhancements keps/sig-node/4033 (cgroup driver from the CRI; the fallback's removal deferred to"
        " 1.38 by CHANGELOG-1.36.md and CHANGELOG-1.37.md: containerd 1.7 still runs 1.35-1.37)",
    ),
)
"""What a node must offer from a minor on: the os step refuses a host without it before any step changes the host,
and the containerd step checks the containerd it installed."""


def node_settings(minor: Minor) -> dict[str, str]:
    """The os and containerd steps' settings for a node that will run `minor`."""
    settings = {
        "K8S_MINOR": show(minor),
        "CGROUP_V2_REQUIRED": "no",
        "CGROUP_V2_REASON": "-",
        "CONTAINERD_MINIMUM": "1.6",
        "CONTAINERD_MINIMUM_REASON": _CONTAINERD_1_6,
    }
    for need in NODE_NEEDS:
        if minor >= need.since:
            settings.update(need.settings)
    return settings


def show(minor: Minor) -> str:
    return f"{minor[0]}.{minor[1]}"


def parse(version: str) -> Minor | None:
    parts = version.lstrip("v").split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def kubernetes_minor(minor: Minor) -> KubernetesMinor | None:
    return next((m for m in KUBERNETES_MINORS if m.minor == minor), None)


def rows_of(component: str) -> list[ComponentRange]:
    return [row for row in COMPONENT_RANGES if row.component == component]


def row_for(component: str, version: str) -> ComponentRange | None:
    return next((row for row in rows_of(component) if row.covers(version)), None)


@dataclass(frozen=True)
class Installed:
    """One component the stack installs: its calendar name, the key of its version and the version it pins."""

    component: str
    key: str
    version: str


def range_problem(installed: Installed, minor: Minor) -> tuple[Strength, str] | None:
    """Whether `installed`'s documented range excludes `minor`: ("requires", why) is a refusal, ("tested", why)
    a warning; None when it fits or the calendar has no row for that version (see unknown_version_note)."""
    row = row_for(installed.component, installed.version)
    if row is None or row.admits(minor):
        return None
    others = [r for r in rows_of(installed.component) if r is not row and r.admits(minor)]
    fitting = (
        f"; {installed.component} {', '.join(r.release for r in others)} {'is' if len(others) == 1 else 'are'}"
        f" documented for {show(minor)}"
        if others
        else f"; no {installed.component} release in mlcluster's calendar is documented for {show(minor)}"
    )
    pinned = "" if installed.key == "kubernetesVersion" else f"{installed.version}: "
    if row.strength == "requires":
        return "requires", (
            f"{pinned}{installed.component} {row.release} supports Kubernetes {row.span()} ({row.cite()}); the"
            f" stack asks for {show(minor)} (kubernetesVersion){fitting}. Choose kubernetesVersion {row.span()}"
        )
    return "tested", (
        f"{show(minor)} is not among the Kubernetes versions {installed.component} {row.release}, which mlcluster"
        f" installs, is tested against ({row.span()}; {row.cite()}): it may work, untested{fitting}"
    )


def unknown_version_note(installed: Installed) -> str | None:
    """A pinned version the calendar has no row for: said once, so that nobody reads silence as support."""
    if not rows_of(installed.component) or row_for(installed.component, installed.version) is not None:
        return None
    known = ", ".join(r.release for r in rows_of(installed.component))
    return (
        f"is {installed.version}: mlcluster's support calendar knows the Kubernetes range of {installed.component}"
        f" {known} only, so this version's range is not checked (see its release notes)"
    )


def newest_supported_minor(installed: Sequence[Installed]) -> Minor:
    """The newest minor of the calendar that every one of `installed` documents (requires and tested alike)."""
    fitting = [m.minor for m in KUBERNETES_MINORS if all(range_problem(i, m.minor) is None for i in installed)]
    if not fitting:
        raise LookupError("no Kubernetes minor of the calendar fits every pinned component")
    return max(fitting)


def blockers(installed: Sequence[Installed], minor: Minor) -> list[str]:
    """The pinned components whose documented range excludes `minor`, as `name release (span)`."""
    out = []
    for item in installed:
        row = row_for(item.component, item.version)
        if row is not None and not row.admits(minor):
            out.append(f"{item.component} {row.release} ({row.span()})")
    return out


def calendar_notes(
    kubernetes_version: str, installed: Sequence[Installed], today: date, *, managed: bool = False
) -> list[str]:
    """What the calendar says about the stack's minor on `today`: end of life near or past, a patch behind the
    newest known one, a minor the calendar does not know. Each note is about kubernetesVersion. `managed`: a cluster
    mlcluster does not run (mode existing), whose provider may support a minor for longer."""
    minor = parse(kubernetes_version)
    if minor is None:
        return []
    known = kubernetes_minor(minor)
    newest = KUBERNETES_MINORS[-1]
    if known is None:
        if minor > newest.minor:
            return [
                f"Kubernetes {show(minor)} is newer than mlcluster's support calendar (read {CALENDAR_AS_OF},"
                f" newest minor {show(newest.minor)}): its end of life and the pinned components' support for it"
                " are not checked"
            ]
        return [
            f"Kubernetes {show(minor)} reached end of life before {KUBERNETES_MINORS[0].end_of_life} (the oldest"
            " end of life in mlcluster's calendar): it gets no fixes, security fixes included;"
            f" {_way_up(minor, installed)}"
        ]
    notes = []
    provider = " (mode existing: the provider's own calendar may support it longer)" if managed else ""
    days = (known.end_of_life - today).days
    if days < 0:
        notes.append(
            f"Kubernetes {show(minor)} reached end of life on {known.end_of_life} ({_days(-days)} before"
            f" {today}; kubernetes.io/releases){provider}: it gets no fixes, security fixes included;"
            f" {_way_up(minor, installed)}"
        )
    elif days <= EOL_WARNING_DAYS:
        notes.append(
            f"Kubernetes {show(minor)} reaches end of life on {known.end_of_life} (in {_days(days)} from {today};"
            f" kubernetes.io/releases){provider}; {_way_up(minor, installed)}"
        )
    patch = kubernetes_version.lstrip("v")
    if _patch(patch) < _patch(known.newest_patch):
        shipped = f", shipped {known.newest_patch_date}" if known.newest_patch_date else ""
        notes.append(
            f"{patch} is behind {known.newest_patch}, the newest {show(minor)} patch mlcluster's calendar knows"
            f"{shipped}: patches carry the security fixes; a patch change is an upgrade like a minor's"
            " (docs/cluster-care.md)"
        )
    return notes


def _days(count: int) -> str:
    return f"{count} day" if count == 1 else f"{count} days"


def upgrade_progress(recorded: str, wanted: str, installed: Sequence[Installed]) -> str | None:
    """Where an `up` from the deployed `recorded` to `wanted` stands on the way to the newest minor every pinned
    component supports (one minor per up), or None when the minor does not change."""
    old, new = parse(recorded), parse(wanted)
    if old is None or new is None or new <= old:
        return None
    goal = newest_supported_minor(installed)
    if new >= goal:
        left = f"{show(goal)} is the newest minor every pinned component supports: the way up ends here"
    else:
        rest = [show((new[0], m)) for m in range(new[1] + 1, goal[1] + 1)]
        left = (
            f"then {len(rest)} more up(s), one minor each: {' -> '.join(rest)} ({show(goal)}: the newest minor every"
            " pinned component supports)"
        )
    return f"this up upgrades the cluster {recorded} -> {wanted}; {left} (docs/cluster-care.md)"


def _patch(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def _way_up(minor: Minor, installed: Sequence[Installed]) -> str:
    """Which minor to move to, one per `up`, and what stands in the way."""
    supported = newest_supported_minor(installed)
    if supported > minor:
        steps = [show((minor[0], m)) for m in range(minor[1] + 1, supported[1] + 1)]
        return (
            f"move to {steps[0]}, one minor per up ({' -> '.join([show(minor), *steps])}: {show(supported)} is the"
            " newest minor every pinned component supports; docs/cluster-care.md)"
        )
    following = (minor[0], minor[1] + 1)
    stopping = blockers(installed, following)
    held = f": the pinned {', '.join(stopping)} document no {show(following)} yet" if stopping else ""
    return (
        f"the next minor is {show(following)}{held}; upgrade mlcluster for newer pins, then move one minor per up"
        " (docs/cluster-care.md)"
    )


def version_table() -> str:
    """The README's version table: the calendar as Markdown."""
    lines = [
        f"Kubernetes minors (calendar read {CALENDAR_AS_OF}; the plan warns {EOL_WARNING_DAYS} days before an end of"
        " life and after it):",
        "",
        "| minor | released | end of life | newest patch known | source |",
        "|---|---|---|---|---|",
    ]
    for m in KUBERNETES_MINORS:
        shipped = f" ({m.newest_patch_date})" if m.newest_patch_date else ""
        lines.append(f"| {show(m.minor)} | {m.released} | {m.end_of_life} | {m.newest_patch}{shipped} | {m.source} |")
    lines += [
        "",
        "Pinned components (requires: refused outside the range; tested: warned outside it):",
        "",
        "| component | release | Kubernetes | kind | key | source |",
        "|---|---|---|---|---|---|",
    ]
    for row in COMPONENT_RANGES:
        tested = f" (CI: {', '.join(show(t) for t in row.tested)})" if row.tested else ""
        lines.append(
            f"| {row.component} | {row.release} | {row.span()}{tested} | {row.strength} | `{row.key}` | {row.source} |"
        )
    lines += ["", "What a node needs from a minor on (the os step refuses a node without it, before any change):", ""]
    lines += ["| from | needs | source |", "|---|---|---|"]
    lines += [f"| {show(n.since)} | {n.need} | {n.source} |" for n in NODE_NEEDS]
    return "\n".join(lines) + "\n"


START = "<!-- support-calendar:start (generated by python -m components.config.support; do not edit) -->"
END = "<!-- support-calendar:end -->"


def main(argv: list[str] | None = None) -> int:
    return generated_main(argv, __doc__.split("\n\n")[0], START, END, version_table)


if __name__ == "__main__":
    sys.exit(main())
