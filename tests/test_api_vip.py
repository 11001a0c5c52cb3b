"""cluster.apiVip: what the stack refuses (one case each), the kubeadm documents with the VIP, and keepalived.conf and
haproxy.cfg as the real programs read them (both are installed for the fleet: .ci/os-packages fleet)."""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config.load import spec_from_values
from components.config.schema import ConfigError
from components.config.spec import Spec
from components.render import api_vip, kubeadm

from .test_config_validation import HOST_KEY

VIP = "198.18.7.250/24"


def ha_values(**vip: Any) -> dict[str, Any]:
    nodes = [
        {"name": f"cp-{i}", "host": f"198.18.7.{10 + i}", "roles": ["control-plane"], "hostKey": HOST_KEY}
        for i in (1, 2, 3)
    ]
    nodes.append({"name": "w-1", "host": "198.18.7.21", "roles": ["worker"], "hostKey": HOST_KEY})
    return {
        "kubernetesVersion": "1.34.2",
        "cluster": {"mode": "kubeadm", "name": "lab", "apiVip": {"address": VIP, **vip}},
        "ssh": {"user": "root", "privateKey": "PRIVATE-KEY-TEXT"},
        "nodes": nodes,
    }


def parse(values: dict[str, Any]) -> Spec:
    return spec_from_values(values, lambda key: key == "ssh")


def errors_of(values: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse(values)
    return [str(p).removeprefix("mlcluster:") for p in info.value.problems.errors]


def _set(values: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(values)
    *parents, last = path.split(".")
    target: Any = changed
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    if value is _DROP:
        del target[int(last) if last.isdigit() else last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return changed


_DROP = object()

REFUSALS = [
    ("one control plane", "nodes", [ha_values()["nodes"][0], ha_values()["nodes"][3]], "cluster.apiVip.address"),
    ("no prefix length", "cluster.apiVip.address", "198.18.7.250", "cluster.apiVip.address"),
    ("not an address", "cluster.apiVip.address", "api.lab/24", "cluster.apiVip.address"),
    ("IPv6", "cluster.apiVip.address", "fd00::250/64", "cluster.apiVip.address"),
    ("network address", "cluster.apiVip.address", "198.18.7.0/24", "cluster.apiVip.address"),
    ("broadcast address", "cluster.apiVip.address", "198.18.7.255/24", "cluster.apiVip.address"),
    ("a node's address", "cluster.apiVip.address", "198.18.7.11/24", "cluster.apiVip.address"),
    ("control plane outside the subnet", "nodes.1.host", "198.18.9.12", "nodes[1].host"),
    ("the API servers' port", "cluster.apiVip.port", 6443, "cluster.apiVip.port"),
    ("a NodePort", "cluster.apiVip.port", 30080, "cluster.apiVip.port"),
    ("router id 0", "cluster.apiVip.routerId", 0, "cluster.apiVip.routerId"),
    ("router id 256", "cluster.apiVip.routerId", 256, "cluster.apiVip.routerId"),
    ("interface name too long", "cluster.apiVip.interface", "enp0s31f6-bond-vlan100", "cluster.apiVip.interface"),
    ("interface with a slash", "cluster.apiVip.interface", "eth0/1", "cluster.apiVip.interface"),
    ("endpoint at another IP", "cluster.controlPlaneEndpoint", "198.18.7.249:8443", "cluster.controlPlaneEndpoint"),
    (
        "endpoint on another port",
        "cluster.controlPlaneEndpoint",
        "api.lab.example:6443",
        "cluster.controlPlaneEndpoint",
    ),
]


@pytest.mark.parametrize(("case", "path", "value", "key"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refused(case: str, path: str, value: Any, key: str) -> None:
    errors = errors_of(_set(ha_values(), path, value))
    assert any(e.startswith(key) for e in errors), errors


def test_refusals_are_reported_together() -> None:
    values = _set(_set(ha_values(), "cluster.apiVip.port", 6443), "nodes.2.host", "10.1.1.1")
    errors = errors_of(values)
    assert {e.split(":")[0] for e in errors} >= {"cluster.apiVip.port", "nodes[2].host"}, errors


def test_without_vip_or_endpoint_the_error_names_both_ways() -> None:
    values = _set(ha_values(), "cluster.apiVip", _DROP)
    (error,) = [e for e in errors_of(values) if e.startswith("cluster.controlPlaneEndpoint")]
    assert "cluster.apiVip" in error


def test_a_dns_endpoint_for_the_vip_is_accepted() -> None:
    spec = parse(_set(ha_values(), "cluster.controlPlaneEndpoint", "api.lab.example"))
    assert kubeadm.api_endpoint(spec.cluster, spec.control_planes) == "api.lab.example:8443"
    step = api_vip.api_vip_step(spec.cluster, spec.control_planes, spec.control_planes[0])
    assert step.settings["ENDPOINT_NAME"] == "api.lab.example"


def test_init_and_join_documents_use_the_vip() -> None:
    spec = parse(ha_values())
    init, cluster, _ = kubeadm.init_documents(spec, spec.control_planes[0])
    assert cluster["controlPlaneEndpoint"] == "198.18.7.250:8443"
    assert "198.18.7.250" in cluster["apiServer"]["certSANs"]
    assert init["localAPIEndpoint"] == {"bindPort": 6443, "advertiseAddress": "198.18.7.11"}
    for node in spec.nodes[1:]:
        join = kubeadm.join_document(spec, node)
        assert join["discovery"]["bootstrapToken"]["apiServerEndpoint"] == "198.18.7.250:8443"


def test_keepalived_conf_per_control_plane() -> None:
    spec = parse(ha_values())
    confs = {n.name: api_vip.keepalived_conf(spec.cluster, spec.control_planes, n) for n in spec.control_planes}
    assert [api_vip.priority(spec.control_planes, n) for n in spec.control_planes] == [150, 149, 148]
    cp2 = confs["cp-2"]
    assert "unicast_src_ip 198.18.7.12" in cp2
    peers = cp2.split("unicast_peer {")[1].split("}")[0].split()
    assert peers == ["198.18.7.11", "198.18.7.13"]
    assert f"{VIP} dev {api_vip.INTERFACE_PLACEHOLDER}" in cp2
    assert "nopreempt" in cp2 and "state BACKUP" in cp2
    assert len({c.replace(n, "") for n, c in confs.items()}) == 3  # priorities and peers differ
    # A DNS-named control plane: multicast adverts (keepalived's peers must be addresses).
    named = parse(_set(ha_values(), "nodes.2.host", "cp-3.lab.example"))
    assert "unicast_peer" not in api_vip.keepalived_conf(named.cluster, named.control_planes, named.control_planes[0])


def test_haproxy_balances_the_ready_api_servers() -> None:
    spec = parse(ha_values(port=9443))
    cfg = api_vip.haproxy_cfg(spec.cluster, spec.control_planes)
    assert "    bind *:9443" in cfg
    assert [line.split()[1:3] for line in cfg.splitlines() if line.startswith("    server ")] == [
        ["cp-1", "198.18.7.11:6443"],
        ["cp-2", "198.18.7.12:6443"],
        ["cp-3", "198.18.7.13:6443"],
    ]
    assert "http-check send meth GET uri /readyz" in cfg
    assert "https://127.0.0.1:9443/readyz" in api_vip.check_script(spec.cluster)


def _real(tool: str) -> str:
    path = shutil.which(tool) or f"/usr/sbin/{tool}"
    if not Path(path).exists():
        pytest.fail(f"{tool} is not installed: bash .ci/os-packages fleet installs it (the fleet runs it for real)")
    return path


@pytest.mark.fleet  # the fleet's OS packages (keepalived, haproxy), root and a network namespace: `make test`
def test_haproxy_reads_the_rendered_config(tmp_path: Path) -> None:
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(api_vip.haproxy_cfg(parse(ha_values()).cluster, parse(ha_values()).control_planes))
    checked = subprocess.run([_real("haproxy"), "-c", "-f", str(cfg)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    broken = tmp_path / "broken.cfg"
    broken.write_text(cfg.read_text().replace("balance roundrobin", "balance nosuchalgorithm"))
    refused = subprocess.run([_real("haproxy"), "-c", "-f", str(broken)], capture_output=True, text=True, check=False)
    assert refused.returncode != 0  # the control: the check reads the file


def _keepalived_test(conf: Path) -> subprocess.CompletedProcess[str]:
    """`keepalived -t` in a network namespace of its own with the interface the config names (keepalived checks it
    exists and is no loopback): root, as the fleet needs anyway."""
    script = (
        f"ip link add vip0 type veth peer name vip1 && ip link set vip0 up && exec {_real('keepalived')} -t -f {conf}"
    )
    return subprocess.run(["unshare", "--net", "bash", "-c", script], capture_output=True, text=True, check=False)


@pytest.mark.fleet
def test_keepalived_reads_the_rendered_config(tmp_path: Path) -> None:
    spec = parse(ha_values(interface="vip0"))
    conf = tmp_path / "keepalived.conf"
    script = tmp_path / "check.sh"
    script.write_text(api_vip.check_script(spec.cluster))
    script.chmod(0o755)
    conf.write_text(
        api_vip.keepalived_conf(spec.cluster, spec.control_planes, spec.control_planes[1]).replace(
            api_vip.CHECK_SCRIPT, str(script)
        )
    )
    checked = _keepalived_test(conf)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    broken = tmp_path / "broken.conf"
    broken.write_text(conf.read_text().replace("virtual_router_id 51", "virtual_router_id 300"))
    refused = _keepalived_test(broken)
    assert refused.returncode != 0, refused.stdout + refused.stderr


def test_the_step_carries_each_file() -> None:
    spec = parse(ha_values())
    step = api_vip.api_vip_step(spec.cluster, spec.control_planes, spec.control_planes[0])
    assert step.settings["FIRST_CONTROL_PLANE"] == "true"
    assert (
        api_vip.api_vip_step(spec.cluster, spec.control_planes, spec.control_planes[1]).settings["FIRST_CONTROL_PLANE"]
        == "false"
    )
    assert step.settings["HAPROXY_CFG"] == api_vip.haproxy_cfg(spec.cluster, spec.control_planes)


def test_program_wires_the_vip_step_between_preparation_and_kubeadm(run_stack) -> None:
    values = ha_values()
    values["ssh"]["privateKey"] = "PRIVATE-KEY-TEXT"
    run = run_stack(values=values, secret=["ssh"])
    vip_steps = sorted(r.name for r in run.resources if r.name.endswith("-api-vip"))
    assert vip_steps == ["cp-1-api-vip", "cp-2-api-vip", "cp-3-api-vip"]  # control planes only
    component = run.of_type("mlcluster:api_vip:ApiVip")[0]
    assert {run.named(n).parent for n in vip_steps} == {component.urn}
    assert run.urn_of("cp-1-prepare") in run.named("cp-1-api-vip").depends_on
    for name in ("cp-2", "cp-3"):
        # After the first control plane's (which checks the address is free), and after its own preparation.
        assert run.urn_of("cp-1-api-vip") in run.named(f"{name}-api-vip").depends_on
        assert run.urn_of(f"{name}-prepare") in run.named(f"{name}-api-vip").depends_on
        assert run.urn_of(f"{name}-api-vip") in run.named(f"{name}-kubeadm-join").depends_on
    assert run.urn_of("cp-1-api-vip") in run.named("cp-1-kubeadm-init").depends_on
    assert run.urn_of("w-1-prepare") in run.named("w-1-kubeadm-join").depends_on


def test_without_vip_no_step(run_stack) -> None:
    values = ha_values()
    values["cluster"] = {"mode": "kubeadm", "name": "lab", "controlPlaneEndpoint": "api.lab.example:6443"}
    run = run_stack(values=values, secret=["ssh"])
    assert not [r for r in run.resources if r.name.endswith("-api-vip")]


def test_the_onprem_examples_commented_vip_is_valid() -> None:
    """What the on-prem stack's comment offers a reader without a load balancer, applied as it says."""
    from components.config.load import spec_from_values

    from .conftest import stack_values

    values, secret = stack_values("onprem")
    text = (Path(__file__).parent.parent / "stacks" / "Pulumi.onprem.yaml").read_text()
    offered = next(line for line in text.splitlines() if line.strip().startswith("#   apiVip:"))
    vip = yaml.safe_load(offered.strip().removeprefix("#").split("#")[0])["apiVip"]
    cluster = {k: v for k, v in values["cluster"].items() if k != "controlPlaneEndpoint"}
    values = {**values, "cluster": {**cluster, "apiVip": vip}}
    spec = spec_from_values(values, lambda key: key in secret)
    assert kubeadm.api_endpoint(spec.cluster, spec.control_planes) == f"{vip['address'].split('/')[0]}:8443"


@functools.cache
def _installation_crd() -> dict[str, Any]:
    from .upstream import UPSTREAM

    path = UPSTREAM / "charts" / "tigera-operator" / "v3.30.3" / "crds" / "operator.tigera.io_installations_crd.yaml"
    return dict(yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))


@pytest.mark.parametrize("with_vip", [True, False])
def test_with_a_vip_calico_and_the_kubelet_take_the_nodes_own_address(with_vip: bool) -> None:
    """Calico's default IP autodetection (`firstFound`) can pick the keepalived VIP as a control plane's address
    (projectcalico/calico #5094, #5346): with apiVip, the Installation reads the Node's InternalIP, which the kubelet
    registers as the node's own address."""
    from components.render.cni import cni_release

    from .upstream import custom_resource_errors

    values = ha_values()
    if not with_vip:
        values["cluster"] = {"mode": "kubeadm", "name": "lab", "controlPlaneEndpoint": "198.18.7.200"}
    spec = parse(values)
    network = cni_release(spec.cluster).values["installation"]["calicoNetwork"]
    assert ("nodeAddressAutodetectionV4" in network) == with_vip
    if with_vip:
        assert network["nodeAddressAutodetectionV4"] == {"kubernetes": "NodeInternalIP"}
    installation = {
        "apiVersion": "operator.tigera.io/v1",
        "kind": "Installation",
        "metadata": {"name": "default"},
        "spec": {"calicoNetwork": network},
    }
    assert custom_resource_errors(installation, _installation_crd(), "installations") == []
    for node in spec.nodes:
        registration = kubeadm.node_registration(
            spec.kueue, spec.nodes, node, pin_node_ip=spec.cluster.api_vip is not None
        )
        pinned = [a["value"] for a in registration.get("kubeletExtraArgs", []) if a["name"] == "node-ip"]
        assert pinned == ([node.host] if with_vip else []), node.name
