"""Certificates: kubeadm's certificate expiry dates on every control plane, renewed through `pulumi up`.

The dates come from the previous deployment's `certificates` output (a StackReference to this stack: a preview
runs no command, so that is the freshest reading it can have); components/render/certificates.py decides from
them, against this program's clock, whether this run renews. The steps run one control plane at a time, the
first one first; the first control plane's step is what the admin kubeconfig is read after.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import pulumi
from pulumi_command import remote

from ..config.spec import Spec
from ..render.certificates import OUTPUT, Decision, certificates_step, decide, record_from_output, record_output
from ..warnings import warn
from . import clock
from .node_command import step_command


class Certificates(pulumi.ComponentResource):
    """`member[node]`: the resource after which a control plane is in the cluster (init, or its join)."""

    renew_before: pulumi.Output[str]
    record: pulumi.Output[dict[str, Any]]

    def __init__(
        self,
        spec: Spec,
        member: Mapping[str, pulumi.Resource],
        previous: pulumi.StackReference,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`previous`: this stack's last deployment (its outputs; none before the first)."""
        super().__init__("mlcluster:certificates:Certificates", spec.cluster.name, None, opts)
        now = clock.utc_now()
        decision = previous.get_output(OUTPUT).apply(
            lambda value: decide(record_from_output(value), now, spec.certificates)
        )
        decision.apply(self._report)
        self.renew_before = decision.apply(lambda d: d.renew_before)
        self.steps: dict[str, remote.Command] = {}
        after: list[pulumi.Resource] = []
        for node in spec.control_planes:
            step = step_command(
                f"{node.name}-certificates",
                spec,
                node,
                certificates_step(node, ""),
                parent=self,
                depends_on=[member[node.name], *after],
                rendered=self.renew_before.apply(partial(certificates_step, node)),
            )
            self.steps[node.name] = step
            after = [step]
        names = list(self.steps)
        self.record = pulumi.Output.all(self.renew_before, *(s.stdout for s in self.steps.values())).apply(
            lambda values: record_output(values[0], dict(zip(names, values[1:], strict=True)))
        )
        self.register_outputs({"record": self.record})

    def _report(self, decision: Decision) -> None:
        if decision.warn:
            warn("certificates.renewBeforeDays", decision.message.removeprefix("certificates: "), resource=self)
        else:
            pulumi.log.info(decision.message, resource=self)
