"""GpuOperator: NVIDIA GPU Operator (drivers, container toolkit, device plugin or DRA driver, MIG, DCGM).

The driver decision waits on the GPU preflight's output: in the same `up`, `driver.enabled` and the
per-node driver labels are Outputs of the preflight commands' stdout (`[computed]` in preview).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from ..cluster.gpu_preflight import GpuPreflight
from ..config.gpu import DRIVER_DEPLOY_LABEL
from ..config.spec import Spec
from ..render.gpu_operator import (
    DECIDED_BY_ANNOTATION,
    PREFLIGHT_STEP,
    DriverMode,
    PreflightResult,
    chart_driver_enabled,
    config_warnings,
    dra_driver_release,
    driver_label,
    driver_root,
    gpu_node_labels,
    gpu_nodes,
    gpu_operator_release,
    node_driver_mode,
    planned_gpu_labels,
    waits_on_preflight,
)
from ..warnings import given
from .platform_layer import PlatformLayer


class GpuOperator(PlatformLayer):
    type_token = "mlcluster:gpu_operator:GpuOperator"
    layer_name = "gpu-operator"
    report: pulumi.Output[dict[str, Any]]

    def __init__(
        self,
        spec: Spec,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource] = (),
        preflight: GpuPreflight | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """preflight: the GPU preflight, whose results per node decide the driver in `auto` mode."""
        self.preflight = preflight
        super().__init__(spec, provider, depends_on, opts)

    def install(self, spec: Spec) -> Mapping[str, Any]:
        preflight = self.preflight
        nodes = gpu_nodes(spec.nodes) if spec.cluster.mode == "kubeadm" else ()
        for warning in config_warnings(spec.nodes, spec.gpu_operator):
            given(warning, resource=self)

        def modes_from(results: Mapping[str, PreflightResult] | None) -> dict[str, DriverMode]:
            return {n.name: node_driver_mode(spec.gpu_operator, n, (results or {}).get(n.name)) for n in nodes}

        # Plain values when no node's driver depends on the preflight: the plan then shows them.
        needs_preflight = preflight is not None and any(waits_on_preflight(spec.gpu_operator, n) for n in nodes)
        modes: pulumi.Output[dict[str, DriverMode]] | dict[str, DriverMode]
        if needs_preflight and preflight is not None:
            modes = preflight.results.apply(modes_from)
            driver_enabled: Any = modes.apply(lambda m: chart_driver_enabled(spec.gpu_operator, spec.cluster, m))
        else:
            modes = modes_from(None)
            driver_enabled = chart_driver_enabled(spec.gpu_operator, spec.cluster, modes)

        labelled: list[pulumi.Resource] = []
        for node in nodes:
            metadata: dict[str, Any] = {"name": node.name}
            if not needs_preflight or preflight is None or not waits_on_preflight(spec.gpu_operator, node):
                metadata["labels"] = gpu_node_labels(spec, node, node_driver_mode(spec.gpu_operator, node, None))
            else:
                # Only the driver label waits, and on this node's own preflight only: a label patch that waited
                # on every node's preflight made each GPU node depend on every node (most of a 1,000-node plan's
                # dependency edges). The stack's own labels stay plain in the plan.
                decided = preflight.by_node[node.name].apply(
                    lambda r, node=node: driver_label(node_driver_mode(spec.gpu_operator, node, r))  # type: ignore[misc]
                )
                metadata["labels"] = {**planned_gpu_labels(node), DRIVER_DEPLOY_LABEL: decided}
                metadata["annotations"] = {
                    DECIDED_BY_ANNOTATION: f"{DRIVER_DEPLOY_LABEL} ({node.name}-{PREFLIGHT_STEP})"
                }
            labelled.append(
                k8s.core.v1.NodePatch(
                    f"{node.name}-gpu-labels",
                    metadata=k8s.meta.v1.ObjectMetaPatchArgs(**metadata),
                    opts=self.child_options(),
                )
            )

        self.release = self.chart(gpu_operator_release(spec, driver_enabled), [*self.after, *labelled])
        outputs: dict[str, Any] = {"status": self.release.status}
        if spec.gpu_operator.dra:
            root = pulumi.Output.from_input(driver_enabled).apply(driver_root)
            self.dra = self.chart(dra_driver_release(spec, root), [self.release])
            outputs["draStatus"] = self.dra.status
        self.report = pulumi.Output.all(driver_enabled, modes).apply(
            lambda args: {"driverEnabled": args[0], "driverByNode": args[1]}
        )
        return outputs
