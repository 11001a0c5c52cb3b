"""Small manifests every layer needs, built one way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def namespace(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
