"""Rendered kubeadm, kubelet and containerd configs validate against the upstream schemas."""

from __future__ import annotations

import tomllib

import pytest
import yaml

from components.render import kubeadm
from components.render.containerd import containerd_config_toml
from components.render.kubelet import kubelet_configuration

from .conftest import load_spec, stack_values
from .upstream import containerd_errors, kubeadm_errors, kubelet_errors


@pytest.fixture(scope="module")
def spec():
    values, secret = stack_values("onprem")
    return load_spec(values, secret)


def test_init_documents_validate(spec) -> None:
    documents = list(yaml.safe_load_all(kubeadm.init_config(spec, spec.control_planes[0])))
    init, cluster, kubelet = documents
    assert kubeadm_errors(init) == [] and kubeadm_errors(cluster) == [] and kubelet_errors(kubelet) == []
    assert cluster["controlPlaneEndpoint"] == "k8s-api.ml.example.internal:6443"


@pytest.mark.parametrize("index", range(1, 9))
def test_join_documents_validate(spec, index) -> None:
    node = spec.nodes[index]
    document = yaml.safe_load(kubeadm.join_config(spec, node))
    assert kubeadm_errors(document) == []
    assert ("controlPlane" in document) == node.is_control_plane


def test_schema_check_can_fail(spec) -> None:
    document = yaml.safe_load(kubeadm.join_config(spec, spec.nodes[3]))
    document["nodeRegistration"]["kubeletExtraArgs"] = {"node-labels": "a=b"}  # v1beta3 form, a map
    document["discoveryy"] = {}
    errors = kubeadm_errors(document)
    assert any("discoveryy" in e for e in errors) and any("kubeletExtraArgs" in e for e in errors)
    bad_kubelet = {**kubelet_configuration(spec.kubelet, (1, 34)), "imagePullProgressDeadline": "30m"}
    assert any("imagePullProgressDeadline" in e for e in kubelet_errors(bad_kubelet))


@pytest.mark.parametrize(("line", "version"), [("1.6", 2), ("1.7", 2), ("2", 3)])
def test_containerd_config_parses_and_uses_known_keys(spec, line, version) -> None:
    document = tomllib.loads(containerd_config_toml(spec.kubelet, spec.images, line))
    assert document["version"] == version
    assert containerd_errors(document, version) == []
    assert document["imports"] == ["/etc/containerd/conf.d/*.toml"]
