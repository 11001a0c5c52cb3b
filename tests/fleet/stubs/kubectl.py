"""kubectl against the fleet's cluster state: get, drain, cordon, delete, label and taint nodes; list pods (a test
puts "running job" markers in the cluster's `pods`); `get --raw /version` and `/readyz`; and the acceptance step's
objects (acceptance_objects.py): `apply -f`, `get`/`delete` of jobs, trainjobs and the Kueue and Trainer objects,
`logs job/NAME -c C` and `logs -l <trainjob launcher> -c node`.

The kubeconfig must be one the cluster issued (its server names the cluster, its client key must match, its
client certificate is one kubeadm issued and has not expired), as an API server would refuse anything else.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from _stub import Host, fail, main

if TYPE_CHECKING:
    from typing import Any


def _cluster_endpoint(host: Host, argv: list[str]) -> str:
    path = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    for i, arg in enumerate(argv):
        if arg == "--kubeconfig":
            path = argv[i + 1]
        elif arg.startswith("--kubeconfig="):
            path = arg.split("=", 1)[1]
    try:
        config: dict[str, Any] = yaml.safe_load(Path(path).read_text())
    except OSError:
        raise fail(
            "The connection to the server localhost:8080 was refused - did you specify the right host or port?"
        ) from None
    endpoint = str(config["clusters"][0]["cluster"]["server"]).removeprefix("https://")
    if not host.cluster_exists(endpoint):
        raise fail(f"Unable to connect to the server: dial tcp {endpoint}: connect: connection refused")
    with host.cluster(endpoint) as cluster:
        user = config["users"][0]["user"]
        # The API server accepts a client certificate its CA issued, until its notAfter (a year for kubeadm's).
        not_after = (cluster.get("clientCertificates") or {}).get(user.get("client-certificate-data"))
        if user.get("client-key-data") != cluster["adminKey"] or not_after is None or not_after < host.now():
            raise fail("error: You must be logged in to the server (Unauthorized)")
    return endpoint


def _words(argv: list[str]) -> list[str]:
    words, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in (
            "--kubeconfig",
            "-o",
            "--timeout",
            "-n",
            "--namespace",
            "--field-selector",
            "-l",
            "--raw",
            "--server",
            "--tls-server-name",
            "-c",
            "--container",
            "--selector",
            "--tail",
        ):
            skip = True
        elif not arg.startswith("-"):
            words.append(arg)
    return words


def _option(argv: list[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _pods(cluster: dict[str, Any], argv: list[str]) -> int:
    """`get pods -A --field-selector spec.nodeName=N[,status.phase=P] -l KEY -o name`."""
    fields = dict(f.split("=", 1) for f in (_option(argv, "--field-selector") or "").split(",") if f)
    label = _option(argv, "-l", "--selector")
    for name, pod in sorted((cluster.get("pods") or {}).items()):
        if fields.get("spec.nodeName", pod["node"]) != pod["node"]:
            continue
        if fields.get("status.phase", pod.get("phase", "Running")) != pod.get("phase", "Running"):
            continue
        if label and label not in pod.get("labels", {}):
            continue
        print(f"pod/{name}")
    return 0


DEFAULT_GRACE_SECONDS = 30
"""A pod's terminationGracePeriodSeconds when its spec sets none (kubernetes/api core/v1 types.go,
DefaultTerminationGracePeriodSeconds, v0.35.0): the kubelet kills what is still running then."""


def _go_duration_seconds(text: str) -> float:
    """kubectl's --timeout is a Go duration (time.ParseDuration): 90s, 10m, 1h30m, 500ms."""
    import re

    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise fail(f'error: invalid argument "{text}" for "--timeout" flag: time: invalid duration "{text}"')
    unit = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(n) * unit[u] for n, u in parts)


def _wait_for_evictions(node_name: str, pods: dict[str, dict[str, Any]], node: dict[str, Any], argv: list[str]) -> None:
    """What `kubectl drain` waits for once it has evicted the node's pods (kubernetes/kubectl pkg/drain/drain.go,
    evictPods and waitForDelete, v0.35.0): every pod gone, checked each second, for at most --timeout (none: for
    ever). A pod goes once its containers stop: `stopSeconds` of the test's marker (how long it takes to exit after
    SIGTERM; 0 unless set), at most its grace period, when the kubelet kills it. A NotReady node's kubelet confirms
    nothing, so that wait runs out (reported at once here, not after the timeout). A timeout fails as
    pkg/cmd/drain/drain.go RunDrain reports it."""
    import math
    import time

    # A dead kubelet's node may list no pod here; its drain still waits on the workload it ran.
    pod_name = next(iter(pods), "work-1")
    timeout_text = next((a.split("=", 1)[1] for a in argv if a.startswith("--timeout=")), None)
    timeout = (_go_duration_seconds(timeout_text) if timeout_text else 0.0) or math.inf  # 0: no limit
    if not node.get("ready", True):
        if math.isinf(timeout):
            raise fail(f"stub kubectl: drain of NotReady node {node_name!r} without --timeout never ends")
        longest = math.inf
    else:
        stops = [
            min(float(p.get("stopSeconds", 0)), float(p.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)))
            for p in pods.values()
        ]
        longest = max(stops, default=0.0)
        if longest > timeout:
            time.sleep(timeout)
    if longest > timeout:
        waited = f'error when waiting for pod "{pod_name}" in namespace "default" to terminate'
        waited += ": context deadline exceeded"
        unable = f'error: unable to drain node "{node_name}" due to error: {waited}, continuing command...'
        print(unable, file=sys.stderr)
        print(f"There are pending nodes to be drained:\n {node_name}", file=sys.stderr)
        raise fail(f"error: {waited}")
    time.sleep(math.ceil(longest))  # kubectl sees a pod gone at its next once-a-second check


def _jsonpath(node: dict[str, Any], path: str) -> str:
    if path == "{.spec.taints}":
        import acceptance_objects

        return acceptance_objects.taints_jsonpath(node)
    paths = {
        "{.status.nodeInfo.kubeletVersion}": f"v{node.get('kubeletVersion', '')}",
        "{.spec.unschedulable}": "true" if node["unschedulable"] else "",
        "{.metadata.labels}": json.dumps(node.get("labels") or {}, separators=(",", ":")),
    }
    if path not in paths:
        raise fail(f"kubectl: the stub does not know jsonpath {path}")
    return paths[path]


NODES_TEMPLATE = (
    '{{range .items}}node {{.metadata.name}}{{"\\n"}}{{range $k, $v := .metadata.labels}}label {{$k}}={{$v}}{{"\\n"}}'
    '{{end}}{{range .spec.taints}}taint {{.key}}{{with .value}}={{.}}{{end}}:{{.effect}}{{"\\n"}}{{end}}'
    '{{with .metadata.annotations}}{{with index . "mlcluster.io/managed-labels"}}managed-labels {{.}}{{"\\n"}}{{end}}'
    '{{with index . "mlcluster.io/managed-taints"}}managed-taints {{.}}{{"\\n"}}{{end}}{{end}}{{end}}'
)
"""The one go-template the stub renders (the node-metadata step's); tests/test_node_metadata.py checks the step
sends this text and that the real kubectl prints what node_lines does for the same Node."""
MANAGED_ANNOTATIONS = (
    ("mlcluster.io/managed-labels", "managed-labels"),
    ("mlcluster.io/managed-taints", "managed-taints"),
)


def node_lines(name: str, node: dict[str, Any]) -> str:
    """One Node through NODES_TEMPLATE: Go's templates range over a map in key order and skip an empty `with`."""
    import acceptance_objects

    lines = [f"node {name}"]
    lines += [f"label {key}={value}" for key, value in sorted((node.get("labels") or {}).items())]
    lines += [f"taint {acceptance_objects.taint_text(t)}" for t in acceptance_objects.node_taints(node)]
    annotations = node.get("annotations") or {}
    lines += [f"{word} {annotations[key]}" for key, word in MANAGED_ANNOTATIONS if annotations.get(key)]
    return "".join(line + "\n" for line in lines)


def _set_pairs(values: dict[str, str], pairs: list[str], argv: list[str], what: str) -> bool:
    """`kubectl label|annotate NAME KEY=VALUE... KEY-...`: the API server's checks of keys and label values, kubectl's
    --overwrite rule; returns whether anything changed (kubectl then says "labeled", else "not labeled")."""
    import acceptance_objects

    overwrite = "--overwrite" in argv or "--overwrite=true" in argv
    if not pairs:
        raise fail(f"error: at least one {what} update is required")
    updated = dict(values)
    for pair in pairs:
        key, equals, value = (pair[:-1], "", "") if pair.endswith("-") and "=" not in pair else pair.partition("=")
        if error := acceptance_objects.qualified_name_error(key):
            raise fail(f"error: invalid {what} spec: {pair}, {error}")
        if what == "label" and equals and not acceptance_objects.label_value_valid(value):
            raise fail(f'The Node "" is invalid: metadata.labels: Invalid value: "{value}"')
        if not equals:
            if key not in updated:
                print(f"{what} {key!r} not found.", file=sys.stderr)
            updated.pop(key, None)
        elif key in values and values[key] != value and not overwrite:
            raise fail(f"error: '{key}' already has a value ({values[key]}), and --overwrite is false")
        else:
            updated[key] = value
    changed = updated != values
    values.clear()
    values.update(updated)
    return changed


CONTROLLER_KINDS = "deployment,daemonset,statefulset"
ADDON_CONTROLLERS = {"coredns": "deployment.apps/coredns", "kube-proxy": "daemonset.apps/kube-proxy"}
"""What kubeadm's addon phase creates in kube-system (its cluster's `addons`)."""
KIND_ORDER = ("deployment.apps", "daemonset.apps", "statefulset.apps")


def cluster_controllers(cluster: dict[str, Any]) -> dict[str, list[str]]:
    """Deployments, DaemonSets and StatefulSets by namespace: kubeadm's addons, and what a test put in the cluster's
    `controllers` ({namespace: ["deployment.apps/NAME", ...]})."""
    found = {"kube-system": [ADDON_CONTROLLERS[a] for a in cluster.get("addons") or [] if a in ADDON_CONTROLLERS]}
    for namespace, names in (cluster.get("controllers") or {}).items():
        found.setdefault(namespace, []).extend(names)
    return found


def _controllers(cluster: dict[str, Any], argv: list[str], verb: str, rest: list[str], now: float) -> int:
    """`-n NS get deployment,daemonset,statefulset -o name`, `-n NS rollout restart KIND/NAME...` and
    `-n NS rollout status KIND/NAME --timeout=D`, as kubectl prints them."""
    namespace = _option(argv, "-n", "--namespace") or "default"
    present = cluster_controllers(cluster).get(namespace, [])
    if verb == "get":
        if _option(argv, "-o", "--output") != "name":
            raise fail("kubectl: the stub lists controllers with -o name only")
        if not present:
            print(f"No resources found in {namespace} namespace.", file=sys.stderr)
        for name in sorted(present, key=lambda n: (KIND_ORDER.index(n.split("/")[0]), n)):
            print(name)
        return 0
    action, targets = (rest[0] if rest else ""), rest[1:]
    if action not in ("restart", "status") or not targets:
        raise fail(f"kubectl: the stub knows rollout restart|status KIND/NAME, not {' '.join(rest)}")
    if action == "status" and len(targets) != 1:
        raise fail("error: rollout status is only supported on individual resources and resource collections")
    for target in targets:
        kind, _, name = target.partition("/")
        full = kind if "." in kind else f"{kind}.apps"
        if full not in KIND_ORDER or f"{full}/{name}" not in present:
            plural = full.split(".")[0] + "s"
            raise fail(f'Error from server (NotFound): {plural}.apps "{name}" not found')
        if action == "restart":
            cluster.setdefault("rolloutRestarts", []).append(
                {"namespace": namespace, "name": f"{full}/{name}", "at": now}
            )
            print(f"{full}/{name} restarted")
        else:
            noun = {"deployment.apps": "deployment", "daemonset.apps": "daemon set", "statefulset.apps": "statefulset"}
            if _option(argv, "--timeout") is None and not any(a.startswith("--timeout=") for a in argv):
                raise fail("stub kubectl: rollout status without --timeout can wait for ever")
            print(f'{noun[full]} "{name}" successfully rolled out')
    return 0


LOCAL_API = "https://127.0.0.1:6443"
SERVING_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
"""Names kubeadm's API server certificate carries whatever the node (besides its name and address): not 127.0.0.1."""


def _this_api_server(host: Host, argv: list[str], server: str) -> int:
    """`--server https://127.0.0.1:6443 --tls-server-name kubernetes get --raw /readyz`: this node's own API server,
    ready once its pod is and its etcd member is (kubeadm's API server talks to the local member only)."""
    if server != LOCAL_API:
        raise fail(f"kubectl: the stub serves --server {LOCAL_API} only, not {server}")
    name = _option(argv, "--tls-server-name")
    if name not in (*SERVING_NAMES, host.name):
        raise fail(
            "Unable to connect to the server: tls: failed to verify certificate: x509: certificate is valid for"
            f" {', '.join(SERVING_NAMES)}, {host.name}, not {name or '127.0.0.1'}"
        )
    if not Path("/etc/kubernetes/manifests/kube-apiserver.yaml").exists():
        raise fail("The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?")
    _cluster_endpoint(host, argv)  # the credentials, as any request
    if _option(argv, "--raw") != "/readyz":
        raise fail("kubectl: the stub serves only get --raw /readyz from this node's API server")
    if not (host.static_pod_ready("kube-apiserver") and host.static_pod_ready("etcd")):
        raise fail(
            'Error from server (InternalServerError): an error on the server ("[+]ping ok\\n[-]etcd failed: reason'
            ' withheld\\nreadyz check failed") has prevented the request from succeeding'
        )
    print("ok")
    return 0


def kubectl(host: Host, argv: list[str]) -> int:
    server = _option(argv, "--server", "-s")
    if server is not None:
        return _this_api_server(host, argv, server)
    endpoint = _cluster_endpoint(host, argv)
    words = _words(argv)
    verb, rest = words[0], words[1:]
    raw = _option(argv, "--raw")
    if verb == "get" and raw is not None:
        if raw == "/readyz":
            # Through the control-plane endpoint: any ready API server answers. Another control plane is taken as
            # ready (the stub sees only this host's pods); on the only one, it is this node's.
            with host.cluster(endpoint) as cluster:
                others = [n for n, node in cluster["nodes"].items() if node.get("controlPlane") and n != host.name]
            if others or (host.static_pod_ready("kube-apiserver") and host.static_pod_ready("etcd")):
                print("ok")
                return 0
            raise fail(f"Unable to connect to the server: dial tcp {endpoint}: connect: connection refused")
        if raw != "/version":
            raise fail(f"kubectl: the stub does not serve {raw}")
        with host.cluster(endpoint) as cluster:
            print(json.dumps({"major": "1", "gitVersion": f"v{cluster['version']}"}, indent=2))
        return 0
    if (verb == "get" and rest[:1] == [CONTROLLER_KINDS]) or verb == "rollout":
        with host.cluster(endpoint) as cluster:
            return _controllers(cluster, argv, verb, rest, host.now())
    if verb == "get" and rest[:1] in (["pods"], ["pod"], ["po"]):
        with host.cluster(endpoint) as cluster:
            return _pods(cluster, argv)
    if verb in ("apply", "logs", "taint") or (
        verb in ("get", "delete") and rest and rest[0].split("/")[0] not in ("node", "nodes", "no")
    ):
        return _acceptance_verb(host, endpoint, argv, verb, rest)
    if verb in ("drain", "cordon", "uncordon"):
        kind, names = "node", rest
    else:
        kind, names = (rest[0] if rest else ""), rest[1:]
        if "/" in kind:
            kind, names = kind.split("/", 1)[0], [kind.split("/", 1)[1], *names]
    if kind not in ("node", "nodes", "no"):
        raise fail(f"kubectl: the stub only knows nodes, not {kind!r}")
    with host.cluster(endpoint) as cluster:
        nodes: dict[str, Any] = cluster["nodes"]
        # label and annotate name one node, then KEY=VALUE and KEY- pairs.
        missing = [n for n in (names[:1] if verb in ("label", "annotate") else names) if n not in nodes]
        if missing and verb == "get" and "--ignore-not-found" in argv:
            names = [n for n in names if n in nodes]
            if not names:
                return 0
        elif missing:
            raise fail(f'Error from server (NotFound): nodes "{missing[0]}" not found')
        output = _option(argv, "-o", "--output") or ""
        if verb == "get" and output == "name":
            print("\n".join(f"node/{name}" for name in names or sorted(nodes)))
        elif verb == "get" and output.startswith("jsonpath="):
            print(_jsonpath(nodes[names[0]], output.removeprefix("jsonpath=")), end="")
        elif verb == "get" and output.startswith("go-template="):
            if output.removeprefix("go-template=") != NODES_TEMPLATE:
                raise fail("kubectl: the stub knows one go-template for nodes (node-metadata.sh's), not this one")
            print("".join(node_lines(name, nodes[name]) for name in names or sorted(nodes)), end="")
        elif verb == "get":
            if "--no-headers" not in argv:
                print("NAME STATUS ROLES AGE VERSION")
            for name in names or sorted(nodes):
                role = "control-plane" if nodes[name]["controlPlane"] else "<none>"
                status = "Ready" if nodes[name].get("ready", True) else "NotReady"
                status += ",SchedulingDisabled" if nodes[name]["unschedulable"] else ""
                print(f"{name} {status} {role} 1m v{nodes[name].get('kubeletVersion', '')}")
        elif verb in ("drain", "cordon"):
            for name in names:
                nodes[name]["unschedulable"] = True
                print(f"node/{name} cordoned")
                if verb == "drain":
                    if "--ignore-daemonsets" not in argv:
                        raise fail(
                            f"error: unable to drain node {name!r} due to error: cannot delete DaemonSet-managed"
                            " Pods (use --ignore-daemonsets to ignore)"
                        )
                    on_node = sorted(n for n, pod in (cluster.get("pods") or {}).items() if pod["node"] == name)
                    for pod_name in on_node:
                        print(f"evicting pod default/{pod_name}")
                    _wait_for_evictions(name, {n: cluster["pods"][n] for n in on_node}, nodes[name], argv)
                    # Evictions: the "pods" on the node go (a test's running-job markers among them).
                    for pod_name in on_node:
                        del cluster["pods"][pod_name]
                        cluster.setdefault("evicted", []).append(pod_name)
                    print(f"node/{name} drained")
        elif verb == "uncordon":
            for name in names:
                nodes[name]["unschedulable"] = False
                print(f"node/{name} uncordoned")
        elif verb == "delete":
            for name in names:
                del nodes[name]
                print(f'node "{name}" deleted')
        elif verb == "label":
            name, pairs = names[0], names[1:]
            print(
                f"node/{name} {'labeled' if _set_pairs(nodes[name]['labels'], pairs, argv, 'label') else 'not labeled'}"
            )
        elif verb == "annotate":
            name, pairs = names[0], names[1:]
            annotations = nodes[name].setdefault("annotations", {})
            print(
                f"node/{name} {'annotated' if _set_pairs(annotations, pairs, argv, 'annotation') else 'not annotated'}"
            )
        else:
            raise fail(f"kubectl: the stub does not know {verb!r}")
    return 0


def _acceptance_verb(host: Host, endpoint: str, argv: list[str], verb: str, rest: list[str]) -> int:
    """apply, logs, taint, and get/delete of the acceptance step's kinds (acceptance_objects.py)."""
    import acceptance_objects as objects

    namespace = _option(argv, "-n", "--namespace")
    out, err, error = "", "", None
    if verb == "apply":
        path = _option(argv, "-f", "--filename")
        if path is None:
            raise fail("error: must specify one of -f and -k")
        source = "STDIN" if path == "-" else path
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text()
        except OSError:
            raise fail(f'error: the path "{path}" does not exist') from None
        try:
            documents = objects.load_documents(text, source)
        except objects.ApiError as problem:
            raise fail(problem.message) from None
        if not documents:
            raise fail("error: no objects passed to apply")
        with host.cluster(endpoint) as cluster:
            result = objects.apply_documents(cluster, documents, source, namespace, host.now())
        out = "".join(line + "\n" for line in result.lines)
        error = "\n".join(result.errors) or None
    elif verb == "taint":
        if rest[:1] in (["nodes"], ["node"], ["no"]):
            name, specs = (rest[1] if len(rest) > 1 else ""), rest[2:]
        elif rest and rest[0].split("/")[0] in ("node", "nodes", "no") and "/" in rest[0]:
            name, specs = rest[0].split("/", 1)[1], rest[1:]
        else:
            raise fail(f"kubectl: the stub taints nodes only, not {rest[:1]}")
        overwrite = "--overwrite" in argv or "--overwrite=true" in argv
        with host.cluster(endpoint) as cluster:
            try:
                out = objects.taint_node(cluster, name, specs, overwrite) + "\n"
                objects.reconcile(cluster, host.now())
            except objects.ApiError as problem:
                error = problem.message
    elif verb == "logs":
        selector = _option(argv, "-l", "--selector")
        container = _option(argv, "-c", "--container")
        tail_option = _option(argv, "--tail")
        tail = int(tail_option) if tail_option is not None else (10 if selector else -1)  # kubectl's defaults
        with host.cluster(endpoint) as cluster:
            try:
                if selector is not None:
                    out, err = objects.launcher_logs(
                        cluster, namespace or "default", selector, container, tail=tail, now=host.now()
                    )
                else:
                    target = rest[0] if rest else ""
                    resource, _, name = target.partition("/")
                    if objects.BY_KIND["Job"] != objects.kind_for_resource(resource) or not name:
                        raise objects.ApiError(f"kubectl: the stub serves logs of job/NAME and -l only, not {target!r}")
                    out = objects.job_logs(cluster, namespace or "default", name, container, tail=tail, now=host.now())
            except objects.ApiError as problem:
                error = problem.message
    else:
        target = rest[0]
        resource, _, first = target.partition("/")
        kind = objects.kind_for_resource(resource)
        if kind is None:
            raise fail(f"kubectl: the stub does not know {resource!r} (it knows nodes and the acceptance objects)")
        names = [first, *rest[1:]] if first else rest[1:]
        ignore = "--ignore-not-found" in argv or "--ignore-not-found=true" in argv
        with host.cluster(endpoint) as cluster:
            try:
                out = _get_or_delete(
                    cluster, argv, now=host.now(), verb=verb, kind=kind, namespace=namespace, names=names, ignore=ignore
                )
            except objects.ApiError as problem:
                error = problem.message
    sys.stdout.write(out)
    sys.stderr.write(err)
    if error:
        raise fail(error)
    return 0


def _get_or_delete(
    cluster: dict[str, Any],
    argv: list[str],
    *,
    now: float,
    verb: str,
    kind: Any,
    namespace: str | None,
    names: list[str],
    ignore: bool,
) -> str:
    import acceptance_objects as objects

    namespace = namespace or "default"
    if verb == "delete":
        if not names:
            raise objects.ApiError("error: resource(s) were provided, but no name was specified")
        lines = []
        for name in names:
            line = objects.delete_object(cluster, kind, namespace, name, ignore_not_found=ignore, now=now)
            if line:
                lines.append(line + "\n")
        return "".join(lines)
    if len(names) != 1:
        raise objects.ApiError(f"kubectl: the stub gets one {kind.kind} by name, not {names}")
    objects.reconcile(cluster, now)
    try:
        obj = objects.get_object(cluster, kind, namespace, names[0])
    except objects.ApiError:
        if ignore:
            return ""
        raise
    output = _option(argv, "-o", "--output") or ""
    if output.startswith("jsonpath="):
        return str(objects.jsonpath(obj, output.removeprefix("jsonpath=")))
    if output == "name":
        return f"{kind.singular}/{names[0]}\n"
    if output == "json":
        return json.dumps(obj, indent=4) + "\n"
    if output:
        raise objects.ApiError(f"kubectl: the stub does not print -o {output}")
    return f"NAME AGE\n{names[0]} 1m\n"


if __name__ == "__main__":
    main({"kubectl": kubectl})
