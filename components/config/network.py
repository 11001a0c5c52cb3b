"""Fast networking for multi-node training: RDMA through NVIDIA's Network Operator (off by default).

The stack declares which NICs carry RDMA once for the cluster, as selectors the device plugins themselves take
(interface names, PCI vendor and device ids, kernel drivers): a NIC the selectors match on a node is advertised
there as the RDMA resource, and a node without one simply has none of it (docs/network.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from . import checks
from .schema import Problems, join_path, setting

NETWORK_OPERATOR_VERSION = "26.4.1"
DEFAULT_RDMA_RESOURCE = "rdma/rdma_shared_device_a"
"""The shared device plugin's resource in NVIDIA's examples (resourcePrefix `rdma`, resourceName as here)."""
RDMA_HCA_MAX_UPSTREAM = 63
"""rdmaHcaMax in NVIDIA's NicClusterPolicy examples: how many pods of a node may hold the resource at once."""

_IF_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,14}", re.ASCII)
_PCI_ID = re.compile(r"[0-9a-f]{4}", re.ASCII)
_DRIVER = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.ASCII)
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
_RESERVED_DOMAINS = ("kubernetes.io", "k8s.io")
_IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}", re.ASCII)
_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", re.ASCII)


def interface_name(value: str) -> str | None:
    """A Linux network interface name: the kernel takes at most 15 bytes, no '/', ':' or whitespace."""
    return None if _IF_NAME.fullmatch(value) else "is not a network interface name (at most 15 letters, digits, _.-)"


def pci_id(value: str) -> str | None:
    """A PCI vendor or device id as lspci -n prints it (four lowercase hex digits, e.g. 15b3, 101b)."""
    return None if _PCI_ID.fullmatch(value) else "is not a PCI id: four lowercase hex digits such as 15b3 or 101b"


def kernel_driver(value: str) -> str | None:
    return None if _DRIVER.fullmatch(value) else "is not a kernel driver name such as mlx5_core"


def extended_resource_name(value: str) -> str | None:
    """A device plugin's extended resource as the API validates one: `<domain>/<name>`, the domain a DNS-1123
    subdomain and not Kubernetes' own, the name a qualified-name part; and not the GPUs' resource."""
    prefix, slash, name = value.partition("/")
    if not slash or len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix):
        return "is not an extended resource name: <domain>/<name>, e.g. rdma/rdma_shared_device_a"
    if any(prefix == p or prefix.endswith("." + p) for p in _RESERVED_DOMAINS) or prefix.startswith("requests."):
        return f"uses {prefix!r}, a domain Kubernetes keeps for its own resources"
    if not _QUALIFIED_NAME.fullmatch(name):
        return "has a name part that is not a qualified name (at most 63 letters, digits, '-', '_' or '.')"
    if prefix == "nvidia.com" and (name == "gpu" or name.startswith("mig-")):
        return "is the GPUs' own resource: RDMA needs a name of its own"
    return None


def image_tag(value: str) -> str | None:
    return None if _IMAGE_TAG.fullmatch(value) else "is not an image tag such as doca3.4.1-26.04-1.1.0.0-1"


@dataclass(frozen=True)
class NicSelectorSpec:
    """The RDMA NICs, as the device plugins' selectors take them: a NIC is chosen when it matches every list given."""

    if_names: tuple[str, ...] = setting(
        (),
        doc="Interface names of the RDMA NICs (PFs), e.g. [ibp24s0, ibp64s0] (rdmaSharedDevicePlugin ifNames;"
        " SR-IOV: the PFs whose VFs are advertised, pfNames).",
        check=checks.each(interface_name),
    )
    vendors: tuple[str, ...] = setting(
        (), doc="PCI vendor ids, e.g. [15b3] (NVIDIA/Mellanox).", check=checks.each(pci_id)
    )
    device_ids: tuple[str, ...] = setting(
        (),
        doc="PCI device ids (lspci -nn), e.g. [1021] for ConnectX-7; with mode `sriov` the VFs' ids (e.g. 101e).",
        check=checks.each(pci_id),
    )
    drivers: tuple[str, ...] = setting((), doc="Kernel drivers, e.g. [mlx5_core].", check=checks.each(kernel_driver))

    @property
    def declared(self) -> bool:
        return bool(self.if_names or self.vendors or self.device_ids or self.drivers)


@dataclass(frozen=True)
class RdmaSpec:
    enabled: bool = setting(
        False,
        doc="Install NVIDIA's Network Operator and advertise the declared NICs' RDMA devices to pods; the multi-node"
        " training workloads then request one (docs/network.md).",
    )
    version: str = setting(
        NETWORK_OPERATOR_VERSION, doc="network-operator chart version.", check=checks.pinned_chart_version
    )
    namespace: str = setting("nvidia-network-operator", doc="Namespace of the release.", check=checks.k8s_name)
    mode: Literal["sharedDevicePlugin", "sriov"] = setting(
        "sharedDevicePlugin",
        doc="`sharedDevicePlugin`: the RDMA shared device plugin lets up to `hcaMax` pods per node share its NICs"
        " (no per-pod isolation, nothing to prepare on the NICs). `sriov`: the SR-IOV device plugin advertises the"
        " NICs' virtual functions, one per pod (the VFs must exist: created by the site).",
    )
    link_type: Literal["infiniband", "roce"] = setting(
        "infiniband",
        doc="The RDMA fabric: `infiniband`. `roce` (RDMA over Ethernet) is refused: the shared device plugin's RoCE"
        " setups (NVIDIA's and Red Hat's examples) give each pod a secondary network (a MacvlanNetwork or SR-IOV"
        " network through Multus) that mlcluster does not create yet.",
    )
    nics: NicSelectorSpec = setting(
        default_factory=NicSelectorSpec, doc="Which NICs carry RDMA, on every node that has them."
    )
    resource_name: str = setting(
        DEFAULT_RDMA_RESOURCE,
        doc="Extended resource the NICs are advertised as and the training pods request (<domain>/<name>).",
        check=extended_resource_name,
    )
    hca_max: int = setting(
        RDMA_HCA_MAX_UPSTREAM,
        doc="Mode `sharedDevicePlugin`: pods of a node that may hold the RDMA resource at once (rdmaHcaMax).",
        check=checks.between(1, 1000),
    )
    driver: Literal["host", "operator"] = setting(
        "host",
        doc="Who provides the NIC driver (MOFED/DOCA-OFED): `host`, installed on each server by the site (the GPU"
        " Operator then uses the host's MOFED for GPUDirect RDMA); `operator`, the operator's DOCA-OFED driver"
        " container, which replaces the inbox driver and reloads the NICs' modules.",
    )
    driver_version: str = setting(
        "doca3.4.1-26.04-1.1.0.0-1",
        doc="DOCA-OFED driver container version (driver `operator`), from NVIDIA's NicClusterPolicy for this release.",
        check=image_tag,
    )
    timeout_minutes: int = setting(
        15, doc="How long `up` waits for the operator's release to be ready.", check=checks.between(5, 240)
    )

    def validate(self, path: str, problems: Problems) -> None:
        if not self.enabled:
            return
        if self.link_type == "roce":
            problems.error(
                join_path(path, "linkType"),
                "roce is not supported yet: RoCE pods need a secondary network (the Network Operator's"
                " MacvlanNetwork or an SR-IOV network through Multus) beside the RDMA device, which mlcluster does not"
                " create; without it NCCL finds no RoCE address and falls back to sockets. Use InfiniBand, or bring"
                " the secondary network and the training pods' network annotations yourself (rdma.enabled: false)",
            )
        nics = join_path(path, "nics")
        if not self.nics.declared:
            problems.error(
                nics,
                "declares no NIC: set ifNames (e.g. [ibp24s0, ibp64s0]), deviceIds, vendors or drivers, so that only"
                " the RDMA NICs are advertised (not the management NIC)",
            )
        elif self.mode == "sriov" and not (self.nics.if_names or self.nics.device_ids):
            problems.error(
                nics,
                "needs ifNames (the PFs whose VFs are advertised) or deviceIds (the VFs' PCI device ids) with mode"
                " sriov: vendors and drivers alone would also match the PFs themselves",
            )


@dataclass(frozen=True)
class NetworkSpec:
    rdma: RdmaSpec = setting(default_factory=RdmaSpec, doc="RDMA (InfiniBand) for multi-node training.")
