"""Hostile input, round 3: the settings added for the VIP, topology, labels and taints, the gateway and acceptance,
each checked as the component behind it reads it. One table per class; every row is a targeted change to the on-prem
example, the key path the refusal must name, a fragment of its message, and the upstream rule it follows.

Each refusal comes from validation (not a renderer), in the one report, with the key path; the offline plans of the
example stacks are unchanged by these rules (test_example_stacks_still_pass).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from components.config import checks
from components.config.load import spec_from_values
from components.config.schema import QUOTE_LIMIT, ConfigError, Problem, Problems

from .conftest import stack_values

Change = Callable[[dict[str, Any]], None]
Row = tuple[str, Change, str, str, str]
"""(case, change to the on-prem example, key path, message fragment, the upstream rule)."""


def _set(path: str, value: Any) -> Change:
    def change(values: dict[str, Any]) -> None:
        target: Any = values
        parts = path.split(".")
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
        last = parts[-1]
        if last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return change


def _vip(address: str, **more: Any) -> Change:
    """The example behind a VIP instead of its load balancer."""

    def change(values: dict[str, Any]) -> None:
        values["cluster"].pop("controlPlaneEndpoint", None)
        values["cluster"]["apiVip"] = {"address": address, **more}

    return change


def _both(*changes: Change) -> Change:
    def change(values: dict[str, Any]) -> None:
        for one in changes:
            one(values)

    return change


GPU = 3  # nodes[3] is gpu-1 in the on-prem example
CP = 0

ADDRESSES: list[Row] = [
    ("VIP /0", _vip("10.20.0.100/0"), "cluster.apiVip.address", "has prefix /0", "keepalived: on-link route"),
    ("VIP /31", _vip("10.20.0.100/31"), "cluster.apiVip.address", "has prefix /31", "room for VIP + 2 CPs"),
    (
        "VIP dotted netmask",
        _vip("10.20.0.100/255.255.255.0"),
        "cluster.apiVip.address",
        "give the prefix length as a number",
        "one spelling (ipaddress reads both)",
    ),
    ("VIP zero-padded prefix", _vip("10.20.0.100/024"), "cluster.apiVip.address", "as '024'", "one spelling"),
    (
        "VIP as IPv4-mapped IPv6",
        _vip("::ffff:10.20.0.100/24"),
        "cluster.apiVip.address",
        "IPv4-mapped IPv6",
        "RFC 4291 2.5.5.2",
    ),
    (
        "node host as IPv4-mapped IPv6 of the VIP",
        _both(_vip("10.20.0.100/24"), _set(f"nodes.{GPU}.host", "::ffff:10.20.0.100")),
        f"nodes[{GPU}].host",
        "IPv4-mapped IPv6 address: write the IPv4 address 10.20.0.100",
        "RFC 4291 2.5.5.2",
    ),
    (
        "bastion host as IPv4-mapped IPv6",
        _set("ssh.bastion", {"host": "::ffff:10.20.0.5", "hostKey": "x"}),
        "ssh.bastion.host",
        "IPv4-mapped IPv6",
        "RFC 4291 2.5.5.2",
    ),
    (
        "bastion is the VIP",
        _both(
            _vip("10.20.0.100/24"),
            _set("ssh.bastion", {"host": "10.20.0.100"}),
            _set("cluster.apiAddress", "10.20.0.100:8443"),
        ),
        "ssh.bastion.host",
        "is cluster.apiVip's address",
        "VRRP moves the VIP",
    ),
    (
        "pod CIDR holds the nodes",
        _set("cluster.podCidr", "10.20.0.0/16"),
        "cluster.podCidr",
        "contains nodes[0].host 10.20.0.11",
        "kubeadm podSubnet must not overlap the hosts",
    ),
    (
        "service CIDR holds the VIP's subnet",
        _both(_vip("10.96.0.100/24"), *[_set(f"nodes.{i}.host", f"10.96.0.{11 + i}") for i in range(3)]),
        "cluster.serviceCidr",
        "overlaps the control planes' subnet 10.96.0.0/24",
        "kubeadm serviceSubnet",
    ),
    (
        "pod and service CIDRs overlap",
        _set("cluster.serviceCidr", "10.244.128.0/17"),
        "cluster.serviceCidr",
        "overlaps cluster.podCidr",
        "kubeadm: disjoint networks",
    ),
    (
        "one node host in two spellings",
        _both(_set(f"nodes.{CP}.host", "2001:db8::11"), _set(f"nodes.{CP + 1}.host", "2001:DB8:0::11")),
        f"nodes[{CP + 1}].host",
        "is already used by nodes[0]",
        "one address, one node",
    ),
]

PORTS: list[Row] = [
    (f"haproxy on {port} ({what})", _vip("10.20.0.100/24", port=port), "cluster.apiVip.port", f"{port} is", what)
    for port, what in [
        (2381, "etcd metrics, kubeadm EtcdMetricsPort"),
        (10248, "kubelet healthz, kubeadm KubeletHealthzPort"),
        (10249, "kube-proxy metrics, ports.go ProxyStatusPort"),
        (179, "Calico BGP, Calico network requirements"),
        (5473, "Calico Typha, Calico network requirements"),
        (9099, "Calico Felix health, FelixConfiguration HealthPort"),
        (9100, "node-exporter, prometheus-node-exporter values"),
        (6443, "API server, kubeadm KubeAPIServerPort"),
        (22, "SSH, ssh.port"),
    ]
]

LABELS: list[Row] = [
    (
        "uppercase label prefix",
        _set(f"nodes.{GPU}.labels", {"Example.com/pool": "gpu"}),
        f"nodes[{GPU}].labels",
        "invalid label key",
        "apimachinery IsQualifiedName: DNS-1123 subdomain prefix",
    ),
    (
        "empty label prefix",
        _set(f"nodes.{GPU}.labels", {"/pool": "gpu"}),
        f"nodes[{GPU}].labels",
        "invalid label key",
        "apimachinery IsQualifiedName: prefix part must be non-empty",
    ),
    (
        "reserved prefix in another case",
        _set(f"nodes.{GPU}.labels", {"Node-Role.Kubernetes.IO/gpu": "x"}),
        f"nodes[{GPU}].labels",
        "invalid label key",
        "apimachinery IsQualifiedName (lowercase prefix)",
    ),
    (
        "taint key with an uppercase prefix",
        _set(f"nodes.{GPU}.taints", ["Example.com/x=y:NoSchedule"]),
        f"nodes[{GPU}].taints",
        "is not a taint",
        "apimachinery IsQualifiedName for taint keys",
    ),
    (
        "a topology level on the GPU model label",
        _set("kueue.topology.nodeLabels", {"rack": "mlcluster.io/gpu-model"}),
        "kueue.topology.nodeLabels.rack",
        "a label mlcluster sets from nodes[].gpu.model",
        "the GPU flavor's nodeLabels",
    ),
    (
        "the GPU model label set by hand",
        _set(f"nodes.{GPU}.labels", {"mlcluster.io/gpu-model": "A100"}),
        f"nodes[{GPU}].labels",
        "which mlcluster sets from nodes[].gpu.model",
        "one writer per label",
    ),
    (
        "a user label on a topology level's key",
        _set(f"nodes.{GPU}.labels", {"topology.mlcluster.io/rack": "r99"}),
        f"nodes[{GPU}].labels.topology.mlcluster.io/rack",
        "is the node label of topology level rack",
        "one writer per label",
    ),
    (
        "YAML 1.1 octal as a topology domain",
        _set(f"nodes.{GPU}.topology", {"block": "b1", "rack": 8}),
        f"nodes[{GPU}].topology.rack",
        "is the number 8 in YAML",
        "YAML 1.1 int (010 is 8)",
    ),
    (
        "a number as a label value",
        _set(f"nodes.{GPU}.labels", {"mlcluster.io/pool": 1000.0}),
        f"nodes[{GPU}].labels.mlcluster.io/pool",
        "in YAML",
        "YAML 1.1 float (1e3 is 1000.0)",
    ),
    (
        "a number in an inventory's node labels",
        _both(
            _set("kueue.inventory", [{"model": "L4-24GB", "count": 4, "nodeLabels": {"pool": 7}}]),
        ),
        "kueue.inventory[0].nodeLabels.pool",
        "in YAML",
        "YAML retyping",
    ),
    (
        "two taints of one key and effect",
        _set(f"nodes.{GPU}.taints", ["example.com/x=1:NoSchedule", "example.com/x=2:NoSchedule"]),
        f"nodes[{GPU}].taints[1]",
        "like taints[0]: a node takes one",
        "core validation validateNodeTaints: unique by key and effect",
    ),
    (
        "the control-plane taint with a value",
        _set(f"nodes.{CP}.taints", ["node-role.kubernetes.io/control-plane=yes:NoSchedule"]),
        f"nodes[{CP}].taints[0]",
        "kubeadm registers it without one",
        "kubeadm constants ControlPlaneTaint",
    ),
    (
        "a lifecycle taint declared",
        _set(f"nodes.{GPU}.taints", ["node.kubernetes.io/unschedulable:NoSchedule"]),
        f"nodes[{GPU}].taints[0]",
        "a taint the cluster sets and lifts",
        "k8s.io/api core/v1 well_known_taints.go",
    ),
    (
        "not-ready declared",
        _set(f"nodes.{GPU}.taints", ["node.kubernetes.io/not-ready:NoExecute"]),
        f"nodes[{GPU}].taints[0]",
        "a taint the cluster sets and lifts",
        "k8s.io/api core/v1 well_known_taints.go",
    ),
    (
        "hostname label naming another node",
        _set(f"nodes.{GPU}.labels", {"kubernetes.io/hostname": "gpu-2"}),
        f"nodes[{GPU}].labels.kubernetes.io/hostname",
        "is not this node's name",
        "kubelet registers kubernetes.io/hostname",
    ),
]

LIMITS: list[Row] = [
    (
        "16 levels plus the hostname level",
        _set("kueue.topology.levels", [f"l{i}" for i in range(16)]),
        "kueue.topology.levels",
        "makes 17 levels",
        "Kueue Topology CRD levels maxItems 16",
    ),
    (
        "a sub-nanosecond Kueue timeout",
        _set("kueue.waitForPodsReady", {"timeout": "0.5ns"}),
        "kueue.waitForPodsReady.timeout",
        "not a whole number of nanoseconds",
        "Go time.Duration int64 ns",
    ),
    (
        "a zero Kueue timeout",
        _set("kueue.waitForPodsReady", {"timeout": "0s"}),
        "kueue.waitForPodsReady.timeout",
        "must be longer than 0",
        "Kueue pkg/config/validation.go v0.19.2 L278",
    ),
    (
        "a fractional-nanosecond kubelet duration",
        _set("kubelet.imagePullProgressDeadline", "1.5ns"),
        "kubelet.imagePullProgressDeadline",
        "not a whole number of nanoseconds",
        "Go time.Duration",
    ),
    (
        "a mirror CA that is not PEM",
        _set("images.mirrors.0.ca", "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----"),
        "images.mirrors[0].ca",
        "is not a PEM certificate",
        "RFC 7468",
    ),
    (
        "a mirror CA with a private key beside it",
        _set(
            "images.mirrors.0.ca",
            "-----BEGIN PRIVATE KEY-----\nMIIEvQ==\n-----END PRIVATE KEY-----\n",
        ),
        "images.mirrors[0].ca",
        "is not a PEM certificate",
        "RFC 7468",
    ),
    (
        "an eviction threshold over 100%",
        _set("kubelet.evictionHard", {"imagefs.available": "150%"}),
        "kubelet.evictionHard",
        "at most 100%",
        "kubelet eviction helpers.go parseThresholdStatement",
    ),
]

GATEWAY: list[Row] = [
    (
        f"gateway domain {domain!r}",
        _set("kserve.gateway", {"enabled": True, "domain": domain}),
        "kserve.gateway.domain",
        fragment,
        "Gateway API v1.6.1 HTTPRoute hostnames pattern",
    )
    for domain, fragment in [
        ("Models.Example.com", "not a Gateway API hostname"),
        ("models.example.com.", "not a Gateway API hostname"),
        ("10.20.0.50", "is an IP address"),
        ("*.example.com", "not a Gateway API hostname"),
        ("a" * 250 + ".com", "not a Gateway API hostname"),
    ]
] + [
    (
        "an endpoint host over 253 characters",
        _set("kserve.gateway", {"enabled": True, "domain": ".".join(["d" * 60] * 4)}),
        "kserve.endpoints[0].name",
        "Gateway API takes at most 253",
        "Gateway API hostname maxLength 253",
    ),
    (
        "a header route on Authorization",
        _both(
            _set("kserve.endpoints.0.versions", [{"name": "v1", "weight": 100}]),
            _set("kserve.endpoints.0.headerRoutes", [{"header": "Authorization", "value": "x", "version": "v1"}]),
        ),
        "kserve.endpoints[0].headerRoutes[0].header",
        "carries a credential",
        "RFC 9110 11.6.2",
    ),
    (
        "a header route value that is a bearer token",
        _both(
            _set("kserve.endpoints.0.versions", [{"name": "v1", "weight": 100}]),
            _set(
                "kserve.endpoints.0.headerRoutes",
                [
                    {
                        "header": "x-model",
                        "value": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
                        "version": "v1",
                    }
                ],
            ),
        ),
        "kserve.endpoints[0].headerRoutes[0].value",
        "looks like a credential",
        "RFC 6750",
    ),
]

NAMESPACES: list[Row] = [
    (
        "acceptance in a team's namespace",
        _set("acceptance", {"enabled": True, "namespace": "vision"}),
        "acceptance.namespace",
        "is also kueue.teams[1]'s namespace",
        "the acceptance queue sits outside the cohort",
    ),
    (
        "acceptance in the serving namespace",
        _set("acceptance", {"enabled": True, "namespace": "models"}),
        "acceptance.namespace",
        "kserve.endpoints[0].namespace",
        "tests' cleanup",
    ),
    (
        "acceptance in a platform namespace",
        _set("acceptance", {"enabled": True, "namespace": "kueue-system"}),
        "acceptance.namespace",
        "kueue.namespace",
        "tests' cleanup",
    ),
]

FLOOR = {"test": "all-reduce", "gbps": 40, "fabric": "tcp"}
FREE_TEXT: list[Row] = [
    (
        "a 1 MB floor source",
        _set("acceptance", {"enabled": True, "floors": [{**FLOOR, "source": "x" * 1_100_000}]}),
        "acceptance.floors[0].source",
        "at most 200",
        "ConfigMap 1 MiB object limit",
    ),
    (
        "a private key as a floor source",
        _set(
            "acceptance",
            {"enabled": True, "floors": [{**FLOOR, "source": "-----BEGIN OPENSSH PRIVATE KEY----- b3Blbn"}]},
        ),
        "acceptance.floors[0].source",
        "looks like it holds a credential",
        "copied into a ConfigMap per node",
    ),
    (
        "a multi-line floor source",
        _set("acceptance", {"enabled": True, "floors": [{**FLOOR, "source": "line one\nline two"}]}),
        "acceptance.floors[0].source",
        "control character",
        "one line",
    ),
]

TABLES = {
    "addresses": ADDRESSES,
    "ports": PORTS,
    "labels": LABELS,
    "limits": LIMITS,
    "gateway": GATEWAY,
    "namespaces": NAMESPACES,
    "free text": FREE_TEXT,
}
ROWS = [(table, *row) for table, rows in TABLES.items() for row in rows]


def report_of(change: Change) -> list[str]:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    change(values)
    with pytest.raises(ConfigError) as info:
        spec_from_values(values, lambda key: key in secret)
    return info.value.report().splitlines()[1:]


@pytest.mark.parametrize(
    ("table", "case", "change", "path", "fragment", "rule"), ROWS, ids=[f"{r[0]}: {r[1]}" for r in ROWS]
)
def test_each_class_is_refused_by_its_key(  # noqa: PLR0917
    table: str, case: str, change: Change, path: str, fragment: str, rule: str
) -> None:
    lines = report_of(change)
    wanted = f"  - mlcluster:{path}"
    named = [line for line in lines if line.startswith(wanted)]
    assert named, f"{case} ({rule}): nothing at {path}:\n" + "\n".join(lines)
    assert any(fragment in line for line in named), f"{case} ({rule}):\n" + "\n".join(named)
    assert all(len(line) < 2000 for line in lines), "a report line quotes too much"


def test_example_stacks_still_pass() -> None:
    for stack in ("onprem", "cloud", "lab", "platform"):
        values, secret = stack_values(stack)
        spec_from_values(values, lambda key, secret=secret: key in secret)


@pytest.mark.parametrize(
    ("address", "ok"),
    [
        ("10.20.0.100/24", True),
        ("10.20.0.100/8", True),
        ("10.20.0.101/30", True),
        ("10.20.0.100/7", False),
        ("10.20.0.100/+24", False),
        ("10.20.0.100/ 24", False),
        ("10.020.0.100/24", False),
        ("10.20.0.100", False),
    ],
)
def test_the_vip_is_parsed_once_and_written_one_way(address: str, ok: bool) -> None:
    from components.config.api_vip import vip_problem

    assert (vip_problem(address) is None) == ok, vip_problem(address)


def test_a_value_is_quoted_shortened_and_a_repeated_problem_said_once() -> None:
    long = "v" * 1_100_000
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    for node in values["nodes"]:
        node["labels"] = {"example.com/note": long}
    with pytest.raises(ConfigError) as info:
        spec_from_values(values, lambda key: key in secret)
    report = info.value.report()
    assert len(report) < 5_000, len(report)
    (line,) = [x for x in report.splitlines() if "example.com/note" in x or "nodes[0].labels" in x]
    assert "(also nodes[1].labels" in line and "more)" in line, line
    assert f"({len(long)} characters)" in line


@pytest.mark.parametrize("value", ["x" * (QUOTE_LIMIT + 1), "y" * 5000])
def test_quotes_are_cut_at_the_limit(value: str) -> None:
    shown = str(Problem("a", f"has {value!r}"))
    assert len(shown) < QUOTE_LIMIT + 80 and f"({len(value)} characters)" in shown


def test_the_report_groups_only_identical_problems() -> None:
    problems = Problems()
    problems.error("a", "one")
    problems.error("b", "two")
    problems.error("c", "one")
    assert ConfigError(problems).report().splitlines()[1:] == ["  - mlcluster:a (also c): one", "  - mlcluster:b: two"]


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("image x --password hunter2", "hunter2"),
        ("image x --api-key=abcdef123", "abcdef123"),
        ("image x --token 'abc123456'", "abc123456"),
    ],
)
def test_credentials_given_as_flags_are_redacted(text: str, hidden: str) -> None:
    assert hidden not in str(Problem("images.prepull[0].images[0].image", f"{text!r} is not an image reference"))


def test_free_text_is_bounded_and_credential_free() -> None:
    assert checks.free_text("NVIDIA DGX H100 user guide, NCCL all_reduce_perf, 2025") is None
    assert checks.free_text("a" * (checks.FREE_TEXT_MAX + 1))
    assert checks.free_text("token=abcdef0123456789")
