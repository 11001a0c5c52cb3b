"""The kubeconfig the Kubernetes provider uses, when the machine running `pulumi` reaches the API elsewhere."""

from __future__ import annotations

from urllib.parse import urlsplit

import yaml

DEFAULT_API_PORT = 6443


def kubeconfig_reaching(kubeconfig: str, address: str) -> str:
    """`kubeconfig` with every cluster's `server:` at `address` (host[:port]); `tls-server-name` keeps the API
    server's own name, so its certificate is still verified against the name it was issued for."""
    config = yaml.safe_load(kubeconfig)
    server = address if ":" in address.rsplit("]", 1)[-1] else f"{address}:{DEFAULT_API_PORT}"
    for entry in config.get("clusters") or []:
        cluster = entry["cluster"]
        cluster.setdefault("tls-server-name", urlsplit(cluster["server"]).hostname)
        cluster["server"] = f"https://{server}"
    return yaml.safe_dump(config, sort_keys=False)
