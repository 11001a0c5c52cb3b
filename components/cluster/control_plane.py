"""FirstControlPlane: `kubeadm init` (protected) and the admin kubeconfig as a secret output.

The kubeconfig is read once the first control plane's certificates step ran (components/cluster/certificates.py), which
needs init first: `read_kubeconfig` adds it.
"""

from __future__ import annotations

import pulumi

from ..config.nodes import NodeSpec
from ..config.spec import Spec
from ..render.node_steps import admin_kubeconfig_step, init_step
from .node_command import step_command


class FirstControlPlane(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]

    def __init__(
        self,
        spec: Spec,
        node: NodeSpec,
        prepared: pulumi.Resource,
        checked: pulumi.Output[object],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`checked`: resolves once the stack's control planes are known to follow the last deployment's (it fails
        the program otherwise); the init step is decided only then."""
        super().__init__("mlcluster:control_plane:FirstControlPlane", node.name, None, opts)
        self.spec, self.node = spec, node
        # Protected: deleting this resource would mean a destroyed cluster; `pulumi destroy` must refuse.
        self.init = step_command(
            f"{node.name}-kubeadm-init",
            spec,
            node,
            init_step(spec, node),
            parent=self,
            depends_on=[prepared],
            protect=True,
            rendered=checked.apply(lambda _: init_step(spec, node)),
        )

    def read_kubeconfig(self, after: pulumi.Resource, renewed_before: pulumi.Output[str]) -> pulumi.Output[str]:
        """The admin kubeconfig step, after `after` (the first control plane's certificates step): a renewal
        (`renewed_before` changed) changes its text, so it reads the renewed admin.conf."""
        self.kubeconfig_step = step_command(
            f"{self.node.name}-admin-kubeconfig",
            self.spec,
            self.node,
            admin_kubeconfig_step(),
            parent=self,
            depends_on=[self.init, after],
            # No ignoreChanges on the connection: a renewal's re-read must dial with the stack's current SSH settings
            # (a rotated key, a new bastion). A re-read makes the provider's kubeconfig unknown in the preview; the
            # provider's clusterIdentifier keeps every Kubernetes resource in place.
            rendered=renewed_before.apply(admin_kubeconfig_step),
        )
        self.kubeconfig = pulumi.Output.secret(self.kubeconfig_step.stdout)
        self.register_outputs({"kubeconfig": self.kubeconfig})
        return self.kubeconfig
