"""Monitoring: kube-prometheus-stack, then mlcluster's alerts, dashboards and scrape monitors, then
prometheus-adapter for the custom-metric HPAs.

Order: the namespace (and the Grafana admin Secret) before the stack; the stack (its CRDs) before any
PrometheusRule/ServiceMonitor/PodMonitor; Prometheus before the adapter that queries it. The layers whose
charts render ServiceMonitors (Kueue) or whose operators create them (the GPU Operator) come after this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from ..config.spec import Spec
from ..render import manifests
from ..render.monitoring import (
    GRAFANA_ADMIN_SECRET,
    REMOTE_WRITE_SECRET,
    adapter_rules,
    alerts,
    dashboard_config_maps,
    kube_prometheus_stack_release,
    prometheus_adapter_release,
    prometheus_rule,
    scrape_monitors,
)
from .platform_layer import PlatformLayer


class Monitoring(PlatformLayer):
    type_token = "mlcluster:monitoring:Monitoring"
    layer_name = "monitoring"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        monitoring = spec.monitoring
        namespace = self.manifest(manifests.namespace(monitoring.namespace), name=f"ns-{monitoring.namespace}")
        before_stack: list[pulumi.Resource] = [*self.after, namespace]
        password = monitoring.grafana_admin_password
        if password is not None:
            data = {"admin-user": "admin", "admin-password": pulumi.Output.secret(password.reveal())}
            before_stack.append(self._secret(GRAFANA_ADMIN_SECRET, data, spec, [namespace]))
        remote = monitoring.remote_write
        if remote is not None and remote.username is not None and remote.password is not None:
            data = {"username": remote.username, "password": pulumi.Output.secret(remote.password.reveal())}
            before_stack.append(self._secret(REMOTE_WRITE_SECRET, data, spec, [namespace]))
        stack = self.chart(kube_prometheus_stack_release(spec), before_stack)
        self.manifest(
            prometheus_rule(spec.monitoring, spec.nodes, spec.kubelet), [stack], name="prometheus-rule-mlcluster-alerts"
        )
        for config_map in dashboard_config_maps(spec):
            self.manifest(config_map, [stack], name=f"dashboard-{config_map['metadata']['name']}")
        for monitor in scrape_monitors(spec):
            meta = monitor["metadata"]
            key = f"{monitor['kind'].lower()}-{meta['name']}"
            self.manifest(monitor, [stack], name=key)
        rules = adapter_rules(spec)
        if rules["custom"] or rules["external"]:
            self.chart(prometheus_adapter_release(spec), [stack])
        return {
            "alerts": [alert.name for alert in alerts(spec.monitoring, spec.nodes, spec.kubelet)],
            "customMetrics": sorted(str(rule["name"]["as"]) for kind in rules.values() for rule in kind),
        }

    def _secret(
        self, name: str, data: dict[str, Any], spec: Spec, after: list[pulumi.Resource]
    ) -> pulumi.CustomResource:
        """A Secret the stack's values only name; secret values arrive as secret Outputs, so state hides them."""
        document = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": spec.monitoring.namespace},
            "type": "Opaque",
            "stringData": data,
        }
        return self.manifest(document, after, name=name)
