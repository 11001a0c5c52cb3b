"""ApiVip: keepalived and haproxy on each control plane of a stack with `cluster.apiVip`, before kubeadm init/join.

The first control plane's step runs first (it checks that no other machine holds the address yet); the others
follow it, each after its own preparation. What waits for a control plane's preparation (init, join) waits for its
step here instead.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
from pulumi_command import remote

from ..config.spec import Spec
from ..render.api_vip import api_vip_step
from .node_command import step_command


class ApiVip(pulumi.ComponentResource):
    steps: dict[str, remote.Command]

    def __init__(
        self, spec: Spec, prepared: Mapping[str, pulumi.Resource], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mlcluster:api_vip:ApiVip", spec.cluster.name, None, opts)
        first, *others = spec.control_planes
        self.steps = {}
        for node in (first, *others):
            after = [prepared[node.name]] + ([self.steps[first.name]] if node is not first else [])
            self.steps[node.name] = step_command(
                f"{node.name}-api-vip",
                spec,
                node,
                api_vip_step(spec.cluster, spec.control_planes, node),
                parent=self,
                depends_on=after,
            )
        self.register_outputs({})
