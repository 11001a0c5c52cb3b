"""kubeadm v1beta4 documents: InitConfiguration + ClusterConfiguration + KubeletConfiguration, and joins.

Join documents carry placeholders where the bootstrap token, CA hash and certificate key go: the real
values reach the node on stdin and are substituted there, so the plan shows everything but the secrets.
"""

from __future__ import annotations

from typing import Any

from ..config import checks, formats
from ..config.cluster import ClusterSpec
from ..config.derived import node_taints, topology_labels
from ..config.kueue import KueueSpec
from ..config.nodes import GPU_COUNT_LABEL, GPU_MODEL_LABEL, NodeSpec
from ..config.spec import Spec
from . import yaml_text
from .kubelet import kubelet_configuration
from .kubelet_placement import parse_minor

API_VERSION = "kubeadm.k8s.io/v1beta4"
CRI_SOCKET = "unix:///var/run/containerd/containerd.sock"
API_SERVER_PORT = 6443
TOKEN_PLACEHOLDER = "__MLCLUSTER_JOIN_TOKEN__"
CA_HASH_PLACEHOLDER = "__MLCLUSTER_CA_CERT_HASH__"
CERTIFICATE_KEY_PLACEHOLDER = "__MLCLUSTER_CERTIFICATE_KEY__"


def node_labels(node: NodeSpec) -> dict[str, str]:
    labels: dict[str, str] = dict(node.labels)
    if node.gpu is not None:
        labels.setdefault(GPU_MODEL_LABEL, node.gpu.model)
        labels.setdefault(GPU_COUNT_LABEL, str(node.gpu.count))
    return labels


def registered_labels(kueue: KueueSpec, node: NodeSpec) -> dict[str, str]:
    """Every label the node's kubelet registers it with: its own, its GPUs', its place in the topology."""
    return {**node_labels(node), **topology_labels(kueue.topology, node)}


def node_registration(
    kueue: KueueSpec, nodes: tuple[NodeSpec, ...], node: NodeSpec, *, pin_node_ip: bool = False
) -> dict[str, Any]:
    """`pin_node_ip`: the kubelet registers the node's own address as its InternalIP (with cluster.apiVip, a control
    plane also holds the VIP, which the kubelet's own detection could pick)."""
    registration: dict[str, Any] = {
        "name": node.name,
        "criSocket": CRI_SOCKET,
        # An empty list means "no taints"; kubeadm would otherwise add its control-plane taint.
        "taints": [checks.parse_taint(t) for t in node_taints(nodes, node)],
    }
    labels = registered_labels(kueue, node)
    arguments = []
    if labels:
        arguments.append({"name": "node-labels", "value": ",".join(f"{k}={v}" for k, v in sorted(labels.items()))})
    if pin_node_ip and formats.is_ip(node.host):
        arguments.append({"name": "node-ip", "value": node.host})
    if arguments:
        registration["kubeletExtraArgs"] = arguments
    return registration


def api_endpoint(cluster: ClusterSpec, control_planes: tuple[NodeSpec, ...]) -> str:
    """host:port the nodes and the admin kubeconfig use for the API server."""
    vip = cluster.api_vip
    default_port = vip.port if vip is not None else API_SERVER_PORT
    if cluster.control_plane_endpoint:
        endpoint = cluster.control_plane_endpoint
        has_port = endpoint.rsplit("]", 1)[-1].count(":") == 1 if endpoint.startswith("[") else ":" in endpoint
        return endpoint if has_port else f"{endpoint}:{default_port}"
    if vip is not None:
        return f"{vip.ip}:{vip.port}"
    first = control_planes[0]
    host = f"[{first.host}]" if ":" in first.host else first.host
    return f"{host}:{API_SERVER_PORT}"


def _local_endpoint(node: NodeSpec) -> dict[str, Any]:
    endpoint: dict[str, Any] = {"bindPort": API_SERVER_PORT}
    if formats.is_ip(node.host):
        endpoint["advertiseAddress"] = node.host
    return endpoint


def cluster_configuration(
    cluster: ClusterSpec, control_planes: tuple[NodeSpec, ...], kubernetes_version: str
) -> dict[str, Any]:
    vip = {cluster.api_vip.ip} if cluster.api_vip is not None else set()
    sans = sorted(
        {n.host for n in control_planes} | {api_endpoint(cluster, control_planes).rsplit(":", 1)[0].strip("[]")} | vip
    )
    config: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "ClusterConfiguration",
        "clusterName": cluster.name,
        "kubernetesVersion": f"v{kubernetes_version.lstrip('v')}",
        "networking": {"podSubnet": cluster.pod_cidr, "serviceSubnet": cluster.service_cidr},
        "apiServer": {"certSANs": sans},
    }
    if cluster.control_plane_endpoint or cluster.api_vip is not None:
        config["controlPlaneEndpoint"] = api_endpoint(cluster, control_planes)
    return config


def init_documents(spec: Spec, node: NodeSpec) -> list[dict[str, Any]]:
    init = {
        "apiVersion": API_VERSION,
        "kind": "InitConfiguration",
        "localAPIEndpoint": _local_endpoint(node),
        "nodeRegistration": node_registration(
            spec.kueue, spec.nodes, node, pin_node_ip=spec.cluster.api_vip is not None
        ),
    }
    kubelet = kubelet_configuration(spec.kubelet, parse_minor(spec.kubernetes_version))
    return [init, cluster_configuration(spec.cluster, spec.control_planes, spec.kubernetes_version), kubelet]


def init_config(spec: Spec, node: NodeSpec) -> str:
    return yaml_text.dump_all(init_documents(spec, node))


def join_document(spec: Spec, node: NodeSpec) -> dict[str, Any]:
    join: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": api_endpoint(spec.cluster, spec.control_planes),
                "token": TOKEN_PLACEHOLDER,
                "caCertHashes": [CA_HASH_PLACEHOLDER],
            }
        },
        "nodeRegistration": node_registration(
            spec.kueue, spec.nodes, node, pin_node_ip=spec.cluster.api_vip is not None
        ),
    }
    if node.is_control_plane:
        join["controlPlane"] = {
            "localAPIEndpoint": _local_endpoint(node),
            "certificateKey": CERTIFICATE_KEY_PLACEHOLDER,
        }
    return join


def join_config(spec: Spec, node: NodeSpec) -> str:
    return yaml_text.dump(join_document(spec, node))
