"""FirstControlPlane: `kubeadm init` (protected) and the admin kubeconfig as a secret output."""

from __future__ import annotations

import pulumi

from .config.spec import NodeSpec, Spec
from .node_command import step_command
from .render.node_steps import admin_kubeconfig_step, init_step


class FirstControlPlane(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]

    def __init__(
        self, spec: Spec, node: NodeSpec, prepared: pulumi.Resource, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mlcluster:control_plane:FirstControlPlane", node.name, None, opts)
        # Protected: deleting this resource would mean a destroyed cluster; `pulumi destroy` must refuse.
        self.init = step_command(
            f"{node.name}-kubeadm-init",
            spec,
            node,
            init_step(spec, node),
            parent=self,
            depends_on=[prepared],
            protect=True,
        )
        self.kubeconfig_step = step_command(
            f"{node.name}-admin-kubeconfig",
            spec,
            node,
            admin_kubeconfig_step(),
            parent=self,
            depends_on=[self.init],
            # New SSH settings (user, port, key, host key, bastion) reach the same admin.conf: re-reading it
            # would make the provider's kubeconfig unknown in the preview and show every release replaced.
            ignore_changes=["connection"],
        )
        self.kubeconfig = pulumi.Output.secret(self.kubeconfig_step.stdout)
        self.register_outputs({"kubeconfig": self.kubeconfig})
