"""NVIDIA's Network Operator and its NicClusterPolicy for network.rdma, and what RDMA adds to the multi-node
training pods (the GPU Operator's side, GPUDirect RDMA, is gpu_operator.driver_rdma).

Pure data. The chart installs the operator (and, without the GPU Operator's, Node Feature Discovery); the
NicClusterPolicy, which the chart leaves to the user, names what the operator deploys on the NIC nodes.
"""

from __future__ import annotations

import json
from typing import Any

from ..config.care import UpgradeSpec
from ..config.checks import toleration_of
from ..config.derived import GPU_TAINT, platform_tolerations
from ..config.gpu import GpuOperatorSpec
from ..config.network import NetworkSpec
from ..config.spec import Spec
from ..config.workloads import WorkloadsSpec
from .gpu_operator import NGC_REPOSITORY, driver_wait_selector
from .helm import ChartRelease, tolerating

Manifest = dict[str, Any]

RELEASE = "network-operator"
NIC_CLUSTER_POLICY = "nic-cluster-policy"
"""The operator reconciles only the NicClusterPolicy of this name (one per cluster)."""
NIC_CLUSTER_POLICY_API = "mellanox.com/v1alpha1"
COMPONENT_REPOSITORY = "nvcr.io/nvidia/mellanox"
"""Where the chart's own values take the release's component images from (sriov-network-operator.images)."""
RDMA_SHARED_DEVICE_PLUGIN_IMAGE = "k8s-rdma-shared-dev-plugin"
SRIOV_DEVICE_PLUGIN_IMAGE = "sriov-network-device-plugin"
DOCA_DRIVER_IMAGE = "doca-driver"
IPC_LOCK = "IPC_LOCK"
"""RDMA pins the memory it registers with the NIC: beyond the default locked-memory limit without it."""

CHART_OPERATOR_TOLERATIONS = (
    {"key": "node-role.kubernetes.io/master", "operator": "Equal", "value": "", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
)
"""The chart's operator.tolerations, given again when ours are added: a given list replaces the chart's."""
NFD_CONTROLLERS = ("node-feature-discovery.master", "node-feature-discovery.gc")


def component_version(network: NetworkSpec) -> str:
    """The tag the release's own components carry (the chart's values: network-operator-v<appVersion>)."""
    return f"network-operator-v{network.rdma.version.lstrip('v')}"


def resource_parts(resource_name: str) -> tuple[str, str]:
    prefix, _, name = resource_name.partition("/")
    return prefix, name


def rdma_shared_device_plugin_config(network: NetworkSpec) -> dict[str, Any]:
    """The RDMA shared device plugin's config file: one resource over the declared NICs."""
    rdma = network.rdma
    nics = rdma.nics
    prefix, name = resource_parts(rdma.resource_name)
    selectors = {
        "vendors": list(nics.vendors),
        "deviceIDs": list(nics.device_ids),
        "drivers": list(nics.drivers),
        "ifNames": list(nics.if_names),
    }
    return {
        "configList": [
            {
                "resourceName": name,
                "resourcePrefix": prefix,
                "rdmaHcaMax": rdma.hca_max,
                # An absent selector matches every NIC; an empty list would too, but only given ones say what is meant.
                "selectors": {key: value for key, value in selectors.items() if value},
            }
        ]
    }


def sriov_device_plugin_config(network: NetworkSpec) -> dict[str, Any]:
    """The SR-IOV device plugin's config file: the declared NICs' VFs with their RDMA devices, one per pod."""
    rdma = network.rdma
    nics = rdma.nics
    prefix, name = resource_parts(rdma.resource_name)
    selectors: dict[str, Any] = {
        "vendors": list(nics.vendors),
        "devices": list(nics.device_ids),
        "drivers": list(nics.drivers),
        "pfNames": list(nics.if_names),
    }
    selectors = {key: value for key, value in selectors.items() if value}
    selectors["isRdma"] = True
    return {"resourceList": [{"resourcePrefix": prefix, "resourceName": name, "selectors": selectors}]}


def _image(network: NetworkSpec, image: str, version: str | None = None) -> dict[str, Any]:
    return {"image": image, "repository": COMPONENT_REPOSITORY, "version": version or component_version(network)}


def ofed_driver(network: NetworkSpec, gpu_operator: GpuOperatorSpec, upgrade: UpgradeSpec) -> dict[str, Any]:
    """The DOCA-OFED driver container: probes as NVIDIA's example policy; a driver change waits for the jobs the
    GPU driver's upgrade waits for (driver_wait_selector), then drains the node one at a time."""
    rdma = network.rdma
    return {
        **_image(network, DOCA_DRIVER_IMAGE, rdma.driver_version),
        "startupProbe": {"initialDelaySeconds": 10, "periodSeconds": 10},
        "livenessProbe": {"initialDelaySeconds": 30, "periodSeconds": 30},
        "readinessProbe": {"initialDelaySeconds": 10, "periodSeconds": 30},
        "upgradePolicy": {
            "autoUpgrade": True,
            "maxParallelUpgrades": 1,
            "waitForCompletion": {"podSelector": driver_wait_selector(gpu_operator, upgrade)},
            # Training pods keep /dev/shm in an emptyDir: a drain that refused them would never finish.
            "drain": {"enable": True, "force": False, "deleteEmptyDir": True, "timeoutSeconds": 300},
        },
    }


def nic_cluster_policy(network: NetworkSpec, gpu_operator: GpuOperatorSpec, upgrade: UpgradeSpec) -> Manifest:
    rdma = network.rdma
    body: dict[str, Any] = {
        # The device plugins and the driver run on the GPU nodes, which carry the GPU taint.
        "tolerations": [toleration_of(GPU_TAINT)],
    }
    if rdma.mode == "sriov":
        config = sriov_device_plugin_config(network)
        body["sriovDevicePlugin"] = {**_image(network, SRIOV_DEVICE_PLUGIN_IMAGE), "config": json.dumps(config)}
    else:
        config = rdma_shared_device_plugin_config(network)
        body["rdmaSharedDevicePlugin"] = {
            **_image(network, RDMA_SHARED_DEVICE_PLUGIN_IMAGE),
            "config": json.dumps(config),
        }
    if rdma.driver == "operator":
        body["ofedDriver"] = ofed_driver(network, gpu_operator, upgrade)
    return {
        "apiVersion": NIC_CLUSTER_POLICY_API,
        "kind": "NicClusterPolicy",
        "metadata": {"name": NIC_CLUSTER_POLICY},
        "spec": body,
    }


def network_operator_values(spec: Spec) -> dict[str, Any]:
    # The GPU Operator's NFD already labels NVIDIA NICs (PCI class 02, by vendor): a second NFD would fight it.
    # The chart's NodeFeatureRule (its pci-15b3.present label) still goes in, on the GPU Operator's NFD CRDs.
    own_nfd = not spec.gpu_operator.enabled
    values: dict[str, Any] = {"nfd": {"enabled": own_nfd, "deployNodeFeatureRules": True}}
    extra = platform_tolerations(spec)
    if extra:
        values = tolerating(values, ["operator.tolerations"], [*CHART_OPERATOR_TOLERATIONS, *extra])
        if own_nfd:
            values = tolerating(values, [f"{c}.tolerations" for c in NFD_CONTROLLERS], extra)
    return values


def network_operator_release(spec: Spec) -> ChartRelease:
    rdma = spec.network.rdma
    return ChartRelease(
        name=RELEASE,
        chart="network-operator",
        repository=NGC_REPOSITORY,
        version=rdma.version,
        namespace=rdma.namespace,
        values=network_operator_values(spec),
        timeout_seconds=rdma.timeout_minutes * 60,
        upstream_chart="network-operator",
    )


# --- what RDMA adds to the other layers -----------------------------------------------------------------------


def rdma_requested(network: NetworkSpec, workloads: WorkloadsSpec) -> bool:
    """Whether the stack's training pods ask for an RDMA device: only a run over several nodes talks over it."""
    return network.rdma.enabled and workloads.training.num_nodes > 1


def rdma_device(network: NetworkSpec) -> dict[str, int]:
    """The RDMA device a pod that talks over the fabric requests (as a limit: devices are never overcommitted)."""
    return {network.rdma.resource_name: 1} if network.rdma.enabled else {}


def rdma_security_context(network: NetworkSpec) -> dict[str, Any]:
    """What a container that talks over RDMA needs beside the device: IPC_LOCK to pin the memory it registers (every
    RDMA pod of the Network Operator's examples adds it: Mellanox/network-operator example/rdma-test-pod1.yml)."""
    return {"securityContext": {"capabilities": {"add": [IPC_LOCK]}}} if network.rdma.enabled else {}


def rdma_limits(network: NetworkSpec, workloads: WorkloadsSpec) -> dict[str, int]:
    """The RDMA device a multi-node training pod requests."""
    return rdma_device(network) if rdma_requested(network, workloads) else {}


def rdma_container_patch(network: NetworkSpec, workloads: WorkloadsSpec) -> dict[str, Any]:
    """What a multi-node training container needs beside the device."""
    return rdma_security_context(network) if rdma_requested(network, workloads) else {}
