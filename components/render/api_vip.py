"""keepalived.conf, haproxy.cfg and keepalived's health check for `cluster.apiVip`, and the node step that applies them.

The shape is kubeadm's HA guide's "keepalived and haproxy" option (kubernetes/kubeadm docs/ha-considerations.md), run
as OS services rather than static pods: neither needs Kubernetes credentials or the kubelet, so the VIP answers before
`kubeadm init` and kubeadm ≥ 1.29's super-admin.conf never matters (kube-vip's static pod needs it: kube-vip #684).

- haproxy on every control plane listens on the VIP's port and spreads TCP connections over the API servers that
  answer `/readyz` (what kubeadm's own guide checks is `/healthz`; `/readyz` also drops an API server that is
  shutting down or lost etcd), retrying a refused connection on another one.
- keepalived holds the VIP on one control plane (VRRP). Its check asks the local haproxy for `/readyz`: a node
  whose haproxy cannot reach any ready API server drops below every healthy one, so the VIP moves to a node
  whose load balancer works. `nopreempt`: a recovered node does not take the VIP back (one move, not two).
"""

from __future__ import annotations

from ..config.api_vip import ApiVipSpec
from ..config.cluster import ClusterSpec
from ..config.formats import is_ip
from ..config.nodes import NodeSpec
from .kubeadm import API_SERVER_PORT
from .shell import NodeStep, rendered_step

KEEPALIVED_CONF = "/etc/keepalived/keepalived.conf"
HAPROXY_CFG = "/etc/haproxy/haproxy.cfg"
CHECK_SCRIPT_DIR = "/usr/libexec/keepalived"
CHECK_SCRIPT = f"{CHECK_SCRIPT_DIR}/mlcluster-check-api.sh"
"""Where SELinux lets keepalived run a check: its policy labels /usr/libexec/keepalived(/.*)?
keepalived_unconfined_script_exec_t and transitions into it (fedora-selinux/selinux-policy keepalived.fc, .te);
/etc/keepalived is etc_t, which keepalived_t may read but not execute."""
LEGACY_CHECK_SCRIPT = "/etc/keepalived/mlcluster-check-api.sh"
"""Where earlier releases wrote the check: removed once the new one is in place."""
SELINUX_BOOLEANS = ("haproxy_connect_any",)
"""haproxy_t may connect only to a few port types (http_port_t, http_cache_port_t, commplex, fmpro, rtp_media:
selinux-policy rhcs.te); the API servers' 6443 is unreserved_port_t (corenetwork.te.in), so every backend would stay
DOWN on an enforcing host unless this boolean lets haproxy connect to any port."""
INTERFACE_PLACEHOLDER = "__MLCLUSTER_VIP_INTERFACE__"
"""keepalived.conf names the VIP's interface, found on the node unless `cluster.apiVip.interface` says it."""
MARKER = "# mlcluster: cluster.apiVip"
TOP_PRIORITY = 150
FAILING_CHECK_WEIGHT = -50
"""Subtracted while the node's check fails: below every healthy node's priority for up to 50 control planes."""
ADVERT_SECONDS = 1
"""VRRP advertisement interval: a backup takes over 3 adverts + skew (~3.4 s) after the holder goes silent, or at
once when a stopping keepalived sends its priority-0 advert."""
CHECK_INTERVAL_SECONDS = 2
CHECK_FALL = 3
HEALTH_CHECK_INTERVAL = "1s"
"""haproxy's check of each API server: a dead one is out after 2 failed checks. Until then a connection to it fails
after `timeout connect` (1 s: API servers are on the local network) and goes to another one (`redispatch 1`)."""
CONNECTION_TIMEOUT = "1h"
"""Idle timeout of a proxied API connection: watches and `kubectl logs -f` on a quiet pod stay open this long (the API
server ends a watch within 30-60 min itself)."""


def priority(control_planes: tuple[NodeSpec, ...], node: NodeSpec) -> int:
    """The first control plane first: it starts keepalived before the others (the free-address check) and wins the
    first election; the order only matters when several start together."""
    return TOP_PRIORITY - [n.name for n in control_planes].index(node.name)


def _unicast(control_planes: tuple[NodeSpec, ...], node: NodeSpec) -> list[str]:
    """Unicast adverts when every control plane has an IP address: switches that filter multicast (common in
    virtualised and cloud-like networks) then cannot split the group into two holders."""
    if not all(is_ip(n.host) for n in control_planes):
        return []
    peers = [n.host for n in control_planes if n.name != node.name]
    return [f"    unicast_src_ip {node.host}", "    unicast_peer {", *(f"        {p}" for p in peers), "    }"]


def keepalived_conf(cluster: ClusterSpec, control_planes: tuple[NodeSpec, ...], node: NodeSpec) -> str:
    vip = _vip(cluster)
    interface = vip.interface or INTERFACE_PLACEHOLDER
    lines = [
        f"{MARKER} (keepalived.conf of {node.name}; rendered by mlcluster, edits are overwritten)",
        "global_defs {",
        f"    router_id mlcluster-{node.name}",
        "    enable_script_security",
        "    script_user root",
        "}",
        "vrrp_script mlcluster_api {",
        f'    script "{CHECK_SCRIPT}"',
        f"    interval {CHECK_INTERVAL_SECONDS}",
        "    timeout 3",
        f"    fall {CHECK_FALL}",
        "    rise 2",
        f"    weight {FAILING_CHECK_WEIGHT}",
        "}",
        "vrrp_instance mlcluster_api {",
        "    state BACKUP",
        "    nopreempt",
        f"    interface {interface}",
        f"    virtual_router_id {vip.router_id}",
        f"    priority {priority(control_planes, node)}",
        f"    advert_int {ADVERT_SECONDS}",
        *_unicast(control_planes, node),
        "    virtual_ipaddress {",
        f"        {vip.address} dev {interface}",
        "    }",
        "    track_script {",
        "        mlcluster_api",
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def check_script(cluster: ClusterSpec) -> str:
    vip = _vip(cluster)
    return (
        "#!/bin/sh\n"
        f"{MARKER}: keepalived's check. Does this node's haproxy reach a ready API server? (/readyz is readable\n"
        "# without credentials: kubeadm's system:public-info-viewer role. curl by its path: keepalived runs checks\n"
        "# with a minimal environment.)\n"
        "exec /usr/bin/curl --silent --fail --insecure --max-time 2 --output /dev/null"
        f" https://127.0.0.1:{vip.port}/readyz\n"
    )


def haproxy_cfg(cluster: ClusterSpec, control_planes: tuple[NodeSpec, ...]) -> str:
    vip = _vip(cluster)
    servers = [
        f"    server {n.name} {f'[{n.host}]' if ':' in n.host else n.host}:{API_SERVER_PORT} check"
        for n in control_planes
    ]
    lines = [
        f"{MARKER} (haproxy.cfg; rendered by mlcluster, edits are overwritten)",
        # No maxconn: haproxy derives it from the file limit systemd gives it, which a fixed number could exceed
        # (haproxy then refuses to start: "Cannot raise FD limit").
        "global",
        "defaults",
        "    mode tcp",
        "    timeout connect 1s",
        f"    timeout client {CONNECTION_TIMEOUT}",
        f"    timeout server {CONNECTION_TIMEOUT}",
        "    retries 3",
        "    option redispatch 1",
        "frontend mlcluster-api",
        f"    bind *:{vip.port}",
        "    default_backend mlcluster-api",
        "backend mlcluster-api",
        "    balance roundrobin",
        "    option httpchk",
        "    http-check connect ssl",
        "    http-check send meth GET uri /readyz",
        "    http-check expect status 200",
        f"    default-server inter {HEALTH_CHECK_INTERVAL} fall 2 rise 2 verify none",
        *servers,
    ]
    return "\n".join(lines) + "\n"


def api_vip_step(cluster: ClusterSpec, control_planes: tuple[NodeSpec, ...], node: NodeSpec) -> NodeStep:
    vip = _vip(cluster)
    first = control_planes[0].name == node.name
    endpoint = cluster.control_plane_endpoint or ""
    endpoint_name = endpoint.rsplit(":", 1)[0] if endpoint and not is_ip(endpoint.rsplit(":", 1)[0]) else ""
    return rendered_step(
        "api-vip",
        f"Hold the API VIP {vip.ip}:{vip.port} with keepalived and haproxy",
        {
            "NODE_NAME": node.name,
            "VIP_ADDRESS": vip.ip,
            "VIP_PREFIX": str(vip.prefix_length),
            "VIP_PORT": str(vip.port),
            "VIP_INTERFACE": vip.interface or "",
            "FIRST_CONTROL_PLANE": str(first).lower(),
            "ENDPOINT_NAME": endpoint_name,
            "INTERFACE_PLACEHOLDER": INTERFACE_PLACEHOLDER,
            "KEEPALIVED_CONF": keepalived_conf(cluster, control_planes, node),
            "HAPROXY_CFG": haproxy_cfg(cluster, control_planes),
            "CHECK_SCRIPT": check_script(cluster),
            "CHECK_SCRIPT_PATH": CHECK_SCRIPT,
            "LEGACY_CHECK_SCRIPT": LEGACY_CHECK_SCRIPT,
            "SELINUX_BOOLEANS": " ".join(SELINUX_BOOLEANS),
        },
    )


def _vip(cluster: ClusterSpec) -> ApiVipSpec:
    vip = cluster.api_vip
    assert vip is not None, "rendered only for a stack with cluster.apiVip"
    return vip
