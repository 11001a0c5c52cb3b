"""NetworkOperator: NVIDIA's Network Operator and the NicClusterPolicy that puts RDMA on the declared NICs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.spec import Spec
from ..render.network import network_operator_release, nic_cluster_policy
from .platform_layer import PlatformLayer


class NetworkOperator(PlatformLayer):
    type_token = "mlcluster:network:NetworkOperator"
    layer_name = "network-operator"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        self.release = self.chart(network_operator_release(spec))
        # After the release: its CRDs, and the operator that reconciles the policy.
        self.policy = self.manifest(nic_cluster_policy(spec.network, spec.gpu_operator, spec.upgrade), [self.release])
        return {"status": self.release.status, "rdmaResource": spec.network.rdma.resource_name}
