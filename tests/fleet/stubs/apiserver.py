"""The API server's stand-in on a control plane, as the network sees it (stubs/daemons.py says when it runs).

TLS on 6443 with the fleet's serving certificate; `/readyz`, `/livez` and `/healthz` answer `ok` to anyone, as
kubeadm's system:public-info-viewer role allows; `/api/v1/namespaces/kube-public/configmaps/cluster-info` answers
from the cluster's state once `kubeadm init` stored it (404 before), which is what token discovery reads through the
controlPlaneEndpoint; anything else is 403 (no credentials here). Each request is one line in the host's
`apiserver-requests.jsonl` (path, status, peer), so a test can see which control plane served what.
"""

from __future__ import annotations

import json
import ssl
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from _stub import Host

CLUSTER_INFO = "/api/v1/namespaces/kube-public/configmaps/cluster-info"
PUBLIC = ("/readyz", "/livez", "/healthz")


def _cluster_endpoint() -> str | None:
    import yaml

    for conf in ("/etc/kubernetes/kubelet.conf", "/etc/kubernetes/admin.conf"):
        try:
            config = yaml.safe_load(Path(conf).read_text())
            return str(config["clusters"][0]["cluster"]["server"]).removeprefix("https://")
        except (FileNotFoundError, KeyError, IndexError, TypeError):
            continue
    return None


class Handler(BaseHTTPRequestHandler):
    host: Host

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        status, body = 403, {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403}
        if path in PUBLIC:
            status, text = 200, b"ok"
            self._send(status, text, "text/plain")
            return
        if path == CLUSTER_INFO:
            endpoint = _cluster_endpoint()
            info = None
            if endpoint and self.host.cluster_exists(endpoint):
                with self.host.cluster(endpoint) as cluster:
                    if cluster.get("clusterInfo"):
                        info = {"caHash": cluster.get("caHash"), "endpoint": cluster.get("endpoint")}
            if info is not None:
                status, body = 200, {"kind": "ConfigMap", "metadata": {"name": "cluster-info"}, "data": info}
            else:
                status, body = 404, {"kind": "Status", "reason": "NotFound", "code": 404}
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with open(self.host.state_dir / "apiserver-requests.jsonl", "a") as log:
            log.write(
                json.dumps({"t": time.time(), "path": self.path, "status": status, "peer": self.client_address[0]})
            )
            log.write("\n")

    def log_message(self, format: str, *args: object) -> None:
        return


def serve() -> None:
    host = Host()
    Handler.host = host
    server = ThreadingHTTPServer(("0.0.0.0", 6443), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(host.api_server_tls / "tls.crt", host.api_server_tls / "tls.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    serve()
