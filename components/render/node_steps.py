"""The ordered steps each node runs, as pure data: what the plan shows and what the components create.

Reading this file top to bottom is reading the bootstrap: prepare every node, init the first control
plane, then join the others (control planes one at a time, workers in parallel).
"""

from __future__ import annotations

from ..config.checks import version_tuple
from ..config.nodes import NodeSpec
from ..config.schema import Secret
from ..config.spec import Spec
from ..config.support import node_settings
from . import images, kubeadm
from .gpu_operator import looks_in_preparation, preflight_step
from .join_credentials import TOKEN_TTL
from .seed import package_sources, seed_node, site_mirrors
from .shell import NodeStep, merge_steps, render_node_script, render_script, rendered_step, script_source
from .tuning_steps import image_disk_step, node_tuning, tuning_step

KERNEL_MODULES = ("overlay", "br_netfilter")
SYSCTL = {
    "net.bridge.bridge-nf-call-iptables": "1",
    "net.bridge.bridge-nf-call-ip6tables": "1",
    "net.ipv4.ip_forward": "1",
}
K8S_REPO_BASE = "https://pkgs.k8s.io/core:/stable:"
DOCKER_REPO_RPM = """[docker-ce-stable]
name=Docker CE Stable - $basearch
baseurl=https://download.docker.com/linux/rhel/$releasever/$basearch/stable
enabled=1
gpgcheck=1
gpgkey=https://download.docker.com/linux/rhel/gpg"""
DOCKER_GPG_KEY = "https://download.docker.com/linux/rhel/gpg"
DRAIN_TIMEOUT = "10m"
NOT_READY_DRAIN_TIMEOUT = "1m"
"""Pods of a NotReady node never confirm they stopped: a drain waits only this long before the Node goes."""
PREPARE_STEP = "prepare"


def kubernetes_minor(kubernetes_version: str) -> str:
    major, minor, _ = version_tuple(kubernetes_version)
    return f"v{major}.{minor}"


def image_steps(spec: Spec, node: NodeSpec) -> list[NodeStep]:
    """Registry mirrors (unless Spegel writes them) and the image-disk capacity preflight."""
    steps = []
    # With Spegel on, Spegel writes each registry's hosts.toml and carries the mirrors (render/images.py); an
    # air-gapped site's seed mirrors are written here, beneath Spegel's once Spegel took over (SPEGEL_BACKUP_DIR).
    own = () if spec.images.spegel.enabled else spec.images.mirrors
    mirrors = (*own, *site_mirrors(spec.air_gap, spec.nodes))
    if mirrors:
        settings = {
            "MIRROR_REGISTRIES": " ".join(m.registry for m in mirrors),
            "CERTS_DIR": images.CERTS_DIR,
            "SPEGEL_BACKUP_DIR": images.SPEGEL_BACKUP_DIR if spec.images.spegel.enabled else "",
            "AUTHORIZATION_PLACEHOLDER": images.AUTHORIZATION_PLACEHOLDER,
        }
        for index, mirror in enumerate(mirrors):
            settings[f"HOSTS_TOML_{index}"] = images.hosts_toml(mirror)
            if mirror.ca:
                settings[f"CA_{index}"] = mirror.ca
        steps.append(
            rendered_step(
                "registry-mirrors",
                f"Configure {len(mirrors)} registry mirror(s)",
                settings,
                stdin=Secret(images.mirror_authorizations(mirrors)),
            )
        )
    needed = images.required_bytes(spec.images, node)
    if spec.images.capacity_check and needed:
        steps.append(
            rendered_step(
                "image-capacity",
                "Check the pre-pulled images fit the image disk",
                {
                    "CONTAINERD_ROOT": images.containerd_root(node),
                    "REQUIRED_BYTES": str(needed),
                    "HIGH_THRESHOLD_PERCENT": str(node_tuning(spec.kubelet, node).image_gc_high_threshold_percent),
                },
            )
        )
    return steps


def upstream_sources(repo: str) -> dict[str, str]:
    """The package repositories of a site with a route out: the Kubernetes project's per-minor repository (its key
    from there too), and Docker's for containerd on RHEL."""
    return {
        "K8S_REPO_KEY_URL": f"{repo}/deb/Release.key",
        "K8S_REPO_DEB": f"deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] {repo}/deb/ /",
        "K8S_REPO_RPM": "\n".join(
            [
                "[kubernetes]",
                "name=Kubernetes",
                f"baseurl={repo}/rpm/",
                "enabled=1",
                "gpgcheck=1",
                f"gpgkey={repo}/rpm/repodata/repomd.xml.key",
                "exclude=kubelet kubeadm kubectl cri-tools kubernetes-cni",
            ]
        ),
        "DOCKER_REPO_RPM": DOCKER_REPO_RPM,
    }


def prepare_steps(spec: Spec, node: NodeSpec) -> list[NodeStep]:
    """Steps that make a bare host ready for kubeadm, in order."""
    minor = kubernetes_minor(spec.kubernetes_version)
    repo = f"{K8S_REPO_BASE}/{minor}"
    version = spec.kubernetes_version.lstrip("v")
    image_disk = image_disk_step(node)
    needs = node_settings(version_tuple(spec.kubernetes_version)[:2])
    seed = seed_node(spec.air_gap, spec.nodes)
    sources = package_sources(spec.air_gap, seed) if seed is not None else upstream_sources(repo)
    return [
        *([preflight_step(node)] if looks_in_preparation(spec.gpu_operator, spec.cluster, node) else []),
        rendered_step(
            "os",
            "Check the operating system and what Kubernetes needs of it",
            {**needs, **({"AIR_GAP_FAMILIES": " ".join(spec.air_gap.os_families)} if seed is not None else {})},
        ),
        rendered_step("swap", "Turn swap off"),
        rendered_step("kernel-modules", "Load kernel modules", {"KERNEL_MODULES": " ".join(KERNEL_MODULES)}),
        rendered_step(
            "sysctl", "Apply kernel settings", {"SYSCTL_CONF": "\n".join(f"{k} = {v}" for k, v in SYSCTL.items())}
        ),
        *([image_disk] if image_disk else []),
        rendered_step(
            "containerd",
            "Install containerd",
            {
                "DOCKER_REPO_RPM": sources["DOCKER_REPO_RPM"],
                **{k: v for k, v in needs.items() if k.startswith(("K8S", "CONTAINERD"))},
            },
        ),
        rendered_step(
            "kube-packages",
            f"Install kubeadm, kubelet, kubectl {version}",
            {
                "K8S_VERSION": version,
                "NODE_NAME": node.name,
                "K8S_MINOR": minor,
                **{k: v for k, v in sources.items() if k != "DOCKER_REPO_RPM"},
            },
        ),
        *image_steps(spec, node),
        tuning_step(spec.kubelet, spec.kubernetes_version, spec.images, node),
    ]


def prepare_step(spec: Spec, node: NodeSpec) -> NodeStep:
    """The preparation steps as the one command a node runs them in (they always run together, in order)."""
    steps = prepare_steps(spec, node)
    return merge_steps(PREPARE_STEP, title=f"Prepare the node: {len(steps)} steps", steps=steps)


def init_step(spec: Spec, node: NodeSpec) -> NodeStep:
    return rendered_step(
        "kubeadm-init",
        "Initialise the first control plane (kubeadm init)",
        {
            "NODE_NAME": node.name,
            "KUBEADM_CONFIG": kubeadm.init_config(spec, node),
            "UPLOAD_CERTS": str(len(spec.control_planes) > 1).lower(),
        },
    )


def admin_kubeconfig_step(renewed_before: str = "") -> NodeStep:
    """The script file alone, without lib.sh: its inputs change only when it does (see the script), or when a
    certificate renewal (`renewed_before`, components/render/certificates.py) asks for the renewed admin.conf."""
    script = script_source("admin-kubeconfig.sh")
    if renewed_before:
        # A comment is enough: the text changes once per renewal, so the step reads admin.conf again.
        head, rest = script.split("set -euo pipefail\n", 1)
        note = f"# read again after the renewal of the certificates expiring before {renewed_before}\n"
        script = f"{head}set -euo pipefail\n{note}{rest}"
    return NodeStep(
        name="admin-kubeconfig",
        title="Read the admin kubeconfig",
        script=script,
        secret_stdout=True,
    )


def join_credentials_step(
    control_planes: tuple[NodeSpec, ...], nodes: tuple[NodeSpec, ...], minted_for: str
) -> NodeStep:
    """The token and CA hash every joining node reads (a certificate key too while a control plane is to join).

    One resource, not one per node: one SSH session on the first control plane however many join. The nodes and
    the mint window are in the script, so adding a node, or retrying a join in a later window, re-runs it for
    fresh credentials (components/render/join_credentials.py); joins ignore later stdin changes (a credential is
    spent once, at join).
    """
    joining = joining_nodes(control_planes, nodes)
    return rendered_step(
        "join-credentials",
        f"Create a join token for {len(joining)} node(s)",
        {
            "FOR_NODES": " ".join(n.name for n in joining),
            "CONTROL_PLANES": " ".join(n.name for n in joining if n.is_control_plane),
            "MINTED_FOR": minted_for,
            "TOKEN_TTL": TOKEN_TTL,
        },
        secret_stdout=True,
    )


def joining_nodes(control_planes: tuple[NodeSpec, ...], nodes: tuple[NodeSpec, ...]) -> list[NodeSpec]:
    """Every node that joins with the join credentials: all but the first control plane. A node marked gone stays
    listed until it leaves the stack: marking it must run nothing (docs/bootstrap.md, removing a dead host)."""
    first = control_planes[0]
    return [n for n in nodes if n is not first]


def join_step(spec: Spec, node: NodeSpec) -> NodeStep:
    settings = {"NODE_NAME": node.name}
    join_settings = {**settings, "JOIN_CONFIG": kubeadm.join_config(spec, node)}
    return NodeStep(
        name="kubeadm-join",
        title="Join the cluster (kubeadm join)" + (" as a control plane" if node.is_control_plane else ""),
        script=render_script("kubeadm-join", join_settings),
        node_script=render_node_script("kubeadm-join", join_settings),
        delete_script=render_script("kubeadm-reset", settings),
        node_delete_script=render_node_script("kubeadm-reset", settings),
        settings=settings,
    )


def drain_on_removal_step(node: NodeSpec) -> NodeStep:
    settings = {
        "NODE_NAME": node.name,
        "DRAIN_TIMEOUT": DRAIN_TIMEOUT,
        "NOT_READY_DRAIN_TIMEOUT": NOT_READY_DRAIN_TIMEOUT,
        "GONE": str(node.gone).lower(),
        "CONTROL_PLANE": str(node.is_control_plane).lower(),
    }
    return NodeStep(
        name="drain-on-removal",
        title=f"Drain {node.name} from a control plane when it leaves the stack",
        # Nothing runs at creation (no SSH session per node on the control plane); only removal drains.
        script=None,
        delete_script=render_script("drain-node", settings),
        node_delete_script=render_node_script("drain-node", settings),
        settings=settings,
    )
