"""The fleet itself: it fails (never skips) where it cannot run, and its stubs reject what the real tools reject."""

from __future__ import annotations

import re
import sys

import pytest

from .hosts import STUBS, Fleet, FleetUnavailable, HostSpec

pytestmark = pytest.mark.fleet


def test_the_fleet_fails_instead_of_skipping_without_root(monkeypatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(FleetUnavailable, match="not root"), Fleet.running([HostSpec("h")]):
        pass


CONFIG = "/etc/kubernetes/kubeadm.yaml"
"""In the host's own /etc overlay: no other host or run shares it."""


def kubeadm(host, *args: str, config: str = ""):
    if config:
        host.run(f"mkdir -p /etc/kubernetes && cat > /etc/kubernetes/kubeadm.yaml <<'EOF'\n{config}\nEOF")
    return host.run(f"{sys.executable} -s {STUBS / 'kubeadm.py'} kubeadm {' '.join(args)}", check=False)


INIT = """apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration: {name: h}
localAPIEndpoint: {advertiseAddress: 198.18.0.10, bindPort: 6443}"""


@pytest.mark.parametrize(
    ("config", "error"),
    [
        (INIT.replace("bindPort: 6443", "bindPort: 6443, bindAddress: x"), "Additional properties"),
        (INIT.replace("v1beta4", "v1beta3"), 'no kind "InitConfiguration" is registered for version'),
        (
            INIT + "\n---\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHigh: 80",
            "KubeletConfiguration",
        ),
    ],
    ids=["unknown field", "wrong apiVersion", "unknown kubelet field"],
)
def test_kubeadm_stub_rejects_what_kubeadm_rejects(fleet, config, error) -> None:
    host = fleet(HostSpec("h"))["h"]
    result = kubeadm(host, "init", "--config", CONFIG, config=config)
    assert result.returncode == 1 and error in result.stderr, result.stderr
    assert not host.exists("/etc/kubernetes/admin.conf")


def make_ready_for_kubeadm(host) -> None:
    """What the preparation steps leave behind, without running them."""
    (host.state_dir / "db.json").write_text(
        '{"swap": false, "sysctl": {"net.ipv4.ip_forward": "1"}, "packages": {"kubelet": "1.34.2-1.1"},'
        ' "services": {"containerd": {"active": true}}}'
    )
    host.run("mkdir -p /sys/module/br_netfilter")


def test_the_stub_kubelet_refuses_labels_it_may_not_self_apply(fleet) -> None:
    host = fleet(HostSpec("h"))["h"]
    make_ready_for_kubeadm(host)
    labelled = INIT.replace(
        "nodeRegistration: {name: h}",
        "nodeRegistration: {name: h, kubeletExtraArgs: [{name: node-labels, value: node-role.kubernetes.io/gpu=}]}",
    )
    result = kubeadm(host, "init", "--config", CONFIG, config=labelled)
    assert result.returncode == 1 and "unknown 'kubernetes.io' or 'k8s.io' labels" in result.stderr, result.stderr


def test_kubeadm_stub_checks_preflight_then_prints_join_commands_in_kubeadms_format(fleet) -> None:
    host = fleet(HostSpec("h"))["h"]
    refused = kubeadm(host, "init", "--config", CONFIG, config=INIT)
    assert "[ERROR Swap]" in refused.stderr and "[ERROR CRI]" in refused.stderr and "br_netfilter" in refused.stderr
    make_ready_for_kubeadm(host)
    assert kubeadm(host, "init", "--config", CONFIG, "--upload-certs").returncode == 0
    join = kubeadm(host, "token", "create", "--print-join-command").stdout
    assert re.fullmatch(
        r"kubeadm join 198\.18\.0\.10:6443 --token [a-z0-9]{6}\.[a-z0-9]{16} "
        r"--discovery-token-ca-cert-hash sha256:[0-9a-f]{64} \n",
        join,
    ), join
    upload = kubeadm(host, "init", "phase", "upload-certs", "--upload-certs").stdout.splitlines()
    assert upload[-2] == "[upload-certs] Using certificate key:" and re.fullmatch("[0-9a-f]{64}", upload[-1])
