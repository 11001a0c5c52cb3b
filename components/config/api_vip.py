"""`cluster.apiVip`: an HA API address without an external load balancer (keepalived + haproxy on the control
planes, kubeadm's documented "keepalived and haproxy" option run as OS services, docs/bootstrap.md)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from . import checks, formats
from .schema import setting

DEFAULT_PORT = 8443
"""The API servers bind 6443 on every address of their node, the VIP included: the load balancer in front of them
needs a port of its own (kubeadm's HA guide uses 8443 too)."""
NODE_PORT_RANGE = (30000, 32767)
_INTERFACE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}", re.ASCII)


VIP_PREFIX_RANGE = (8, 30)
"""Prefix lengths a VIP's subnet may have: /0 to /7 would put an on-link route to most of the internet on the
control planes' interface (a /0 to every destination), and a /31 or /32 has no room for the VIP beside two
control planes."""
_PREFIX = re.compile(r"[1-9][0-9]?|0", re.ASCII)


def vip_problem(value: str) -> str | None:
    address, slash, prefix = value.partition("/")
    if not slash:
        return (
            "needs the prefix length of the control planes' subnet, e.g. "
            f"{value}/24: keepalived puts the VIP on the interface of that subnet"
        )
    if not _PREFIX.fullmatch(prefix):
        # ipaddress also reads 255.255.255.0 and 024; keepalived.conf and the node step would each get another
        # spelling. One form: the prefix length in decimal.
        return f"writes the prefix as {prefix!r}: give the prefix length as a number, e.g. {address}/24"
    try:
        interface = ipaddress.ip_interface(value)
    except ValueError:
        return "is not an IPv4 address with its subnet's prefix length, e.g. 10.0.0.100/24"
    if (mapped := formats.ipv4_mapped(address)) is not None:
        return f"is an IPv4-mapped IPv6 address: write {mapped}/<prefix length>"
    if interface.version != 4:
        return "is an IPv6 address: the API VIP supports IPv4 only (keepalived's VRRPv3 for IPv6 is not wired yet)"
    network = interface.network
    low, high = VIP_PREFIX_RANGE
    if not low <= network.prefixlen <= high:
        return (
            f"has prefix /{network.prefixlen}: the control planes' subnet is /{low} to /{high} (a shorter prefix puts"
            " an on-link route to most addresses on the interface, a longer one leaves no room for the VIP and two"
            " control planes)"
        )
    if network.prefixlen < 31 and interface.ip in (network.network_address, network.broadcast_address):
        return f"is the {'network' if interface.ip == network.network_address else 'broadcast'} address of {network}"
    if interface.ip.is_loopback or interface.ip.is_multicast or interface.ip.is_unspecified:
        return "is not an address another machine can reach"
    return None


def _port(value: int) -> str | None:
    if not 1 <= value <= 65535:
        return "must be between 1 and 65535"
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
        doc="Port haproxy listens on, on every control plane (the API servers keep 6443); refused when anything the"
        " stack sets up listens there (etcd, the kubelet, Calico's BGP, SSH...).",
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
