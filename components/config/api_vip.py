"""`cluster.apiVip`: an HA API address without an external load balancer (keepalived + haproxy on the control
planes, kubeadm's documented "keepalived and haproxy" option run as OS services, docs/bootstrap.md)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from . import checks
from .schema import setting

DEFAULT_PORT = 8443
"""The API servers bind 6443 on every address of their node, the VIP included: the load balancer in front of them
needs a port of its own (kubeadm's HA guide uses 8443 too)."""
KUBERNETES_PORTS = {
    6443: "the API servers' own port",
    2379: "etcd's client port",
    2380: "etcd's peer port",
    10250: "the kubelet's port",
    10256: "kube-proxy's health port",
    10257: "kube-controller-manager's port",
    10259: "kube-scheduler's port",
    22: "SSH",
}
NODE_PORT_RANGE = (30000, 32767)
_INTERFACE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}", re.ASCII)


def vip_problem(value: str) -> str | None:
    try:
        interface = ipaddress.ip_interface(value)
    except ValueError:
        return "is not an IPv4 address with its subnet's prefix length, e.g. 10.0.0.100/24"
    if "/" not in value:
        return (
            "needs the prefix length of the control planes' subnet, e.g. "
            f"{value}/24: keepalived puts the VIP on the interface of that subnet"
        )
    if interface.version != 4:
        return "is an IPv6 address: the API VIP supports IPv4 only (keepalived's VRRPv3 for IPv6 is not wired yet)"
    network = interface.network
    if network.prefixlen < 31 and interface.ip in (network.network_address, network.broadcast_address):
        return f"is the {'network' if interface.ip == network.network_address else 'broadcast'} address of {network}"
    if interface.ip.is_loopback or interface.ip.is_multicast or interface.ip.is_unspecified:
        return "is not an address another machine can reach"
    return None


def _port(value: int) -> str | None:
    if not 1 <= value <= 65535:
        return "must be between 1 and 65535"
    if value in KUBERNETES_PORTS:
        return f"is {KUBERNETES_PORTS[value]} on a control plane: the load balancer needs a free port (default 8443)"
    if NODE_PORT_RANGE[0] <= value <= NODE_PORT_RANGE[1]:
        return "is in the NodePort range 30000-32767, which kube-proxy serves on every node"
    return None


def _interface(value: str) -> str | None:
    if not _INTERFACE.fullmatch(value) or value in (".", ".."):
        return "is not a network interface name (at most 15 characters: letters, digits, . _ - : @)"
    return None


@dataclass(frozen=True)
class ApiVipSpec:
    address: str = setting(
        doc="The VIP and the prefix length of the control planes' subnet, e.g. `10.0.0.100/24`: a free IPv4 address"
        " on the network the control planes share (layer 2: VRRP moves it by ARP). It becomes the"
        " controlPlaneEndpoint, an API server certificate SAN and every kubeconfig's server.",
        check=vip_problem,
    )
    port: int = setting(
        DEFAULT_PORT,
        doc="Port haproxy listens on, on every control plane (the API servers keep 6443).",
        check=_port,
    )
    router_id: int = setting(
        51,
        doc="VRRP virtual_router_id: unique among the VRRP groups on this network (other clusters' VIPs, routers).",
        check=checks.between(1, 255),
    )
    interface: str | None = setting(
        None,
        doc="Interface keepalived puts the VIP on (default: the one whose subnet holds it, found on each node).",
        check=_interface,
    )

    @property
    def ip(self) -> str:
        return str(ipaddress.ip_interface(self.address).ip)

    @property
    def prefix_length(self) -> int:
        return ipaddress.ip_interface(self.address).network.prefixlen

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_interface(self.address).network
