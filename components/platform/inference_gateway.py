"""InferenceGateway: Envoy Gateway (with the Gateway API CRDs its chart pins), the GatewayClass it serves, and the
Gateway KServe attaches its HTTPRoutes to.

Order: the release (its CRDs) before the GatewayClass and the Gateway; the Gateway after `depends_on` too, which
brings KServe's namespace (the kserve-crd release creates it). Serving installs KServe's controller after this
component, so the controller finds the Gateway API CRDs it watches when it starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.spec import Spec
from ..render.inference_gateway import envoy_gateway_release, gateway, gateway_class
from ..render.serving import KSERVE_GATEWAY
from .platform_layer import PlatformLayer


class InferenceGateway(PlatformLayer):
    type_token = "mlcluster:inference_gateway:InferenceGateway"
    layer_name = "inference-gateway"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        release = envoy_gateway_release(spec)
        if release is None:
            raise ValueError("InferenceGateway built while kserve.gateway is off")
        envoy = self.chart(release)
        self.gateway_class = self.manifest(gateway_class(), [envoy], name="gatewayclass-envoy")
        self.gateway = self.manifest(
            gateway(spec.kserve), [*self.after, envoy, self.gateway_class], name=f"gateway-{spec.kserve.namespace}"
        )
        return {"gateway": f"{spec.kserve.namespace}/{KSERVE_GATEWAY}", "domain": spec.kserve.gateway.domain}
