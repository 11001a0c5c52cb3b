"""Storage: a default StorageClass so checkpoint PVCs bind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.spec import Spec
from ..render.storage import storage_release
from .platform_layer import PlatformLayer


class Storage(PlatformLayer):
    type_token = "mlcluster:storage:Storage"
    layer_name = "storage"

    def install(self, spec: Spec) -> Mapping[str, Any]:
        self.release = self.chart(storage_release(spec))
        return {"status": self.release.status}
