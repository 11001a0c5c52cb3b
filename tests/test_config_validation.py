"""Validation rules, one data-driven case each: a mutation of a valid config and the line it must produce."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from components.config.load import spec_from_values
from components.config.schema import ConfigError, Secret

from .conftest import stack_values

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG1sY2x1c3Rlci10ZXN0LWhvc3Qta2V5LTAwMDAwMDAw"


def base() -> dict[str, Any]:
    return {
        "kubernetesVersion": "1.34.2",
        "cluster": {"mode": "kubeadm", "name": "lab"},
        "ssh": {"user": "ubuntu", "privateKey": "PRIVATE-KEY-TEXT"},
        "nodes": [
            {"name": "cp-1", "host": "198.18.0.10", "roles": ["control-plane"], "hostKey": HOST_KEY},
            {"name": "w-1", "host": "198.18.0.11", "roles": ["worker"], "hostKey": HOST_KEY},
            {
                "name": "gpu-1",
                "host": "gpu-1.lab.example",
                "roles": ["worker"],
                "hostKey": HOST_KEY,
                "gpu": {"count": 8, "model": "H100-SXM-80GB"},
            },
        ],
    }


def parse(values: dict[str, Any], secret: tuple[str, ...] = ("ssh",)) -> Any:
    return spec_from_values(values, lambda key: key in secret)


def errors_of(values: dict[str, Any], secret: tuple[str, ...] = ("ssh",)) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse(values, secret)
    return [str(p) for p in info.value.problems.errors]


def test_base_config_is_valid() -> None:
    spec = parse(base())
    assert [n.name for n in spec.control_planes] == ["cp-1"]
    assert isinstance(spec.ssh.private_key, Secret)
    assert "PRIVATE-KEY-TEXT" not in repr(spec)


def test_example_stacks_are_valid() -> None:
    for stack in ("onprem", "cloud"):
        values, secret = stack_values(stack)
        spec = spec_from_values(values, lambda key, s=secret: key in s)  # type: ignore[misc]
        assert spec.cluster.mode == ("kubeadm" if stack == "onprem" else "existing")


def set_path(values: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    target: Any = values
    for part in parents:
        target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
    if last.isdigit():
        target[int(last)] = value
    else:
        target[last] = value


def mutate(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda values: set_path(values, path, value)


def delete(path: str) -> Callable[[dict[str, Any]], None]:
    def apply(values: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = values
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        del target[last]

    return apply


def two_control_planes(values: dict[str, Any]) -> None:
    values["nodes"][1]["roles"] = ["control-plane"]


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "ssh key or agent",
        delete("ssh.privateKey"),
        "mlcluster:ssh.privateKey: is required when cluster.mode is kubeadm, unless ssh.agent is true (the SSH"
        " agent's keys)",
    ),
    (
        "ssh key and agent",
        mutate("ssh.agent", True),
        "mlcluster:ssh.agent: cannot be true with ssh.privateKey set: authenticate with one of them (remove the key to"
        " use the agent)",
    ),
    ("type: integer", mutate("ssh.port", "twenty-two"), 'mlcluster:ssh.port: must be an integer, got "twenty-two"'),
    ("type: list", mutate("nodes.0.roles", "control-plane"), "mlcluster:nodes[0].roles: must be a list"),
    ("type: map", mutate("kubelet", 5), "mlcluster:kubelet: must be a map, got 5"),
    (
        "range",
        mutate("kubelet.imageGCHighThresholdPercent", 150),
        "mlcluster:kubelet.imageGCHighThresholdPercent: 150 must be between 0 and 100",
    ),
    (
        "threshold order",
        mutate("kubelet.imageGCLowThresholdPercent", 85),
        "mlcluster:kubelet.imageGCLowThresholdPercent: (85) must be lower than imageGCHighThresholdPercent (80)",
    ),
    (
        "cidr syntax",
        mutate("cluster.podCidr", "10.244.0.0/33"),
        'mlcluster:cluster.podCidr: "10.244.0.0/33" is not a CIDR',
    ),
    (
        "cidr overlap",
        mutate("cluster.serviceCidr", "10.244.128.0/20"),
        'mlcluster:cluster.serviceCidr: "10.244.128.0/20" overlaps podCidr "10.244.0.0/16"',
    ),
    (
        "ip syntax",
        mutate("nodes.1.host", "10.0.0.300"),
        'mlcluster:nodes[1].host: "10.0.0.300" is not an IP address or DNS name',
    ),
    ("dns syntax", mutate("nodes.1.host", "bad_host!.lab"), 'mlcluster:nodes[1].host: "bad_host!.lab" is not an IP'),
    (
        "endpoint syntax",
        mutate("cluster.controlPlaneEndpoint", "vip.lab:99999"),
        'mlcluster:cluster.controlPlaneEndpoint: "vip.lab:99999" has a port outside 1-65535',
    ),
    (
        "duplicate name",
        mutate("nodes.1.name", "cp-1"),
        'mlcluster:nodes[1].name: "cp-1" is already used by nodes[0]',
    ),
    (
        "duplicate host",
        mutate("nodes.2.host", "198.18.0.11"),
        'mlcluster:nodes[2].host: "198.18.0.11" is already used by nodes[1]',
    ),
    (
        "no control plane",
        mutate("nodes.0.roles", ["worker"]),
        "mlcluster:nodes: has no control-plane node",
    ),
    (
        "HA without endpoint",
        two_control_planes,
        "mlcluster:cluster.controlPlaneEndpoint: is required with 2 control-plane nodes",
    ),
    (
        "a GPU label mlcluster sets from another setting",
        mutate("nodes.2.labels", {"nvidia.com/device-plugin.config": "time-slicing-4"}),
        "mlcluster:nodes[2].labels: sets 'nvidia.com/device-plugin.config', which mlcluster sets from"
        " gpu.timeSlicingReplicas: set that instead",
    ),
    (
        "the acceptance quarantine's taint declared on a node",
        mutate("nodes.1.taints", ["mlcluster.io/acceptance=failed:NoSchedule"]),
        "mlcluster:nodes[1].taints[0]: uses mlcluster.io/acceptance, the acceptance quarantine's taint, which mlcluster"
        " sets and lifts from the acceptance verdicts: use another key",
    ),
    (
        "GPU setting on a node without GPU",
        mutate("nodes.1.labels", {"nvidia.com/mig.config": "all-1g.10gb"}),
        "mlcluster:nodes[1].labels: sets GPU label 'nvidia.com/mig.config' on a node with no gpu section",
    ),
    (
        "node label the kubelet may not self-apply",
        mutate("nodes.1.labels", {"node-role.kubernetes.io/worker": ""}),
        "mlcluster:nodes[1].labels: has label 'node-role.kubernetes.io/worker', which the kubelet may not set on its"
        " own node",
    ),
    (
        "unknown key with hint",
        mutate("nodes.2.gpu.modle", "H100"),
        'mlcluster:nodes[2].gpu.modle: unknown key (did you mean "model"?)',
    ),
    ("unknown top-level key", mutate("kubelett", {}), 'mlcluster:kubelett: unknown key (did you mean "kubelet"?)'),
    (
        "enum with hint",
        mutate("cluster.mode", "kubeam"),
        'mlcluster:cluster.mode: "kubeam" must be one of "kubeadm", "existing" (did you mean "kubeadm"?)',
    ),
    ("required key", delete("nodes.1.host"), "mlcluster:nodes[1].host: is required"),
    ("host key pinned", delete("nodes.1.hostKey"), "mlcluster:nodes[1].hostKey: is required (pin the SSH host key"),
    ("host key syntax", mutate("nodes.1.hostKey", "AAAA"), 'mlcluster:nodes[1].hostKey: "AAAA" is not an SSH public'),
    ("duration", mutate("kubelet.imagePullProgressDeadline", "30 minutes"), "is not a duration such as 30m"),
    ("version", mutate("kubernetesVersion", "latest"), 'mlcluster:kubernetesVersion: "latest" is not a Kubernetes'),
    ("chart pin", mutate("kueue.version", "latest"), 'mlcluster:kueue.version: "latest" is not a pinned chart version'),
    ("taint syntax", mutate("nodes.1.taints", ["dedicated"]), "mlcluster:nodes[1].taints: "),
    ("image disk: one source", mutate("nodes.2.imageDisk", {}), "mlcluster:nodes[2].imageDisk: needs exactly one of"),
    ("image disk: device path", mutate("nodes.2.imageDisk", {"device": "nvme1n1"}), "is not a block device path"),
    ("kubeadm needs nodes", mutate("nodes", []), "mlcluster:nodes: must list at least one node"),
    ("existing needs kubeconfig", mutate("cluster.mode", "existing"), "mlcluster:cluster.kubeconfig: is required"),
    ("nfs needs a server", mutate("storage", {"provisioner": "nfs"}), "mlcluster:storage.nfsServer: is required"),
    # A wrong value is shown as the stack file spells it (YAML's flow style), not as Python writes it.
    ("bool shown as YAML", mutate("ssh.agent", [True]), "mlcluster:ssh.agent: must be true or false, got [true]"),
    ("null shown as YAML", mutate("ssh.agent", None), "mlcluster:ssh.agent: must be true or false, got null"),
    (
        "map shown as YAML",
        mutate("ssh.port", {"port": 22, "open": False}),
        'mlcluster:ssh.port: must be an integer, got {"port": 22, "open": false}',
    ),
    (
        "a long list is cut short",
        mutate("ssh.port", list(range(100))),
        "mlcluster:ssh.port: must be an integer, got [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,"
        " 18, 19, 20, 21, …",
    ),
]


@pytest.mark.parametrize(("rule", "change", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rule(rule: str, change: Callable[[dict[str, Any]], None], expected: str) -> None:
    values = base()
    change(values)
    errors = errors_of(values)
    assert any(expected in e for e in errors), f"{rule}: {expected!r} not in {errors}"


def test_plaintext_secret_is_refused() -> None:
    errors = errors_of(base(), secret=())
    assert any(
        e.startswith("mlcluster:ssh.privateKey: must be set as a secret: pulumi config set --secret") for e in errors
    ), errors


def test_existing_mode_plaintext_kubeconfig_is_refused() -> None:
    values = {"cluster": {"mode": "existing", "kubeconfig": "apiVersion: v1"}}
    errors = errors_of(values, secret=())
    assert any(e.startswith("mlcluster:cluster.kubeconfig: must be set as a secret") for e in errors), errors


def test_every_problem_is_reported_in_one_pass() -> None:
    independent = [
        "type: integer",
        "range",
        "cidr syntax",
        "ip syntax",
        "duplicate name",
        "unknown key with hint",
        "unknown top-level key",
        "enum with hint",
        "duration",
        "chart pin",
        "taint syntax",
    ]
    values = base()
    expected = []
    for rule, change, line in CASES:
        if rule in independent:
            change(values)
            expected.append(line)
    errors = errors_of(values)
    assert len(expected) == len(independent)
    for line in expected:
        assert any(line in e for e in errors), f"{line!r} missing from one-pass report {errors}"
    assert all(e.startswith("mlcluster:") for e in errors)


def test_report_has_no_traceback_and_no_secret() -> None:
    values = copy.deepcopy(base())
    values["ssh"]["port"] = "x"
    with pytest.raises(ConfigError) as info:
        parse(values)
    report = info.value.report()
    assert report.startswith("invalid configuration (1 problem(s)):")
    assert "Traceback" not in report and "PRIVATE-KEY-TEXT" not in report


def test_a_mistyped_secret_is_not_echoed() -> None:
    values = base()
    values["ssh"]["privateKey"] = {"key": "PRIVATE-KEY-TEXT"}
    errors = errors_of(values)
    assert "mlcluster:ssh.privateKey: must be a string, got something else" in errors
    assert not any("PRIVATE-KEY-TEXT" in e for e in errors)


def test_the_ssh_agent_instead_of_a_key_leaves_no_key_in_any_connection(run_stack) -> None:
    values = base()
    values["ssh"] = {"user": "ubuntu", "agent": True}
    spec = parse(values, secret=())
    assert spec.ssh.agent and spec.ssh.private_key is None
    run = run_stack("agent", values=values, secret=[])
    connections = [r.raw_inputs["connection"] for r in run.resources if "connection" in r.raw_inputs]
    assert len(connections) > 10 and all("privateKey" not in c and c["user"] == "ubuntu" for c in connections)
