"""The rules that read more than one section of a stack, run in one ordered list once every section parsed.

A section's own checks (a value's grammar, fields of one section that must agree) stay with its fields in the
section's module; what the rules below compare is worked out in derived.py, as the renderers read it. The order
is the order of the report: a kubeadm stack's nodes and SSH first, then the platform's layers as they install.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from . import checks, formats
from .acceptance import ACCEPTANCE_IMAGE_SET
from .airgap import KUBEADM_IMAGES, KUBEADM_OWN_VERSIONS, bundle_lock
from .api_vip import DEFAULT_PORT, vip_problem
from .derived import (
    CONTROL_PLANE_TAINT,
    GpuFlavor,
    LostMust,
    acceptance_wanted,
    blocking,
    control_plane_listeners,
    custom_metric_deployments,
    gpu_flavors,
    installed_components,
    lost_musts,
    mig_profile_counted,
    monitoring_wanted,
    node_taints,
    tested_nodes,
    unqueued_gpus,
)
from .gpu import DRA_MINIMUM_KUBERNETES
from .images import registry_host
from .kubelet import effective_kubelet, overridden_keys, tuning_problems
from .kueue import (
    CPU_FLAVOR,
    GPU_RESOURCE,
    GPU_RESOURCE_PREFIX,
    HOSTNAME_LABEL,
    HOSTNAME_LEVEL,
    TOPOLOGY_LABEL_PREFIX,
    TopologySpec,
    flavor_name,
    parse_quantity,
    release_minor,
)
from .llm import gpu_sharing, validate_llm_on_cluster
from .schema import Problems, config_key, join_path
from .serving import autoscaled_llm_endpoints, keda_wanted, llm_endpoints, queue_endpoints, validate_serving_on_cluster
from .spec import Spec
from .support import range_problem, unknown_version_note
from .workloads import YOLO_JOB_NAME, TrainingWorkloadSpec

Rule = Callable[[Spec, Problems], None]

FIRST_CONTROL_PLANE_BATCH_CONNECTIONS = 200
"""SSH connections the first control plane may hold for the worker batches' drains and uncordons before the
stack is warned: each is an sshd process (two with privilege separation) on that node until `up` ends."""


# --- the nodes and how they are reached (mode kubeadm) ---------------------------------------------------


def control_plane_endpoint(spec: Spec, problems: Problems) -> None:
    if not spec.control_planes:
        problems.error("nodes", "has no control-plane node: give at least one node the role control-plane")
    if len(spec.control_planes) > 1 and not spec.cluster.control_plane_endpoint and not spec.cluster.api_vip:
        problems.error(
            "cluster.controlPlaneEndpoint",
            f"is required with {len(spec.control_planes)} control-plane nodes: your load balancer's address, or"
            " set cluster.apiVip (a free address on the control planes' subnet) to have keepalived and haproxy"
            " on the control planes serve one",
        )


def ssh_credentials(spec: Spec, problems: Problems) -> None:
    if spec.ssh.private_key is None and not spec.ssh.agent:
        problems.error(
            "ssh.privateKey",
            "is required when cluster.mode is kubeadm, unless ssh.agent is true (the SSH agent's keys)",
        )
    if spec.ssh.private_key is not None and spec.ssh.agent:
        problems.error(
            "ssh.agent",
            "cannot be true with ssh.privateKey set: authenticate with one of them (remove the key to use the agent)",
        )


def first_control_plane_stays(spec: Spec, problems: Problems) -> None:
    if spec.control_planes and spec.control_planes[0].gone:
        index = spec.nodes.index(spec.control_planes[0])
        problems.error(
            f"nodes[{index}].gone",
            "cannot be set on the first control plane: every other node's removal runs through it",
        )


def distinct_names_and_hosts(spec: Spec, problems: Problems) -> None:
    seen_names: dict[str, int] = {}
    seen_hosts: dict[str, int] = {}
    for i, node in enumerate(spec.nodes):
        for attr, seen in (("name", seen_names), ("host", seen_hosts)):
            value = getattr(node, attr)
            # Host names differing only in case or a trailing dot are one host; so are two spellings of an address.
            key = (
                str(ipaddress.ip_address(value)) if attr == "host" and formats.is_ip(value) else formats.dns_key(value)
            )
            if key in seen:
                problems.error(f"nodes[{i}].{attr}", f'"{value}" is already used by nodes[{seen[key]}]')
            else:
                seen[key] = i


def cluster_networks_apart(spec: Spec, problems: Problems) -> None:
    """The pod and service networks are the cluster's own: they overlap neither each other nor an address the
    nodes, the VIP or the bastion have (a node whose address is inside the pod network is routed into the overlay,
    a VIP there is unreachable), compared as networks, whatever the spelling."""
    if checks.cidr(spec.cluster.pod_cidr) or checks.cidr(spec.cluster.service_cidr):
        return  # refused by their own key
    networks = {
        "cluster.podCidr": ipaddress.ip_network(spec.cluster.pod_cidr),
        "cluster.serviceCidr": ipaddress.ip_network(spec.cluster.service_cidr),
    }
    pod, service = networks.values()
    if pod.version == service.version and pod.overlaps(service):
        problems.error("cluster.serviceCidr", f"{service} overlaps cluster.podCidr {pod}: they must be apart")
    addresses = [(f"nodes[{i}].host", n.host) for i, n in enumerate(spec.nodes) if formats.is_ip(n.host)]
    if spec.ssh.bastion is not None and formats.is_ip(spec.ssh.bastion.host):
        addresses.append(("ssh.bastion.host", spec.ssh.bastion.host))
    vip = spec.cluster.api_vip
    vip_network = None
    if vip is not None and vip_problem(vip.address) is None:
        addresses.append(("cluster.apiVip.address", vip.ip))
        vip_network = vip.network
    for key, network in networks.items():
        if vip_network is not None and vip_network.version == network.version and vip_network.overlaps(network):
            problems.error(key, f"{network} overlaps the control planes' subnet {vip_network} (cluster.apiVip)")
            continue
        for where, address in addresses:
            if formats.is_ip(address) and ipaddress.ip_address(address) in network:
                problems.error(
                    key, f"{network} contains {where} {address}: the cluster's networks must not hold a host"
                )
                break


def ssh_host_key_pins(spec: Spec, problems: Problems) -> None:
    """The bastion's reach (SSH only), and host-key pins as pulumi-command's Go SSH client uses them, for
    every host it dials (nodes and the bastion alike): an absent pin turns checking off for that host, and
    a pin allows only its own key type, so an `ssh-rsa` pin fails against servers that offer only
    rsa-sha2-256/512 signatures."""
    if spec.ssh.bastion is not None and spec.cluster.api_address is None:
        problems.error(
            "cluster.apiAddress",
            "is required with ssh.bastion: the bastion carries SSH only, and the Kubernetes provider dials the"
            " API server from the machine running pulumi; set an address that machine reaches (a load"
            " balancer, or 127.0.0.1:6443 through `ssh -N -L 6443:<first control plane>:6443 <bastion>`)",
        )
    pins = [(f"nodes[{i}].hostKey", node.host_key) for i, node in enumerate(spec.nodes)]
    if spec.ssh.bastion is not None:
        pins.append(("ssh.bastion.hostKey", spec.ssh.bastion.host_key))
    for path, pin in pins:
        if pin is None and not spec.ssh.insecure_ignore_host_keys:
            problems.error(
                path,
                "is required (pin the SSH host key: ssh-keyscan -t ed25519 HOST), or set"
                " ssh.insecureIgnoreHostKeys: true for a throwaway lab",
            )
        elif pin is not None and (formats.split_host_key(pin) or ("",))[0] == "ssh-rsa":
            problems.error(
                path,
                "is an ssh-rsa key: pulumi-command then allows only the ssh-rsa (SHA-1) signature, which"
                " current OpenSSH servers refuse; pin the host's ed25519 or ecdsa key instead"
                " (ssh-keyscan -t ed25519 HOST)",
            )


def bastion_lanes(spec: Spec, problems: Problems) -> None:
    """Every step dials through the bastion, and at most its MaxStartups less one run at once (the dial lanes,
    components/cluster/connection.py): a fleet larger than that prepares, joins and restarts in rounds."""
    bastion = spec.ssh.bastion
    reached = [node for node in spec.nodes if not node.gone]
    # Below 2 is refused by the setting's own check.
    if bastion is None or bastion.max_startups < 2 or len(reached) <= bastion.max_startups - 1:
        return
    lanes = bastion.max_startups - 1
    rounds = -(-len(reached) // lanes)
    problems.warn(
        "ssh.bastion.maxStartups",
        f"{len(reached)} nodes are reached through the bastion and at most {lanes} steps run through it at once"
        f" (its MaxStartups {bastion.max_startups} less one, so that no dial is dropped): each node's"
        f" preparation, join and restart take {rounds} rounds instead of one. If the bastion's sshd allows more"
        " (`sshd -T | grep -i maxstartups` on it), set this key to its first number",
    )


def etcd_quorum(spec: Spec, problems: Problems) -> None:
    """Each control plane is an etcd member (kubeadm's stacked etcd). A gone member is removed from a healthy
    one before its Node goes, and etcd changes its membership only with a quorum of started members: with
    more gone than the quorum allows, no removal can succeed and the cluster already stands still."""
    members = len(spec.control_planes)
    gone = [spec.nodes.index(n) for n in spec.control_planes if n.gone]
    quorum = members // 2 + 1
    if gone and members - len(gone) < quorum:
        names = ", ".join(f"nodes[{i}]" for i in gone)
        problems.error(
            f"nodes[{gone[-1]}].gone",
            f"leaves {members - len(gone)} of {members} etcd members ({names} gone), below etcd's quorum of"
            f" {quorum}: no member can be removed and the API server cannot write. Restore from a snapshot"
            " instead (docs/cluster-care.md, Restoring a snapshot), or mark at most"
            f" {members - quorum} control plane(s) gone",
        )


def held_connections(spec: Spec, problems: Problems) -> None:
    """A real `up` keeps every SSH command's connection open until it ends (pulumi-command never closes its
    client): the first control plane runs two commands per worker batch (its drain and uncordon)."""
    workers = len(spec.workers)
    if not workers or not spec.control_planes:
        return
    batches = -(-workers // spec.kubelet.restart.worker_batch_size(workers))
    held = 2 * batches
    if held > FIRST_CONTROL_PLANE_BATCH_CONNECTIONS:
        problems.warn(
            "kubelet.restart.maxUnavailableWorkers",
            f'"{spec.kubelet.restart.max_unavailable_workers}" makes {batches} worker batches: the first control'
            f" plane ({spec.control_planes[0].name}) runs each batch's drain and uncordon as SSH commands, and"
            f" each keeps its connection and an sshd process open until `up` ends ({held} at once besides its"
            " own steps, in a first up or an upgrade); a larger batch (a percentage such as 25%, the default)"
            f" keeps it under {FIRST_CONTROL_PLANE_BATCH_CONNECTIONS}",
        )


def kubelet_per_node(spec: Spec, problems: Problems) -> None:
    """The kubelet section's own rules on every node after its override is merged, each error naming the node's
    key path. A rule the cluster section already breaks is reported once, at the cluster key, unless the node sets
    one of the keys the rule reads."""
    cluster = spec.kubelet
    cluster_breaks = {key for key, _, _ in tuning_problems(cluster)}
    for index, node in enumerate(spec.nodes):
        override = node.kubelet
        if override is None:
            continue
        own = overridden_keys(override)
        for key, message, reads in tuning_problems(effective_kubelet(cluster, override)):
            if key in cluster_breaks and not own & reads:
                continue
            problems.error(
                f"nodes[{index}].kubelet.{key}",
                f"{message} on node {node.name} (its kubelet section merged over mlcluster:kubelet)",
            )


# --- the API VIP --------------------------------------------------------------------------------------------


def api_vip_on_control_planes(spec: Spec, problems: Problems) -> None:
    """What only the whole stack can tell: enough control planes, all on the VIP's subnet, and an endpoint that
    agrees with the VIP."""
    vip = spec.cluster.api_vip
    if vip is None or vip_problem(vip.address) is not None:
        return
    path = "cluster.apiVip"
    control_planes = spec.control_planes
    if len(control_planes) < 2:
        problems.error(
            join_path(path, "address"),
            f"needs at least 2 control-plane nodes (the stack has {len(control_planes)}): a VIP that can only sit on"
            " one node adds a failure and no availability; use that node's address, or add control planes",
        )
    listeners = control_plane_listeners(spec)
    if vip.port in listeners:
        problems.error(
            join_path(path, "port"),
            f"{vip.port} is {listeners[vip.port]} on a control plane: haproxy needs a port nothing else listens on"
            f" (default {DEFAULT_PORT})",
        )
    bastion = spec.ssh.bastion
    if bastion is not None and formats.same_address(bastion.host, vip.ip):
        problems.error(
            "ssh.bastion.host",
            f"{bastion.host} is cluster.apiVip's address: the VIP moves among the control planes, a bastion is a"
            " machine of its own",
        )
    for index, node in enumerate(spec.nodes):
        if formats.same_address(node.host, vip.ip):
            problems.error(
                join_path(path, "address"), f"{vip.ip} is nodes[{index}].host: the VIP must be a free address"
            )
        if not node.is_control_plane or not formats.is_ip(node.host):
            continue  # a DNS-named control plane is checked on the node: the VIP's route must need no gateway
        if ipaddress.ip_address(node.host) not in vip.network:
            problems.error(
                f"nodes[{index}].host",
                f'"{node.host}" is outside cluster.apiVip\'s subnet {vip.network}: keepalived moves the VIP only among'
                " control planes on one network (VRRP and ARP do not cross a router)",
            )
    endpoint = spec.cluster.control_plane_endpoint
    if endpoint:
        host, port = _split_endpoint(endpoint)
        if formats.is_ip(host) and host != vip.ip:
            problems.error(
                "cluster.controlPlaneEndpoint",
                f'"{endpoint}" is another address than cluster.apiVip {vip.ip}: leave it unset (the VIP becomes the'
                " endpoint) or give a DNS name that resolves to the VIP",
            )
        if port is not None and port != vip.port:
            problems.error(
                "cluster.controlPlaneEndpoint",
                f'"{endpoint}" uses port {port}, but haproxy listens on cluster.apiVip.port {vip.port}',
            )


def _split_endpoint(endpoint: str) -> tuple[str, int | None]:
    if endpoint.startswith("["):
        host, _, rest = endpoint[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    host, _, port = endpoint.partition(":")
    return host, int(port) if port.isdigit() else None


# --- acceptance ---------------------------------------------------------------------------------------------


def acceptance_has_gpus(spec: Spec, problems: Problems) -> None:
    settings = spec.acceptance
    if settings.enabled and not spec.gpu_operator.enabled:
        problems.error("acceptance.enabled", "is true, but gpuOperator.enabled is false: nothing exposes the GPUs")
    gpu_nodes = {node.name for node in spec.nodes if node.gpu is not None and not node.gone}
    for index, name in enumerate(settings.nodes):
        if name not in gpu_nodes:
            problems.error(
                f"acceptance.nodes[{index}]",
                f'"{name}" is not a GPU node of this stack (one with a gpu section, not gone):'
                f" {', '.join(sorted(gpu_nodes)) or 'none'}",
            )
    if settings.enabled and not tested_nodes(spec.nodes, settings.nodes):
        problems.error("acceptance.enabled", "is true, but no node has a gpu section: there is nothing to test")
    if any(s.name == ACCEPTANCE_IMAGE_SET for s in spec.images.prepull) and acceptance_wanted(spec):
        problems.error(
            "images.prepull",
            f'has a set named "{ACCEPTANCE_IMAGE_SET}", the name of the set acceptance pre-pulls its images with:'
            " rename yours",
        )


def _namespaces(value: Any, path: str) -> list[tuple[str, str]]:
    """(key path, namespace) of every namespace setting under a section, lists included."""
    found: list[tuple[str, str]] = []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            item, at = getattr(value, f.name), join_path(path, config_key(f)) if path else config_key(f)
            if f.name == "namespace" and isinstance(item, str):
                found.append((at, item))
            else:
                found += _namespaces(item, at)
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            found += _namespaces(item, join_path(path, i))
    return found


def acceptance_namespace_apart(spec: Spec, problems: Problems) -> None:
    """The acceptance Jobs' namespace is theirs alone: a team's namespace would let the team submit to the
    acceptance queue (sized to every GPU, outside the cohort), and any other one mixes the tests' objects (and
    their cleanup) with what lives there."""
    if not acceptance_wanted(spec):
        return
    wanted = spec.acceptance.namespace
    taken: list[tuple[str, str]] = []
    if spec.kueue.enabled:
        taken += [(f"kueue.teams[{i}]'s namespace", t.queue_namespace) for i, t in enumerate(spec.kueue.teams)]
    taken += [(p, n) for p, n in _namespaces(spec, "") if not p.startswith("acceptance.")]
    for where, namespace in taken:
        if namespace == wanted:
            problems.error(
                "acceptance.namespace",
                f'"{wanted}" is also {where}: the acceptance tests need a namespace of their own (a team there'
                " could submit to the acceptance queue, which holds every GPU outside the teams' cohort; anything"
                " else there would share the tests' cleanup)",
            )
            return


# --- scheduling ---------------------------------------------------------------------------------------------


def housekeeping_has_a_node(spec: Spec, problems: Problems) -> None:
    """Refuse a kubeadm stack where cluster housekeeping could run nowhere; where it can, the platform's
    controllers can too (derived.platform_taints ends with the control-plane taint)."""
    taints = {n.name: blocking(node_taints(spec.nodes, n)) for n in spec.nodes}
    # CoreDNS and calico-kube-controllers tolerate the control-plane taint and nothing else we set.
    if not any(set(t) <= {CONTROL_PLANE_TAINT} for t in taints.values()):
        problems.error(
            "nodes",
            "no node can run CoreDNS and calico-kube-controllers (they tolerate only the control-plane taint):"
            " every node carries taints of its own (nodes[].taints); leave one node without them",
        )


# --- the platform's layers ----------------------------------------------------------------------------------


def components_support_the_minor(spec: Spec, problems: Problems) -> None:
    """Every installed component against the Kubernetes minors its documentation names (support.py)."""
    if checks.k8s_version(spec.kubernetes_version) is not None:
        return
    minor = checks.version_tuple(spec.kubernetes_version)[:2]
    for installed in installed_components(spec):
        found = range_problem(installed, minor)
        if found is not None:
            strength, why = found
            (problems.error if strength == "requires" else problems.warn)(installed.key, why)
        note = unknown_version_note(installed)
        if note is not None:
            problems.warn(installed.key, note)


def gpu_operator_and_nodes(spec: Spec, problems: Problems) -> None:
    """Rules between gpuOperator, the Kubernetes version and the nodes' gpu sections."""
    gpu = spec.gpu_operator
    if gpu.dra and checks.k8s_version(spec.kubernetes_version) is None:
        major, minor, _ = checks.version_tuple(spec.kubernetes_version)
        if (major, minor) < DRA_MINIMUM_KUBERNETES:
            problems.error(
                "gpuOperator.dra",
                f"needs Kubernetes >= {'.'.join(map(str, DRA_MINIMUM_KUBERNETES))} (DRA is GA there);"
                f" kubernetesVersion is {spec.kubernetes_version}",
            )
    for i, node in enumerate(spec.nodes):
        if node.gpu is None:
            continue
        path = f"nodes[{i}].gpu"
        if node.gpu.time_slicing_replicas is not None:
            if gpu.dra:
                problems.error(
                    join_path(path, "timeSlicingReplicas"), "is a device-plugin setting: it does not apply with dra"
                )
            elif gpu.mig_strategy == "mixed":
                problems.error(
                    join_path(path, "timeSlicingReplicas"), "cannot be combined with gpuOperator.migStrategy mixed"
                )


def spegel_one_containerd_root(spec: Spec, problems: Problems) -> None:
    if not spec.images.spegel.enabled:
        return
    # One Spegel DaemonSet reads one content path: every node's containerd root must be the same.
    roots: dict[str, list[str]] = {}
    for node in spec.nodes:
        disk = node.image_disk
        root = (disk.path or disk.mount_point) if disk is not None else "/var/lib/containerd"
        roots.setdefault(root, []).append(node.name)
    if len(roots) > 1:
        detail = "; ".join(f"{root}: {', '.join(names)}" for root, names in sorted(roots.items()))
        problems.error(
            "images.spegel.enabled",
            f"needs one containerd root on every node, but the nodes use {len(roots)} ({detail})",
        )


def _gpu_flavor_problems(spec: Spec, problems: Problems) -> None:
    """What keeps a GPU node out of the flavors, or its devices from being counted (derived.gpu_flavors)."""
    models: dict[str, str] = {}
    for i, node in enumerate(spec.nodes):
        if node.gpu is None:
            continue
        path = f"nodes[{i}]"
        if "worker" not in node.roles:
            problems.warn(f"{path}.gpu", "is on a control-plane-only node, which runs no workloads: not in any flavor")
            continue
        name = flavor_name(node.gpu.model)
        first = models.setdefault(name, node.gpu.model)
        if first != node.gpu.model:
            problems.error(
                f"{path}.gpu.model",
                f'"{node.gpu.model}" and "{first}" both give flavor "{name}": name models distinctly',
            )
        mig = node.gpu.mig_config
        if mig and spec.gpu_operator.mig_strategy != "none" and not mig_profile_counted(mig):
            problems.warn(
                f"{path}.gpu.migConfig",
                f'"{mig}" is not a single-profile all-<profile> layout: Kueue quotas on this node\'s'
                " MIG devices are not checked against it",
            )


def kueue_inventory(spec: Spec, problems: Problems) -> None:
    """GPU quotas against the GPUs: over-commit without a cohort and unknown flavors are errors, idle GPUs warn."""
    if not spec.kueue.enabled:
        return
    kueue = spec.kueue
    if spec.cluster.mode == "kubeadm" and kueue.inventory:
        problems.error("kueue.inventory", "is for mode existing: in mode kubeadm the nodes' gpu sections are it")
    if spec.cluster.mode != "existing":
        _gpu_flavor_problems(spec, problems)
    flavors = gpu_flavors(spec)
    known = ", ".join([CPU_FLAVOR, *sorted(flavors)])
    asked: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    for i, team in enumerate(kueue.teams):
        for j, quota in enumerate(team.quotas):
            path = f"kueue.teams[{i}].quotas[{j}]"
            if quota.flavor == CPU_FLAVOR:
                continue
            flavor = flavors.get(quota.flavor)
            if flavor is None:
                where = (
                    "no node in the stack has this GPU model"
                    if spec.cluster.mode == "kubeadm"
                    else "is not in kueue.inventory (mode existing: declare the cluster's GPUs there)"
                )
                problems.error(f"{path}.flavor", f'"{quota.flavor}": {where} (flavors: {known})')
                continue
            for resource, quantity in quota.nominal.items():
                if not resource.startswith(GPU_RESOURCE_PREFIX):
                    continue
                devices = int(parse_quantity(quantity) or 0)
                if resource not in flavor.capacity and not flavor.unchecked:
                    have = ", ".join(f"{r} {n}" for r, n in sorted(flavor.capacity.items())) or "nothing"
                    problems.error(
                        f"{path}.nominal.{resource}",
                        f"({quantity}): no node of flavor {flavor.name} provides {resource} (they provide {have})",
                    )
                    continue
                asked[(flavor.name, resource)].append((team.name, devices))
    # GPUs that pods outside Kueue hold are spoken for: not "in no team's quota" (one count for both checks).
    outside = sum(unqueued_gpus(spec).values())
    for flavor in flavors.values():
        if flavor.unchecked:
            continue
        for resource in sorted(flavor.capacity):
            teams = asked.get((flavor.name, resource), [])
            held = 0
            if resource == GPU_RESOURCE:
                held = min(outside, max(flavor.capacity[resource] - sum(d for _, d in teams), 0))
                outside -= held
            _compare(flavor, resource, teams, kueue.cohort, problems, held_outside=held)
    _check_unqueued(spec, flavors, asked, problems)


def _check_unqueued(
    spec: Spec,
    flavors: dict[str, GpuFlavor],
    asked: dict[tuple[str, str], list[tuple[str, int]]],
    problems: Problems,
) -> None:
    """Kueue admits against its quotas alone: GPUs held outside it must not also be promised to the teams."""
    held = unqueued_gpus(spec)
    checked = [f for f in flavors.values() if not f.unchecked and GPU_RESOURCE in f.capacity]
    if not held or not checked:
        return
    capacity = sum(f.capacity[GPU_RESOURCE] for f in checked)
    promised = sum(d for f in checked for _, d in asked.get((f.name, GPU_RESOURCE), []))
    outside = sum(held.values())
    if promised + outside > capacity:
        who = ", ".join(f"{name} {n}" for name, n in sorted(held.items()))
        problems.warn(
            "kueue.teams",
            f"nominal {GPU_RESOURCE} quotas promise {promised} of the {capacity} GPUs, but {outside} are held outside"
            f" Kueue ({who}): admitted jobs may wait for {promised + outside - capacity} GPUs; lower the quotas by"
            " that much",
        )


def _compare(
    flavor: GpuFlavor,
    resource: str,
    teams: list[tuple[str, int]],
    cohort: str | None,
    problems: Problems,
    *,
    held_outside: int = 0,
) -> None:
    capacity = flavor.capacity[resource]
    total = sum(devices for _, devices in teams)
    have = f"the {capacity} the nodes have ({flavor.explain(resource)})"
    if total > capacity:
        shares = " + ".join(f"{team} {devices}" for team, devices in teams)
        head = f"nominal {resource} quotas of flavor {flavor.name} add up to {total} ({shares}), more than {have}"
        if cohort is None:
            problems.error(
                "kueue.teams",
                f"{head}: over-committed by {total - capacity} with no cohort; lower the quotas or set kueue.cohort",
            )
        else:
            problems.warn(
                "kueue.teams",
                f"{head}: cohort {cohort} may admit workloads whose pods then wait for {total - capacity} devices",
            )
    elif total + held_outside < capacity:
        besides = f", besides {held_outside} held by pods outside Kueue," if held_outside else ""
        problems.warn(
            "kueue.teams",
            f"{capacity - total - held_outside} of the {capacity} {resource} of flavor {flavor.name}"
            f" ({flavor.explain(resource)}){besides} are in no team's nominal quota"
            + (": no team can use them without a cohort" if cohort is None else f": cohort {cohort} cannot lend them"),
        )


def node_topology(spec: Spec, problems: Problems) -> None:
    """nodes[].topology against kueue.topology: declared levels only, every level on a GPU node, labels the
    kubelet may set on its own node (mode kubeadm), and no node label that a topology level also sets."""
    topology = spec.kueue.topology
    if spec.cluster.mode != "kubeadm":
        return
    if topology is None:
        # Labels only (kueue.topology is declared where Kueue is, e.g. the platform stack of a two-stack split).
        for i, node in enumerate(spec.nodes):
            for level in node.topology:
                where = join_path(f"nodes[{i}].topology", level)
                if level == HOSTNAME_LEVEL:
                    problems.error(where, f"is the node itself: the kubelet sets {HOSTNAME_LABEL}")
                elif checks.k8s_name(level):
                    label = f"{TOPOLOGY_LABEL_PREFIX}<level>"
                    problems.error(where, f"is not a level name such as rack (it becomes the label {label})")
        return
    _validate_kubelet_labels(topology, problems)
    _validate_trainer(spec, problems)
    levels = topology.domain_levels()
    declared = ", ".join(levels) or "none"
    for i, node in enumerate(spec.nodes):
        path = f"nodes[{i}]"
        for level in node.topology:
            if level not in levels:
                why = (
                    f"is the node itself: the kubelet sets {HOSTNAME_LABEL}"
                    if topology.level_labels().get(level) == HOSTNAME_LABEL
                    else f"is not a level of kueue.topology.levels ({declared})"
                )
                problems.error(join_path(f"{path}.topology", level), why)
        for level, label in levels.items():
            if label in node.labels:
                problems.error(
                    join_path(f"{path}.labels", label),
                    f"is the node label of topology level {level}: give it as topology.{level} instead",
                )
        if node.gpu is None or "worker" not in node.roles:
            # Not in a GPU flavor, so not in the Topology's domains: its topology (if any) is only labels.
            continue
        missing = [level for level in levels if level not in node.topology]
        if missing:
            problems.error(
                f"{path}.topology",
                f"misses level(s) {', '.join(missing)}: a GPU node names its domain at every level of"
                f" kueue.topology.levels ({declared}): Kueue places topology-aware pods only on nodes with"
                " every level's label",
            )


def _validate_kubelet_labels(topology: TopologySpec, problems: Problems) -> None:
    """The kubelet labels its node at join (--node-labels): NodeRestriction lets it set only some prefixes. The
    default labels (topology.mlcluster.io/<level>) are allowed, so only a label given in nodeLabels can fail."""
    for level, label in topology.domain_levels().items():
        if level in topology.node_labels and not checks.label_key(label) and not checks.kubelet_may_set_label(label):
            message = checks.kubelet_label_problem(label).replace("has label ", "is ", 1)
            problems.error(f"kueue.topology.nodeLabels.{level}", message)


TRAINJOB_TAS_MIN_TRAINER = (2, 1)
"""Kueue reads a TrainJob's topology request off the JobSet the Trainer's runtime builds, from Trainer 2.1."""


def _validate_trainer(spec: Spec, problems: Problems) -> None:
    training, kubeflow = spec.workloads.training, spec.kubeflow
    if not (spec.kueue.enabled and training.enabled and training.train_job and kubeflow.enabled):
        return
    minor = release_minor(kubeflow.version)
    if minor is not None and minor < TRAINJOB_TAS_MIN_TRAINER:
        problems.error(
            "kubeflow.version",
            f"is {kubeflow.version}: the training TrainJob's topology request (kueue.topology) needs Kubeflow"
            f" Trainer >= {'.'.join(map(str, TRAINJOB_TAS_MIN_TRAINER))}",
        )


def kubeflow_and_workloads(spec: Spec, problems: Problems) -> None:
    """Rules across the kubeflow, storage and workloads sections."""
    kubeflow, workloads = spec.kubeflow, spec.workloads
    if workloads.notebook and not kubeflow.notebooks:
        problems.error("workloads.notebook", "needs kubeflow.notebooks: true (the Notebook controller)")
    gpu_nodes = [node for node in spec.nodes if node.gpu is not None]
    if spec.cluster.mode == "kubeadm" and spec.nodes and not gpu_nodes:
        # A managed cluster's GPU pools are not in the stack; a kubeadm stack lists every node.
        for key, wanted in (("yoloPredict", workloads.yolo_predict), ("training.enabled", workloads.training.enabled)):
            if wanted:
                problems.error(
                    f"workloads.{key}",
                    "asks for nvidia.com/gpu but no node in nodes has a gpu section: it would never start",
                )
    if spec.kueue.enabled and workloads.any_enabled:
        _validate_team_queue(spec, problems)
    training = workloads.training
    if training.enabled:
        _validate_training_workload(spec, training, problems)


def _validate_team_queue(spec: Spec, problems: Problems) -> None:
    """The queue label must name a LocalQueue the Kueue layer creates, or the jobs wait forever."""
    workloads = spec.workloads
    queues = {(team.queue_namespace, team.name) for team in spec.kueue.teams}
    if not queues:
        # Kueue labels the jobs with the queue, and Kueue holds a job whose LocalQueue does not exist forever.
        problems.error(
            "workloads.queueName",
            f'"{workloads.queue_name}" names a LocalQueue, but kueue.teams is empty, so the stack creates none and'
            " the jobs would never be admitted: add a team (its LocalQueue is named after it, in its namespace;"
            f" e.g. name: {workloads.queue_name}, namespace: {workloads.namespace}, with a quota) or set"
            " kueue.enabled: false",
        )
    elif (workloads.namespace, workloads.queue_name) not in queues:
        known = ", ".join(f"{name} in {namespace}" for namespace, name in sorted(queues))
        problems.error(
            "workloads.queueName",
            f'"{workloads.queue_name}" is not a Kueue team\'s LocalQueue in namespace "{workloads.namespace}"'
            f" (the teams' queues: {known}); the jobs would never be admitted",
        )
    if workloads.create_namespace and workloads.namespace in {namespace for namespace, _ in queues}:
        problems.error(
            "workloads.createNamespace",
            f'must be false: namespace "{workloads.namespace}" is a Kueue team\'s, created by the Kueue layer',
        )


def _validate_training_workload(spec: Spec, training: TrainingWorkloadSpec, problems: Problems) -> None:
    path = "workloads.training"
    storage = spec.storage
    if spec.workloads.yolo_predict and training.name == YOLO_JOB_NAME:
        problems.error(join_path(path, "name"), f'"{training.name}" is the YOLO Job\'s name: pick another')
    if training.train_job and not spec.kubeflow.enabled:
        problems.error(join_path(path, "trainJob"), "needs kubeflow.enabled: true (Kubeflow Trainer)")
    if training.storage_class is None and not storage.enabled and spec.cluster.mode == "kubeadm":
        problems.error(
            join_path(path, "storageClass"),
            "is required when storage.enabled is false: a kubeadm cluster has no default StorageClass,"
            " so the checkpoint PVC would never bind",
        )
    node_local = training.storage_class is None and storage.enabled and storage.provisioner == "local-path"
    if node_local and training.num_nodes > 1:
        problems.error(
            join_path(path, "numNodes"),
            f"({training.num_nodes}) needs a checkpoint volume every node can mount: local-path volumes live on"
            " one node; use storage.provisioner: nfs or a ReadWriteMany storageClass",
        )


def monitoring_and_autoscaling(spec: Spec, problems: Problems) -> None:
    """Rules between monitoring and the rest of the stack: storage, the GPU Operator, custom-metric HPAs."""
    path = "monitoring"
    if monitoring_wanted(spec):
        if not spec.storage.enabled and not spec.cluster.defaults.default_storage_class:
            # A default class installed outside mlcluster serves the claim; without one it stays Pending.
            problems.warn(
                join_path(path, "storageSize"),
                "Prometheus' volume claim names no StorageClass (storage.enabled is false): it binds only if the"
                " cluster has a default class installed some other way; set storage.enabled: true, or"
                " monitoring.enabled: false",
            )
        if spec.gpu_operator.enabled and not spec.gpu_operator.dcgm_exporter:
            problems.warn(
                "gpuOperator.dcgmExporter",
                "is false: the GPU dashboard and the GPU fault alerts get no data",
            )
    else:
        for deployment in custom_metric_deployments(spec):
            i = spec.kserve.deployments.index(deployment)
            problems.warn(
                f"kserve.deployments[{i}].autoscaling.metric",
                f"scales on {deployment.autoscaling.metric_name}, which a metrics adapter must serve: mlcluster"
                " installs prometheus-adapter with monitoring.enabled: true; without it the HPA reports no metric"
                " unless you run an adapter yourself",
            )
    if monitoring_wanted(spec):
        for deployment in custom_metric_deployments(spec):
            # prometheus-adapter serves it from a Prometheus series of the same name (a selector and a regex).
            problem = checks.prometheus_metric_name(str(deployment.autoscaling.metric_name))
            if problem is not None:
                i = spec.kserve.deployments.index(deployment)
                problems.error(
                    f"kserve.deployments[{i}].autoscaling.metricName",
                    f'"{deployment.autoscaling.metric_name}" {problem}: prometheus-adapter (monitoring) serves the HPA'
                    " the Prometheus series of that name",
                )
    _validate_queue_endpoints(spec, problems)
    mode = spec.monitoring.fault_handling.mode
    if mode not in (None, "off") and not spec.gpu_operator.enabled:
        problems.error(
            join_path(path, "faultHandling.mode"),
            f"{mode} reads GPU health from the GPU Operator's DCGM: set gpuOperator.enabled: true, or mode: off",
        )
    elif mode in ("cordon", "drain") and not spec.kserve.enabled:
        problems.error(
            join_path(path, "faultHandling.mode"),
            f"{mode} needs cert-manager (NVSentinel's quarantine datastore takes its certificates from it), which"
            " mlcluster installs with KServe: set kserve.enabled: true, or mode: observe",
        )


def _validate_queue_endpoints(spec: Spec, problems: Problems) -> None:
    """KEDA reads an endpoint's queue from this stack's Prometheus, and takes the external metrics API for itself."""
    queued = queue_endpoints(spec.kserve)
    for endpoint in queued if not monitoring_wanted(spec) else []:
        i = spec.kserve.endpoints.index(endpoint)
        problems.error(
            f"kserve.endpoints[{i}].autoscaling.metric",
            f"{endpoint.autoscaling.metric} scales through KEDA on a Prometheus query, and Prometheus comes with"
            " monitoring: set monitoring.enabled: true, or scale on cpu or memory",
        )
    for llm in autoscaled_llm_endpoints(spec.kserve) if not monitoring_wanted(spec) else []:
        i = spec.kserve.llm.endpoints.index(llm)
        problems.error(
            f"kserve.llm.endpoints[{i}].autoscaling",
            "scales through KEDA on a Prometheus query, and Prometheus comes with monitoring: set"
            " monitoring.enabled: true, or remove autoscaling (a fixed replicas count)",
        )
    if not keda_wanted(spec.kserve) or not monitoring_wanted(spec):
        return
    scaled_by_keda = (
        f"kserve.endpoints[{spec.kserve.endpoints.index(queued[0])}] (metric {queued[0].autoscaling.metric})"
        if queued
        else f"kserve.llm.endpoints[{spec.kserve.llm.endpoints.index(autoscaled_llm_endpoints(spec.kserve)[0])}]"
    )
    # Both KEDA and prometheus-adapter register v1beta1.external.metrics.k8s.io; a cluster has one of them.
    for deployment in custom_metric_deployments(spec):
        if deployment.autoscaling.metric == "external":
            i = spec.kserve.deployments.index(deployment)
            problems.error(
                f"kserve.deployments[{i}].autoscaling.metric",
                f"external needs prometheus-adapter to serve the external metrics API, which KEDA serves for"
                f" {scaled_by_keda}: the API has one server per cluster; scale this deployment on metric pods, or"
                " the endpoint on cpu or memory",
            )


def rdma_network(spec: Spec, problems: Problems) -> None:
    """Rules between network.rdma, the nodes, the GPU Operator and the training workload's queue."""
    rdma = spec.network.rdma
    if not rdma.enabled:
        return
    if spec.cluster.mode == "kubeadm" and spec.nodes and not any(n.gpu is not None for n in spec.nodes):
        # A managed cluster's GPU pools are not in the stack; a kubeadm stack lists every node.
        problems.error(
            "network.rdma.enabled",
            "needs a GPU node: RDMA here serves multi-node GPU training, and no node in nodes has a gpu section",
        )
    gpu = spec.gpu_operator
    gpu_nodes = [(i, n.gpu) for i, n in enumerate(spec.nodes) if n.gpu is not None]
    host_driver = [f"nodes[{i}].gpu.driver" for i, g in gpu_nodes if g.driver == "preinstalled"]
    if gpu.driver == "preinstalled" and (not gpu_nodes or any(g.driver is None for _, g in gpu_nodes)):
        host_driver.insert(0, "gpuOperator.driver")
    for path in host_driver if gpu.enabled else ["gpuOperator.enabled"]:
        problems.warn(
            path,
            "leaves GPUDirect RDMA to the hosts: network.rdma turns it on only in the GPU Operator's own driver"
            " container, so each GPU node using its host driver must load nvidia-peermem itself (modprobe"
            " nvidia-peermem), or RDMA traffic is staged through host memory",
        )
    _validate_queue_covers_rdma(spec, problems)


def _validate_queue_covers_rdma(spec: Spec, problems: Problems) -> None:
    """Kueue admits a workload only when its ClusterQueue covers every resource its pods request."""
    training = spec.workloads.training
    if not (spec.kueue.enabled and training.enabled and training.num_nodes > 1):
        return
    resource = spec.network.rdma.resource_name
    for i, team in enumerate(spec.kueue.teams):
        if (team.queue_namespace, team.name) != (spec.workloads.namespace, spec.workloads.queue_name):
            continue
        if not any(resource in quota.nominal for quota in team.quotas):
            problems.error(
                f"kueue.teams[{i}].quotas",
                f"has no quota for {resource}, which the multi-node training pods request (network.rdma): Kueue"
                " admits only workloads whose every resource its ClusterQueue covers; add it to the quota of the"
                f" GPU flavor they run on, e.g. nominal: {{{resource}: 64}}",
            )


def conformance_musts(spec: Spec, problems: Problems) -> None:
    """One warning per key that gives up MUSTs, naming them (docs/conformance.md)."""
    by_path: dict[str, list[LostMust]] = {}
    for item in lost_musts(spec):
        by_path.setdefault(item.path, []).append(item)
    for path, items in by_path.items():
        named = "; ".join(f"{item.requirement} ({item.why})" for item in items)
        problems.warn(
            path,
            f"gives up the Kubernetes AI Conformance MUST{'s' if len(items) > 1 else ''} {named}: the evidence pack"
            " (python -m components.conformance) marks it Not Implemented",
        )


def serving_on_cluster(spec: Spec, problems: Problems) -> None:
    team_namespaces = [t.queue_namespace for t in spec.kueue.teams] if spec.kueue.enabled else []
    validate_serving_on_cluster(
        spec.kserve,
        cluster_mode=spec.cluster.mode,
        provider=spec.cluster.provider,
        node_gpus=[n.gpu.count for n in spec.nodes if n.gpu is not None],
        team_namespaces=team_namespaces,
        problems=problems,
    )
    gpu = spec.gpu_operator
    validate_llm_on_cluster(
        spec.kserve.llm,
        llm_endpoints(spec.kserve),
        node_gpus=[n.gpu.count for n in spec.nodes if n.gpu is not None] if spec.cluster.mode == "kubeadm" else None,
        gpu_sharing=gpu_sharing(gpu.mig_strategy, gpu.time_slicing_replicas) if gpu.enabled else None,
        team_namespaces={t.name: t.queue_namespace for t in spec.kueue.teams} if spec.kueue.enabled else {},
        rdma=spec.network.rdma.enabled,
        problems=problems,
    )


def storage_beside_the_providers(spec: Spec, problems: Problems) -> None:
    """A managed cluster with its own default StorageClass keeps it as the only default: with two, Kubernetes gives a
    claim that names no class the most recently created default (kubernetes.io docs, "Default StorageClass")."""
    if spec.storage.enabled and spec.cluster.defaults.default_storage_class:
        problems.warn(
            "storage.enabled",
            f"cluster.provider {spec.cluster.provider} brings a default StorageClass: {spec.storage.storage_class}"
            " is installed beside it as a class that is not the default (the stack's own claims name it); set"
            " storage.enabled: false to use the provider's class alone",
        )


def nfs_server(spec: Spec, problems: Problems) -> None:
    if spec.storage.provisioner == "nfs" and spec.storage.enabled and not spec.storage.nfs_server:
        problems.error("storage.nfsServer", "is required when storage.provisioner is nfs")


def air_gap_from_the_bundle(spec: Spec, problems: Problems) -> None:
    """The seed is a node of the stack, and the bundle holds what this stack's nodes install and pull first: the
    Kubernetes packages and kubeadm's images at the stack's version (the rest: `python -m components.airgap check`)."""
    air_gap = spec.air_gap
    if not air_gap.enabled:
        return
    names = [n.name for n in spec.nodes]
    if air_gap.seed is not None and air_gap.seed not in names:
        problems.error("airGap.seed", f'"{air_gap.seed}" names no node: the nodes are {", ".join(names)}')
    elif air_gap.seed is not None and next(n for n in spec.nodes if n.name == air_gap.seed).gone:
        problems.error("airGap.seed", f'"{air_gap.seed}" is marked gone: name a node that stays to serve the bundle')
    lock = bundle_lock(air_gap.lockfile)
    if lock.problems or not lock.document:
        return  # said at airGap.lockfile
    version = spec.kubernetes_version.lstrip("v")
    if lock.kubernetes_version != version:
        problems.error(
            "airGap.lockfile",
            f"is the bundle of Kubernetes {lock.kubernetes_version}, the stack runs {version}: lock and fetch a bundle"
            " for this stack (docs/air-gap.md, day 2)",
        )
        return
    for family in air_gap.os_families:
        held = {p.name for p in lock.packages(family) if p.version in (None, version)}
        lacking = [name for name in ("kubeadm", "kubelet", "kubectl") if name not in held]
        if lacking:
            problems.error(
                "airGap.lockfile",
                f"holds no {', '.join(lacking)} {version} for the {family} family (airGap.osFamilies): its nodes"
                " could not install them",
            )
    for component in KUBEADM_IMAGES:
        reference = f"registry.k8s.io/{component}:v{version}"
        if reference not in lock.images:
            problems.error("airGap.lockfile", f"holds no {reference}, which kubeadm pulls on every node")
    for repository, what in KUBEADM_OWN_VERSIONS:
        if repository not in lock.repositories:
            problems.error(
                "airGap.lockfile",
                f"holds no {repository} image ({what}): fetch again with --image <each image `kubeadm config images"
                f" list --kubernetes-version v{version}` names>",
            )
    served = set(lock.registries)
    spegel = spec.images.spegel
    if spegel.enabled and spegel.mirrored_registries:
        # Spegel moves every registry's hosts.toml aside and writes one only for the registries it mirrors (spegel
        # v0.7.4 pkg/oci/containerd.go AddMirrorConfiguration): a served registry left out would lose the seed.
        listed = {registry_host(url) for url in spegel.mirrored_registries}
        unlisted = sorted(served - listed)
        if unlisted:
            problems.error(
                "images.spegel.mirroredRegistries",
                f"leaves out {', '.join(unlisted)}, served by the air-gap seed: Spegel would move their hosts.toml"
                " aside and the nodes would lose the seed; add them as https://<registry>, or leave the list empty"
                " (the seed's registries)",
            )
    for index, mirror in enumerate(spec.images.mirrors):
        if mirror.registry in served:
            problems.error(
                f"images.mirrors[{index}].registry",
                f'"{mirror.registry}" is served by the air-gap seed (airGap.enabled): its hosts.toml names the seed;'
                " remove this mirror",
            )


# --- the one ordered list -----------------------------------------------------------------------------------

KUBEADM_RULES: tuple[Rule, ...] = (
    control_plane_endpoint,
    api_vip_on_control_planes,
    acceptance_has_gpus,
    acceptance_namespace_apart,
    ssh_credentials,
    housekeeping_has_a_node,
    kubelet_per_node,
    ssh_host_key_pins,
    bastion_lanes,
    first_control_plane_stays,
    etcd_quorum,
    held_connections,
    distinct_names_and_hosts,
    cluster_networks_apart,
    air_gap_from_the_bundle,
)
"""Mode kubeadm, once the stack lists a node: the nodes, how they are reached, what they can run."""

STACK_RULES: tuple[Rule, ...] = (
    components_support_the_minor,
    gpu_operator_and_nodes,
    spegel_one_containerd_root,
    storage_beside_the_providers,
    nfs_server,
    serving_on_cluster,
    kueue_inventory,
    node_topology,
    kubeflow_and_workloads,
    monitoring_and_autoscaling,
    rdma_network,
    conformance_musts,
)
"""Every stack: the platform's layers against each other and against the nodes, in the order they install."""


def validate(spec: Spec, problems: Problems) -> None:
    """Every rule that reads more than one section, in report order."""
    if spec.cluster.mode == "kubeadm":
        if not spec.nodes:
            problems.error("nodes", "must list at least one node when cluster.mode is kubeadm")
        else:
            for rule in KUBEADM_RULES:
                rule(spec, problems)
    for rule in STACK_RULES:
        rule(spec, problems)
