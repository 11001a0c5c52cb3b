"""Existing clusters: provider-aware defaults, kubeconfig from config or a StackReference, the two-stack split."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pulumi.runtime import mocks as pulumi_mocks

from components.config.nodes import GPU_MODEL_LABEL
from components.config.providers import END, START, cluster_defaults, defaults_table
from components.config.schema import ConfigError
from components.plan.engine import SECRET, PreviewMocks

from .conftest import PROJECT, load_spec, stack_values

COMMAND = "command:remote:Command"
RELEASE = "kubernetes:helm.sh/v3:Release"
ML_LAYERS = {
    "mlcluster:gpu_operator:GpuOperator": {"gpu-operator"},
    "mlcluster:kueue:Kueue": {"kueue"},
    "mlcluster:serving:Serving": {"cert-manager", "kserve-crd", "kserve-resources"},
    "mlcluster:training:Training": {"kubeflow-trainer"},
}
REFERENCED_KUBECONFIG = "apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: referenced-stack-token}}]\n"


def test_docs_table_is_generated_from_the_defaults() -> None:
    page = (PROJECT / "docs" / "cloud.md").read_text()
    current = page[page.index(START) + len(START) : page.index(END)].strip("\n")
    assert current == defaults_table().strip("\n"), "docs/cloud.md is stale: run `make docs`"
    assert cluster_defaults("kubeadm").gpu_node_label == GPU_MODEL_LABEL


def existing(provider: str, **gpu: Any) -> tuple[dict[str, Any], list[str]]:
    values = {
        "cluster": {"mode": "existing", "provider": provider, "kubeconfig": "apiVersion: v1"},
        "gpuOperator": dict(gpu),
    }
    return values, ["cluster"]


# (provider, gpuOperator settings, operator driver.enabled, a CNI release); kubeadm clusters decide the
# driver from the GPU preflight on the nodes, not from provider defaults.
DRIVER_CASES = [
    ("generic", {}, True, False),
    ("gke", {}, False, False),
    ("eks", {}, False, False),
    ("aks", {}, False, False),
    ("gke", {"driver": "operator"}, True, False),
    ("generic", {"driver": "preinstalled"}, False, False),
]


@pytest.mark.parametrize(("where", "gpu", "driver_enabled", "cni"), DRIVER_CASES)
def test_provider_defaults_reach_the_releases(run_stack, where, gpu, driver_enabled, cni) -> None:
    values, secret = existing(where, **gpu)
    run = run_stack("defaults", values=values, secret=secret)
    releases = {r.raw_inputs["name"]: r for r in run.of_type(RELEASE)}
    assert releases["gpu-operator"].raw_inputs["values"]["driver"]["enabled"] is driver_enabled
    assert ("tigera-operator" in releases) is cni


def test_cloud_stack_plans_no_node_resource_and_every_ml_layer(run_stack) -> None:
    run = run_stack("cloud")
    types = {r.type for r in run.resources}
    assert COMMAND not in types
    assert not [r for r in run.resources if "kubeadm" in r.type.lower() or "kubeadm" in r.name]
    assert not [r for r in run.resources if r.type.startswith("command:")]
    releases = {r.raw_inputs["name"]: r for r in run.of_type(RELEASE)}
    by_urn = {r.urn: r for r in run.resources}
    for layer, names in ML_LAYERS.items():
        assert layer in types, f"{layer} missing from the cloud plan"
        for name in names:
            assert by_urn[releases[name].parent].type == layer, name
    assert "tigera-operator" not in releases, "a managed cluster brings its own CNI"
    provider = run.of_type("pulumi:providers:kubernetes")[0]
    assert provider.inputs["kubeconfig"] == SECRET


class StackReferenceMocks(PreviewMocks):
    """Preview mocks where a referenced stack has exported its kubeconfig (as a secret output)."""

    def __init__(self) -> None:
        self.references: list[str] = []

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == "pulumi:pulumi:StackReference":
            self.references.append(args.inputs["name"])
            outputs = {"kubeconfig": REFERENCED_KUBECONFIG}
            return args.name, {"name": args.inputs["name"], "outputs": outputs, "secretOutputNames": ["kubeconfig"]}
        return super().new_resource(args)


def test_platform_stack_reads_the_kubeconfig_from_the_cluster_stack(run_stack) -> None:
    mocks = StackReferenceMocks()
    run = run_stack("platform", mocks=mocks)
    assert mocks.references == ["acme/mlcluster-nodes/onprem"]
    assert not [r for r in run.resources if r.type.startswith("command:")]
    provider = run.of_type("pulumi:providers:kubernetes")[0]
    assert provider.inputs["kubeconfig"] == SECRET
    assert provider.raw_inputs["kubeconfig"] == REFERENCED_KUBECONFIG
    assert run.run.outputs["kubeconfig"].secret
    layers = {r.type for r in run.resources}
    assert set(ML_LAYERS) | {"mlcluster:storage:Storage"} <= layers
    for release in run.of_type(RELEASE):
        assert release.options["provider"].startswith(provider.urn), release.name


CLUSTER_SECTIONS = {"kubernetesVersion", "cluster", "ssh", "nodes", "kubelet", "containerd"}


def test_cluster_stack_of_the_split_holds_nodes_and_cni_only(run_stack) -> None:
    values, secret = stack_values("onprem")
    # Every platform section off: layers by their `enabled` switch, anything else (example workloads) left out.
    for section in set(values) - CLUSTER_SECTIONS:
        if isinstance(values[section], dict) and "enabled" in values[section]:
            values[section] = {"enabled": False}
        else:
            del values[section]
    run = run_stack("nodes", values=values, secret=secret)
    assert [r.raw_inputs["name"] for r in run.of_type(RELEASE)] == ["tigera-operator"]
    assert run.of_type(COMMAND)
    assert run.run.outputs["kubeconfig"].secret


# (change to a valid existing-mode config, the error line it must produce)
VALIDATION_CASES = [
    ({"kubeconfigFrom": "nodes/onprem"}, 'mlcluster:cluster.kubeconfigFrom: "nodes/onprem" is not'),
    ({"kubeconfigFrom": "acme/nodes/on prem"}, "is not a stack name of the form organization/project/stack"),
    ({"kubeconfigFrom": "acme/a/b/c"}, "is not a stack name of the form organization/project/stack"),
    ({"kubeconfigFrom": "acme/nodes/prod", "kubeconfig": "x"}, "mlcluster:cluster.kubeconfigFrom: is set together"),
    ({"kubeconfigFrom": None, "kubeconfig": None}, "mlcluster:cluster.kubeconfig: is required when mode is existing"),
    ({"mode": "kubeadm"}, "mlcluster:cluster.kubeconfigFrom: has no effect when cluster.mode is kubeadm"),
]


@pytest.mark.parametrize(("change", "expected"), VALIDATION_CASES)
def test_kubeconfig_source_validation(change: dict[str, Any], expected: str) -> None:
    values: dict[str, Any] = {"cluster": {"mode": "existing", "kubeconfigFrom": "acme/mlcluster-nodes/onprem"}}
    load_spec(copy.deepcopy(values), [])  # the base is valid
    for key, value in change.items():
        if value is None:
            values["cluster"].pop(key, None)
        else:
            values["cluster"][key] = value
    with pytest.raises(ConfigError) as info:
        load_spec(values, ["cluster"])
    errors = [str(p) for p in info.value.problems.errors]
    assert any(expected in e for e in errors), errors


@pytest.mark.parametrize(("provider", "default"), [("gke", False), ("aks", False), ("eks", True), ("generic", True)])
def test_storage_is_the_default_class_only_where_the_provider_has_none(provider: str, default: bool) -> None:
    """GKE and AKS bring a default StorageClass: ours is installed beside it, not as a second default (whose claims
    without a class Kubernetes would give to the newest default), and validation says so."""
    from components.render.storage import storage_release

    values, secret = stack_values("cloud")
    values = copy.deepcopy(values)
    values["cluster"]["provider"] = provider
    values["storage"] = {"enabled": True, "provisioner": "local-path"}
    spec = load_spec(values, secret)
    assert storage_release(spec).values["storageClass"]["defaultClass"] is default
    kubeadm = load_spec(*stack_values("onprem"))
    assert storage_release(kubeadm).values["storageClass"]["defaultClass"] is True
