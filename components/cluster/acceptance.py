"""Acceptance: once the platform is installed, test every GPU node that needs it from the first control plane,
judge the results, quarantine exactly the nodes that failed, and report (docs/acceptance.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from ..config.spec import Spec
from ..render.acceptance import (
    OUTPUT,
    Plan,
    acceptance_step,
    needs_drivers,
    parse_step_output,
    plan_tests,
    previous_failures,
    quarantine_step,
    report,
    step_input,
    summary_config_map,
)
from ..render.gpu_operator import PreflightResult
from ..warnings import warn
from .gpu_preflight import GpuPreflight
from .node_command import step_command
from .node_scripts import NodeScripts


def _host_driver(result: PreflightResult) -> str | None:
    return result.driver_version if result.host_driver else None


class Acceptance(pulumi.ComponentResource):
    """`summary` (the `acceptance` stack output) and `report` (CTRF) are known once the tests ran."""

    summary: pulumi.Output[dict[str, Any]]
    report: pulumi.Output[dict[str, Any]]

    def __init__(
        self,
        spec: Spec,
        scripts: NodeScripts,
        previous: pulumi.StackReference,
        preflight: GpuPreflight | None,
        provider: k8s.Provider,
        *,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mlcluster:acceptance:Acceptance", "acceptance", None, opts)
        first = spec.control_planes[0]
        by_node = preflight.by_node if preflight is not None else {}
        host_drivers: pulumi.Output[Mapping[str, str | None]] = (
            pulumi.Output.all(**{name: result.apply(_host_driver) for name, result in by_node.items()})
            if by_node
            else pulumi.Output.from_input({})
        )
        last = previous.get_output(OUTPUT)

        def warn_failed(last_run: Mapping[str, Any] | None) -> None:
            for node, reasons in previous_failures(spec, last_run):
                warn(
                    "acceptance",
                    f"{node} failed acceptance at the last up ({'; '.join(reasons)}): it keeps the quarantine taint"
                    " until it passes; after the repair set acceptance.retest to a new value (e.g. today's date)"
                    " and run up",
                    self,
                )

        # On its own: the record is known in every preview, even where a preflight re-runs.
        last.apply(warn_failed)

        def planned(last_run: Mapping[str, Any] | None, drivers: Mapping[str, str | None] | None) -> Plan:
            plan = plan_tests(spec, last_run, drivers)
            for node, why in sorted(plan.due.items()):
                pulumi.log.info(f"acceptance: {node} is tested: {'; '.join(why)}", self)
            return plan

        def plan_after(last_run: Mapping[str, Any] | None) -> Plan | pulumi.Output[Plan]:
            # The drivers only matter against a record (a driver change retests a node): without one, the plan
            # waits for no preflight, so a first preview shows the step's input whole.
            if needs_drivers(spec.nodes, spec.acceptance, last_run):
                return host_drivers.apply(lambda drivers: planned(last_run, drivers))
            return planned(last_run, None)

        plan: pulumi.Output[Plan] = last.apply(plan_after)
        self.run = step_command(
            f"{first.name}-acceptance",
            spec,
            first,
            acceptance_step(spec),
            parent=self,
            depends_on=[scripts.copies[first.name], *depends_on],
            stdin=plan.apply(lambda p: step_input(spec, p)),
            rendered=plan.apply(lambda p: acceptance_step(spec, p)),
        )
        result = self.run.stdout.apply(lambda out: parse_step_output(spec, out))
        outcome = pulumi.Output.all(result, plan, host_drivers).apply(
            lambda v: report(spec, v[0], v[1], host_drivers=v[2])
        )
        self.quarantine = step_command(
            f"{first.name}-acceptance-quarantine",
            spec,
            first,
            quarantine_step([], []),
            parent=self,
            depends_on=[self.run],
            rendered=outcome.apply(lambda o: quarantine_step(o.failed, o.passed)),
        )
        self.summary = outcome.apply(lambda o: o.summary)
        self.report = outcome.apply(lambda o: o.ctrf)
        # Where dashboards read it (a Grafana JSON data source or `kubectl get cm -o json`).
        k8s.core.v1.ConfigMap(
            "acceptance-summary",
            metadata={"name": "mlcluster-acceptance-summary", "namespace": spec.acceptance.namespace},
            data=outcome.apply(summary_config_map),
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.run]),
        )
        self.register_outputs({"summary": self.summary, "report": self.report})
