"""kubeadm: init, join, token create, upload-certs, reset, upgrade plan/apply/node and certs check-expiration/renew,
validating configs against the v1beta4 schema and upgrades against the version-skew rules. Certificates expire a
year after they are issued (init, a control plane's join, renew, an upgrade) by the fleet clock; the admin
kubeconfig's client certificate is registered with the fleet "API", which refuses it once expired.

Configs are checked against ../shared/fixtures/upstream/config-schemas (unknown fields and a wrong
apiVersion are errors), preflight checks what the node steps must have done (swap off, br_netfilter,
ip_forward, containerd running), and output follows real kubeadm's format.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from _stub import (
    Host,
    _safe,
    blocking_firewall,
    fail,
    main,
    package_version,
    record_versions,
    sha256,
    version_tuple,
)

if TYPE_CHECKING:
    from typing import Any

SCHEMAS = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "upstream" / "config-schemas"
KUBEADM_API = "kubeadm.k8s.io/v1beta4"
KUBELET_API = "kubelet.config.k8s.io/v1beta1"
ADMIN_CONF = Path("/etc/kubernetes/admin.conf")
CERTIFICATE_KEY_TTL = 2 * 3600
"""kubeadm deletes the uploaded certificates (Secret kubeadm-certs) after two hours."""
KUBELET_CONF = Path("/etc/kubernetes/kubelet.conf")
BOOTSTRAP_KUBELET_CONF = Path("/etc/kubernetes/bootstrap-kubelet.conf")
RESTRICTED_LABEL = re.compile(r"^(?:[^/]*\.)?(kubernetes\.io|k8s\.io)/")
# The kubelet's own rule (NodeRestriction), kept apart from components/config/checks.py on purpose: the
# stub is a second reading of upstream that the project's validation is tested against.
KUBELET_ALLOWED_LABELS = (
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
)
KUBELET_ALLOWED_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")


def _schema(kind: str) -> dict[str, Any]:
    if kind == "KubeletConfiguration":
        return json.loads((SCHEMAS / "kubelet-config-v1beta1.json").read_text())["kinds"][kind]
    return json.loads((SCHEMAS / "kubeadm-v1beta4.json").read_text())["kinds"][kind]


def load_config(host: Host, path: str, allowed: set[str]) -> dict[str, dict[str, Any]]:
    """The documents of a --config file by kind; any schema problem is kubeadm's 'error unmarshaling'."""
    import jsonschema

    try:
        text = Path(path).read_text()
    except OSError as error:
        raise fail(f"unable to read config from {path!r}: {error}") from None
    host.record_extra.setdefault("configSha256", {})[path] = sha256(text)
    documents: dict[str, dict[str, Any]] = {}
    for document in yaml.safe_load_all(text):
        if not document:
            continue
        kind, api = document.get("kind"), document.get("apiVersion")
        if kind not in allowed:
            raise fail(f"error: unexpected kind {kind!r} in {path} (expected one of {sorted(allowed)})")
        wanted = KUBELET_API if kind == "KubeletConfiguration" else KUBEADM_API
        if api != wanted:
            raise fail(f'error: no kind "{kind}" is registered for version "{api}" (want {wanted})')
        problems = [
            f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in jsonschema.Draft202012Validator(_schema(kind)).iter_errors(document)
        ]
        if problems:
            raise fail(f"error: {kind} in {path} is invalid (strict decoding):\n  " + "\n  ".join(problems))
        documents[kind] = document
    return documents


def _cgroup_v1() -> bool:
    """cgroup v1 as the kubelet tells it: the filesystem at /sys/fs/cgroup is not cgroup2 (libcontainer's
    IsCgroup2UnifiedMode reads its statfs type; `stat -f` prints the same)."""
    found = subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup/"], capture_output=True, text=True, check=True)
    return found.stdout.strip() != "cgroup2fs"


def preflight(host: Host) -> None:
    errors = []
    with host.state() as state:
        if state.get("swap", False):
            errors.append("[ERROR Swap]: swap is enabled; disable it (swapoff -a) or set failSwapOn: false")
        if state.get("sysctl", {}).get("net.ipv4.ip_forward") != "1":
            errors.append(
                "[ERROR FileContent--proc-sys-net-ipv4-ip_forward]: /proc/sys/net/ipv4/ip_forward contents"
                " are not set to 1"
            )
        if not state.get("services", {}).get("containerd", {}).get("active"):
            errors.append("[ERROR CRI]: container runtime is not running: unix:///var/run/containerd/containerd.sock")
        if "kubelet" not in state.get("packages", {}):
            errors.append("[ERROR FileExisting-kubelet]: kubelet not found in system path")
    # kubernetes/kubernetes CHANGELOG-1.35.md (PR #134744): "the SystemVerification preflight check throws an error
    # if cgroups v1 is detected and the detected kubelet version is v1.35 or newer" (the message's wording is
    # kubeadm's own and not reproduced; the check's name and condition are). cgroup v1: a tmpfs at /sys/fs/cgroup.
    kubelet = package_version(host, "kubelet")
    if kubelet and tuple(int(p) for p in kubelet.split(".")[:2]) >= (1, 35) and _cgroup_v1():
        errors.append(
            f"[ERROR SystemVerification]: cgroups v1 detected and the kubelet is v{kubelet} (v1.35 or newer refuses"
            " cgroup v1 unless failCgroupV1 is false)"
        )
    if not os.path.isdir("/sys/module/br_netfilter"):
        errors.append("[ERROR FileExisting-br_netfilter]: br_netfilter module is not loaded")
    for path in ("/etc/kubernetes/manifests/kube-apiserver.yaml", str(KUBELET_CONF), str(BOOTSTRAP_KUBELET_CONF)):
        if os.path.exists(path):
            errors.append(f"[ERROR FileAvailable--{path.strip('/').replace('/', '-')}]: {path} already exists")
    if errors:
        raise fail(
            "error execution phase preflight: [preflight] Some fatal errors occurred:\n\t"
            + "\n\t".join(errors)
            + "\n[preflight] If you know what you are doing, you can make a check non-fatal with"
            " `--ignore-preflight-errors=...`"
        )


def _labels_of(registration: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for arg in registration.get("kubeletExtraArgs") or []:
        if arg.get("name") == "node-labels":
            for pair in arg.get("value", "").split(","):
                if pair:
                    key, _, value = pair.partition("=")
                    labels[key] = value
    bad = [
        k
        for k in labels
        if RESTRICTED_LABEL.match(k) and k not in KUBELET_ALLOWED_LABELS and not k.startswith(KUBELET_ALLOWED_PREFIXES)
    ]
    if bad:
        # The kubelet refuses to start, so the TLS bootstrap never completes.
        raise fail(
            "error execution phase kubelet-start: timed out waiting for the condition: kubelet: unknown"
            f" 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: {bad}"
        )
    return labels


def _kubeconfig(
    endpoint: str, cluster_name: str, user: str, client_key: str, ca: str, *, client_certificate: str | None = None
) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": f"{user}@{cluster_name}",
            "clusters": [
                {"name": cluster_name, "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca}}
            ],
            "contexts": [{"name": f"{user}@{cluster_name}", "context": {"cluster": cluster_name, "user": user}}],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": client_certificate
                        or base64.b64encode(f"cert-{user}".encode()).decode(),
                        "client-key-data": client_key,
                    },
                }
            ],
        },
        sort_keys=False,
    )


def _write(path: Path, text: str, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def new_token() -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return (
        "".join(secrets.choice(alphabet) for _ in range(6)) + "." + "".join(secrets.choice(alphabet) for _ in range(16))
    )


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _admin_endpoint(kubeconfig: str | None = None) -> str:
    path = Path(kubeconfig) if kubeconfig else ADMIN_CONF
    try:
        config = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise fail(f"failed to load admin kubeconfig: open {path}: no such file or directory") from None
    return str(config["clusters"][0]["cluster"]["server"]).removeprefix("https://")


def _node(registration: dict[str, Any], control_plane: bool, host: Host, version: str) -> dict[str, Any]:
    return {
        "labels": _labels_of(registration),
        "taints": registration.get("taints"),
        "controlPlane": control_plane,
        "host": host.name,
        "unschedulable": False,
        # kubeadm starts the kubelet it finds installed; the control plane runs the cluster's version.
        "kubeletVersion": package_version(host, "kubelet"),
        **({"controlPlaneVersion": version} if control_plane else {}),
    }


CONTROL_PLANE_LABELS = {
    "node-role.kubernetes.io/control-plane": "",
    "node.kubernetes.io/exclude-from-external-load-balancers": "",
}
"""What kubeadm's mark-control-plane phase labels a control plane's Node with (the last phase of its join)."""
CONTROL_PLANE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")


def _write_static_pods(version: str) -> None:
    # etcd's data directory (the etcd pod's hostPath), which the running etcd creates.
    Path("/var/lib/etcd").mkdir(mode=0o700, exist_ok=True)
    for component in CONTROL_PLANE_COMPONENTS:
        image = f"registry.k8s.io/{component}:v{version}" if component != "etcd" else "registry.k8s.io/etcd:3.6.5-0"
        _write(Path(f"/etc/kubernetes/manifests/{component}.yaml"), f"# static pod {component}\nimage: {image}\n")


def _kubelet_too_new(host: Host, cluster: dict[str, Any]) -> None:
    """kubeadm's KubeletVersion preflight check: the kubelet must not be newer than the control plane."""
    kubelet = package_version(host, "kubelet")
    if kubelet and cluster["version"] and version_tuple(kubelet)[:2] > version_tuple(cluster["version"])[:2]:
        raise fail(
            "error execution phase preflight: [preflight] Some fatal errors occurred:\n\t[ERROR KubeletVersion]:"
            f" the kubelet version is higher than the control plane version. This is not a supported version"
            f' skew and may lead to a malfunctional cluster. Kubelet version: "{kubelet}" Control plane version:'
            f' "{cluster["version"]}"'
        )


CERTIFICATE_SECONDS = 365 * 86400
CA_SECONDS = 10 * 365 * 86400
PKI_EXPIRY = Path("/etc/kubernetes/pki/expiry.json")
"""The stub's certificates: name -> notAfter (the fleet clock), as kubeadm names them in check-expiration."""
CONTROL_PLANE_CERTIFICATES = (
    "admin.conf",
    "apiserver",
    "apiserver-etcd-client",
    "apiserver-kubelet-client",
    "controller-manager.conf",
    "etcd-healthcheck-client",
    "etcd-peer",
    "etcd-server",
    "front-proxy-client",
    "scheduler.conf",
)
AUTHORITIES = {"ca": "ca", "etcd-ca": "etcd-ca", "front-proxy-ca": "front-proxy-ca"}


def _admin_certificate(host: Host, cluster: dict[str, Any]) -> str:
    """A new client certificate for kubernetes-admin, valid a year from the fleet clock (the API checks it)."""
    data = base64.b64encode(f"cert-kubernetes-admin-{secrets.token_hex(6)}".encode()).decode()
    cluster.setdefault("clientCertificates", {})[data] = host.now() + CERTIFICATE_SECONDS
    return data


def _admin_kubeconfig(host: Host, cluster: dict[str, Any], endpoint: str) -> str:
    """admin.conf as kubeadm writes it on a control plane: the cluster's admin key, a new client certificate."""
    return _kubeconfig(
        endpoint,
        cluster["name"],
        "kubernetes-admin",
        cluster["adminKey"],
        cluster["ca"],
        client_certificate=_admin_certificate(host, cluster),
    )


def _issue_certificates(host: Host, *, first: bool) -> None:
    names = [*CONTROL_PLANE_CERTIFICATES, *(["super-admin.conf"] if first else [])]
    dates: dict[str, float] = {name: host.now() + CERTIFICATE_SECONDS for name in names}
    dates |= {f"ca:{name}": host.now() + CA_SECONDS for name in AUTHORITIES}
    _write(PKI_EXPIRY, json.dumps(dates))


def _rfc3339(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def certs(host: Host, argv: list[str]) -> int:
    """`certs check-expiration [-o json]` and `certs renew all` against this node's certificates."""
    if not PKI_EXPIRY.exists():
        raise fail("[check-expiration] error reading the certificates: open /etc/kubernetes/pki/ca.crt: no such file")
    dates: dict[str, float] = json.loads(PKI_EXPIRY.read_text())
    if argv[:1] == ["check-expiration"]:
        if _option(argv, "-o") != "json" and _option(argv, "--output") != "json":
            raise fail("kubeadm certs check-expiration: this stub prints -o json only")
        now = host.now()

        def entry(name: str, ca: str | None) -> dict[str, Any]:
            key = name if ca is not None else f"ca:{name}"
            return {
                "name": name,
                "expirationDate": _rfc3339(dates[key]),
                "residualTime": int(dates[key] - now),
                "externallyManaged": False,
                **({"caName": ca} if ca else {}),
                "missing": False,
            }

        info = {
            "kind": "CertificateExpirationInfo",
            "apiVersion": "output.kubeadm.k8s.io/v1alpha3",
            "certificates": [
                entry(n, "etcd-ca" if n.startswith("etcd") else "front-proxy-ca" if n.startswith("front") else "ca")
                for n in sorted(dates)
                if not n.startswith("ca:")
            ],
            "certificateAuthorities": [entry(n, None) for n in AUTHORITIES],
        }
        print(json.dumps(info, indent=4))
        return 0
    if argv[:2] == ["renew", "all"]:
        _renew(host, dates)
        print(
            "Done renewing certificates. You must restart the kube-apiserver, kube-controller-manager, kube-scheduler"
        )
        print("and etcd, so that they can use the new certificates.")
        return 0
    raise fail(f"kubeadm certs: the stub does not know {' '.join(argv)}")


def _renew(host: Host, dates: dict[str, float]) -> None:
    """Every certificate (not the authorities) a year from now; the kubeconfigs get new client certificates."""
    for name in dates:
        if not name.startswith("ca:"):
            dates[name] = host.now() + CERTIFICATE_SECONDS
            print(f"certificate {name} renewed")
    _write(PKI_EXPIRY, json.dumps(dates))
    endpoint = _admin_endpoint()
    for path in (ADMIN_CONF, Path("/etc/kubernetes/super-admin.conf")):
        if path.exists():
            config = yaml.safe_load(path.read_text())
            with host.cluster(endpoint) as cluster:
                config["users"][0]["user"]["client-certificate-data"] = _admin_certificate(host, cluster)
            _write(path, yaml.safe_dump(config, sort_keys=False))


def _through_network(endpoint: str) -> tuple[str, int] | None:
    """(address, port) when `endpoint` is an IP address on another port than the API servers' own: a load balancer
    or VIP in front of them (cluster.apiVip), which kubeadm reaches over the network as every node does. Endpoints on
    6443 and DNS names (the fleet has no DNS) stay the shared state's (see the module docstring)."""
    import ipaddress

    host, _, port = endpoint.rpartition(":")
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    return (host.strip("[]"), int(port)) if port.isdigit() and int(port) != 6443 else None


def _get(endpoint: str, path: str, deadline_seconds: float) -> tuple[int, str]:
    """GET https://endpoint/path as kubeadm's discovery does (no CA yet: it validates by pin afterwards), retrying
    until the deadline as kubeadm retries; (0, the last error) when nothing answered."""
    import http.client
    import ssl

    address, port = _through_network(endpoint) or ("", 0)
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    deadline, last = time.monotonic() + deadline_seconds, ""
    while True:
        connection = http.client.HTTPSConnection(address, port, timeout=2, context=context)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.read().decode(errors="replace")
        except OSError as error:
            last = f"dial tcp {address}:{port}: {error.strerror or error}"
        finally:
            connection.close()
        if time.monotonic() >= deadline:
            return 0, last
        time.sleep(0.5)


DISCOVERY_SECONDS = 20.0
"""How long the stub's discovery retries through a load balancer (kubeadm's own default is 5 min: a test needs no
more than the time a VIP takes to move)."""


def _control_plane_containers_start(host: Host) -> None:
    """The kubelet starts the static pods through containerd; on an enforcing host whose containerd root lacks its
    label every container fails (stubs/selinux.py, containers_may_run), and kubeadm's wait runs out. containerd's
    own error goes to its log (the host state's `containerdErrors`), as on a real host (journalctl -u containerd)."""
    from selinux import containers_may_run

    if (reason := containers_may_run(host)) is None:
        return
    with host.state() as state:
        state.setdefault("containerdErrors", []).append(reason)
    raise fail(
        "error execution phase wait-control-plane: failed while waiting for the control plane to start:"
        " kube-apiserver check failed at https://127.0.0.1:6443/livez: context deadline exceeded"
    )


def init(host: Host, argv: list[str]) -> int:
    if argv[:2] == ["phase", "upload-certs"]:
        return upload_certs(host, argv[2:])
    config_path = _option(argv, "--config")
    if config_path is None:
        raise fail("this stub needs kubeadm init --config")
    docs = load_config(host, config_path, {"InitConfiguration", "ClusterConfiguration", "KubeletConfiguration"})
    preflight(host)
    init_doc, cluster_doc = docs.get("InitConfiguration", {}), docs.get("ClusterConfiguration", {})
    local = init_doc.get("localAPIEndpoint", {})
    endpoint = (
        cluster_doc.get("controlPlaneEndpoint") or f"{local.get('advertiseAddress')}:{local.get('bindPort', 6443)}"
    )
    if ":" not in endpoint.rsplit("]", 1)[-1]:
        endpoint += ":6443"
    if host.cluster_exists(endpoint):
        raise fail(f"a cluster already answers at {endpoint}")
    name = init_doc.get("nodeRegistration", {}).get("name", host.name)
    # Unset, real kubeadm resolves "stable-1" and, offline, falls back to its own version.
    version = str(cluster_doc.get("kubernetesVersion") or package_version(host, "kubeadm")).lstrip("v")
    token = new_token()
    identity: dict[str, Any] = {
        "version": version,
        "endpoint": endpoint,
        "name": cluster_doc.get("clusterName", "kubernetes"),
        "caHash": secrets.token_hex(32),
        "ca": base64.b64encode(secrets.token_bytes(24)).decode(),
        "adminKey": base64.b64encode(secrets.token_bytes(32)).decode(),
    }
    _kubelet_too_new(host, identity)
    upload = "--upload-certs" in argv
    # kubeadm's phases in its order. It has no rollback: a phase that fails (or a host that restarts in it)
    # leaves the files of the phases before it, and the API (once up) holds what its phases stored.
    host.checkpoint("certs")
    _issue_certificates(host, first=True)
    host.checkpoint("kubeconfig")
    admin = _admin_kubeconfig(host, identity, endpoint)
    _write(ADMIN_CONF, admin)
    _write(Path("/etc/kubernetes/super-admin.conf"), admin)
    _write(
        KUBELET_CONF,
        _kubeconfig(
            endpoint, "kubernetes", f"system:node:{name}", base64.b64encode(secrets.token_bytes(32)).decode(), "ca"
        ),
    )
    host.checkpoint("control-plane")
    _write_static_pods(version)
    host.checkpoint("kubelet-start")
    _write(Path("/var/lib/kubelet/config.yaml"), yaml.safe_dump(docs.get("KubeletConfiguration", {})), 0o644)
    host.checkpoint("wait-control-plane")
    _control_plane_containers_start(host)
    import daemons

    daemons.start_apiserver(host)
    with host.cluster(endpoint) as cluster:  # the API server answers, on this node's etcd
        cluster.update(identity, tokens={}, certificateKey=None, nodes={}, apiServerState=str(host.state_dir))
        cluster["nodes"][name] = _node(init_doc.get("nodeRegistration", {}), True, host, version)
        cluster["etcdMembers"] = {name: {"id": secrets.token_hex(8), "started": True}}
        record_versions(cluster, f"kubeadm init {name}")
    host.checkpoint("upload-config")
    if _through_network(endpoint):
        # From here on kubeadm talks to the API through admin.conf, i.e. through the controlPlaneEndpoint.
        status, text = _get(endpoint, "/readyz", DISCOVERY_SECONDS)
        if status != 200:
            raise fail(
                f'error execution phase upload-config/kubeadm: could not reach the API server at "https://{endpoint}":'
                f" {text or status}"
            )
    with host.cluster(endpoint) as cluster:
        cluster["kubeadmConfig"] = True  # the kubeadm-config ConfigMap that joins and upgrades read
    if upload:
        host.checkpoint("upload-certs")
        with host.cluster(endpoint) as cluster:
            cluster["certificateKey"] = secrets.token_hex(32)
            cluster["certificateKeyExpires"] = host.now() + CERTIFICATE_KEY_TTL
            cluster["issuedCertificateKeys"] = [cluster["certificateKey"]]
    host.checkpoint("mark-control-plane")
    with host.cluster(endpoint) as cluster:
        cluster["nodes"][name]["labels"].update(CONTROL_PLANE_LABELS)
    host.checkpoint("bootstrap-token")
    with host.cluster(endpoint) as cluster:
        cluster["tokens"][token] = host.now() + 86400
        cluster["clusterInfo"] = True  # kube-public/cluster-info, which token discovery reads
        ca_hash, key = cluster["caHash"], cluster["certificateKey"]
    host.checkpoint("addon")
    with host.cluster(endpoint) as cluster:
        cluster["addons"] = ["coredns", "kube-proxy"]
    print("[init] Using Kubernetes version: " + str(cluster_doc.get("kubernetesVersion")))
    print("[preflight] Running pre-flight checks")
    print("Your Kubernetes control-plane has initialized successfully!\n")
    if upload:
        print("You can now join any number of control-plane nodes running the following command on each as root:\n")
        print(
            f"  kubeadm join {endpoint} --token {token} \\\n\t--discovery-token-ca-cert-hash sha256:{ca_hash} \\\n"
            f"\t--control-plane --certificate-key {key}\n"
        )
    print("Then you can join any number of worker nodes by running the following on each as root:\n")
    print(f"kubeadm join {endpoint} --token {token} \\\n\t--discovery-token-ca-cert-hash sha256:{ca_hash} ")
    return 0


def upload_certs(host: Host, argv: list[str]) -> int:
    if "--upload-certs" not in argv:
        raise fail("kubeadm init phase upload-certs: this stub needs --upload-certs")
    endpoint = _admin_endpoint()
    key = secrets.token_hex(32)
    with host.cluster(endpoint) as cluster:
        cluster["certificateKey"] = key
        cluster["certificateKeyExpires"] = host.now() + CERTIFICATE_KEY_TTL
        cluster.setdefault("issuedCertificateKeys", []).append(key)
    print('[upload-certs] Storing the certificates in Secret "kubeadm-certs" in the "kube-system" Namespace')
    print("[upload-certs] Using certificate key:")
    print(key)
    return 0


def join(host: Host, argv: list[str]) -> int:
    config_path = _option(argv, "--config")
    if config_path is None:
        raise fail("this stub needs kubeadm join --config")
    docs = load_config(host, config_path, {"JoinConfiguration"})
    doc = docs.get("JoinConfiguration") or {}
    preflight(host)
    discovery = doc.get("discovery", {}).get("bootstrapToken", {})
    endpoint, token = discovery.get("apiServerEndpoint", ""), discovery.get("token", "")
    if not re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16}", token):
        raise fail(
            "discovery.bootstrapToken.token: Invalid value: the bootstrap token is not of the form"
            ' "[a-z0-9]{6}.[a-z0-9]{16}"'
        )
    if not host.cluster_exists(endpoint):
        raise fail(
            f"error execution phase preflight: couldn't validate the identity of the API Server: Get"
            f' "https://{endpoint}/api/v1/namespaces/kube-public/configmaps/cluster-info": dial tcp:'
            " connect: connection refused"
        )
    if _through_network(endpoint):
        status, text = _get(endpoint, "/api/v1/namespaces/kube-public/configmaps/cluster-info", DISCOVERY_SECONDS)
        if status != 200:
            raise fail(
                "error execution phase preflight: couldn't validate the identity of the API Server: Get"
                f' "https://{endpoint}/api/v1/namespaces/kube-public/configmaps/cluster-info": {text or status}'
            )
        host.record_extra["discoveredThrough"] = endpoint
    with host.cluster(endpoint) as cluster:
        api_server_state = Path(cluster["apiServerState"])
        cluster_info = cluster.get("clusterInfo", False)
    if blocking_firewall(api_server_state, "6443/tcp"):
        raise fail(
            "error execution phase preflight: couldn't validate the identity of the API Server: Get"
            f' "https://{endpoint}/api/v1/namespaces/kube-public/configmaps/cluster-info": dial tcp {endpoint}:'
            " connect: no route to host"
        )
    if not cluster_info:
        raise fail(
            "error execution phase preflight: couldn't validate the identity of the API Server: failed to request"
            ' the cluster-info ConfigMap: configmaps "cluster-info" not found'
        )
    registration = doc.get("nodeRegistration", {})
    name = registration.get("name", host.name)
    control_plane = "controlPlane" in doc
    with host.cluster(endpoint) as cluster:
        if cluster["tokens"].get(token, 0) < host.now():
            raise fail(
                "error execution phase preflight: couldn't validate the identity of the API Server: token id"
                " is invalid for this cluster or it has expired"
            )
        if f"sha256:{cluster['caHash']}" not in discovery.get("caCertHashes", []):
            raise fail(
                "error execution phase preflight: cluster CA found in cluster-info ConfigMap is invalid:"
                " none of the public keys match the provided hashes"
            )
        if control_plane and cluster.get("certificateKeyExpires", 0) < host.now():
            # The kubeadm-certs Secret is owned by a 2 h token; once it is gone there is nothing to download.
            raise fail(
                "error execution phase control-plane-prepare/download-certs: error downloading certs: error"
                ' downloading the secret: Secret "kubeadm-certs" was not found in the "kube-system" Namespace.'
                " This Secret might have expired. Please, run `kubeadm init phase upload-certs --upload-certs`"
                " on a control plane to generate a new one"
            )
        if control_plane and doc["controlPlane"].get("certificateKey") != cluster.get("certificateKey"):
            raise fail(
                "error execution phase control-plane-prepare/download-certs: error downloading certs: error"
                " decoding certificate key: the certificate key does not match the uploaded certificates"
            )
        _kubelet_too_new(host, cluster)
        version = cluster["version"]
        admin = _admin_kubeconfig(host, cluster, endpoint) if control_plane else ""
    # kubeadm join's phases in its order; like init, it leaves what the phases before a failure did.
    if control_plane:
        host.checkpoint("control-plane-prepare")
        _issue_certificates(host, first=False)
        _write(ADMIN_CONF, admin)
    host.checkpoint("kubelet-start")
    with host.cluster(endpoint) as cluster:
        existing = cluster["nodes"].get(name)
        if existing is not None and existing.get("ready", True):
            raise fail(
                f'error execution phase kubelet-start: a Node with name {name!r} and status "Ready" already'
                " exists in the cluster. You must delete the existing Node or change the name of this new"
                " joining Node"
            )
    _write(Path("/var/lib/kubelet/config.yaml"), "kind: KubeletConfiguration\n", 0o644)
    _write(BOOTSTRAP_KUBELET_CONF, _kubeconfig(endpoint, "kubernetes", "tls-bootstrap-token-user", "token", "ca"))
    host.checkpoint("kubelet-tls-bootstrap")
    # The kubelet's TLS bootstrap: its own kubeconfig, then it registers its Node.
    _write(
        KUBELET_CONF,
        _kubeconfig(
            endpoint, "kubernetes", f"system:node:{name}", base64.b64encode(secrets.token_bytes(32)).decode(), "ca"
        ),
    )
    BOOTSTRAP_KUBELET_CONF.unlink()
    with host.cluster(endpoint) as cluster:
        cluster["nodes"][name] = _node(registration, control_plane, host, version)
        record_versions(cluster, f"kubeadm join {name}")
    if control_plane:
        host.checkpoint("control-plane-join")
        # The etcd member is added and its static pod written in one step here (kubeadm adds it, then writes the
        # manifest and waits for it: the stub does not model a member added whose manifest never came).
        with host.cluster(endpoint) as cluster:
            cluster.setdefault("etcdMembers", {})[name] = {"id": secrets.token_hex(8), "started": True}
        _write_static_pods(version)
        _control_plane_containers_start(host)
        import daemons

        daemons.start_apiserver(host)
        host.checkpoint("mark-control-plane")
        with host.cluster(endpoint) as cluster:
            cluster["nodes"][name]["labels"].update(CONTROL_PLANE_LABELS)
    print("[preflight] Running pre-flight checks")
    print(
        "This node has joined the cluster" + (" and a new control plane instance was created" if control_plane else ":")
    )
    return 0


def token(host: Host, argv: list[str]) -> int:
    if argv[:1] == ["delete"]:
        return token_delete(host, argv[1:])
    if argv[:1] != ["create"]:
        raise fail(f"kubeadm token: the stub supports create and delete only, not {' '.join(argv)}")
    endpoint = _admin_endpoint(_option(argv, "--kubeconfig"))
    ttl = _option(argv, "--ttl") or "24h"
    seconds = int(ttl[:-1]) * {"h": 3600, "m": 60, "s": 1}[ttl[-1]]
    value = new_token()
    with host.cluster(endpoint) as cluster:
        cluster["tokens"][value] = host.now() + seconds
        ca_hash = cluster["caHash"]
    if "--print-join-command" in argv:
        # Real kubeadm's template leaves a space after each hash.
        print(f"kubeadm join {endpoint} --token {value} --discovery-token-ca-cert-hash sha256:{ca_hash} ")
    else:
        print(value)
    return 0


def token_delete(host: Host, argv: list[str]) -> int:
    """`kubeadm token delete <id or token>...`: the tokens go; the test still knows them (deletedTokens)."""
    endpoint = _admin_endpoint(_option(argv, "--kubeconfig"))
    ids = [a.split(".")[0] for a in argv if not a.startswith("-") and a != _option(argv, "--kubeconfig")]
    with host.cluster(endpoint) as cluster:
        for value in [t for t in cluster["tokens"] if t.split(".")[0] in ids]:
            del cluster["tokens"][value]
            cluster.setdefault("deletedTokens", []).append(value)
    for token_id in ids:
        print(f'bootstrap token "{token_id}" deleted')
    return 0


def reset(host: Host, argv: list[str]) -> int:
    if "-f" not in argv and "--force" not in argv:
        raise fail("[reset] Are you sure you want to proceed? [y/N]: aborted (no terminal)")
    if Path("/etc/kubernetes/manifests/etcd.yaml").exists() and ADMIN_CONF.exists() and KUBELET_CONF.exists():
        endpoint, name = _admin_endpoint(), _kubelet_identity()[1]
        if host.cluster_exists(endpoint):
            # The remove-etcd-member phase: a stacked control plane leaves etcd's member list.
            with host.cluster(endpoint) as cluster:
                members = cluster.get("etcdMembers", {})
                members.pop(name, None)
                last = not members
            print(f"[reset] Removing member {name} from the etcd cluster")
            if last:
                # The only member's data directory goes below: the API server's store goes with it.
                shutil.rmtree(host.cluster_root / _safe(endpoint), ignore_errors=True)
    if KUBELET_CONF.exists():
        endpoint, name = _kubelet_identity()
        if host.cluster_exists(endpoint):
            with host.cluster(endpoint) as cluster:
                if name in cluster.get("nodes", {}):
                    cluster["nodes"][name]["ready"] = False  # its kubelet stops: NotReady once the grace period ends
    import daemons

    daemons.stop("kube-apiserver")  # its static pod's manifest goes below; the kubelet stops it
    for name in ("admin.conf", "super-admin.conf", "kubelet.conf", "bootstrap-kubelet.conf"):
        Path(f"/etc/kubernetes/{name}").unlink(missing_ok=True)
    for directory in ("/etc/kubernetes/manifests", "/etc/kubernetes/pki", "/var/lib/kubelet", "/var/lib/etcd"):
        shutil.rmtree(directory, ignore_errors=True)
    print("[reset] Deleted contents of: [/etc/kubernetes/manifests /var/lib/kubelet /etc/cni/net.d]")
    return 0


def _kubelet_identity() -> tuple[str, str]:
    """(cluster endpoint, node name) from the kubelet's kubeconfig: where this node belongs."""
    try:
        config = yaml.safe_load(KUBELET_CONF.read_text())
    except FileNotFoundError:
        raise fail('couldn\'t create a Kubernetes client from file "/etc/kubernetes/kubelet.conf"') from None
    endpoint = str(config["clusters"][0]["cluster"]["server"]).removeprefix("https://")
    return endpoint, str(config["users"][0]["name"]).removeprefix("system:node:")


def _upgrade_target(host: Host, cluster: dict[str, Any], wanted: str) -> None:
    """kubeadm's version policy: one minor at a time, never down, never past the kubeadm binary."""
    current, target = version_tuple(cluster["version"]), version_tuple(wanted)
    kubeadm_version = package_version(host, "kubeadm")
    if target < current:
        raise fail(
            f"[upgrade/version] FATAL: the --version argument is invalid due to these fatal errors:\n\n- Specified"
            f' version to upgrade to "v{wanted}" is lower than the cluster version "v{cluster["version"]}".'
            " Downgrades are not supported yet"
        )
    if target[0] != current[0] or target[1] > current[1] + 1:
        raise fail(
            f"[upgrade/version] FATAL: the --version argument is invalid due to these fatal errors:\n\n- Specified"
            f' version to upgrade to "v{wanted}" is too high; kubeadm can upgrade only 1 minor version at a time'
        )
    if version_tuple(kubeadm_version) < target:
        raise fail(
            f'[upgrade/version] FATAL: Specified version to upgrade to "v{wanted}" is higher than the kubeadm'
            f' version "v{kubeadm_version}". Upgrade kubeadm first using the tool you used to install kubeadm'
        )


def upgrade(host: Host, argv: list[str]) -> int:
    action, rest = (argv[0], argv[1:]) if argv else ("", [])
    endpoint, name = _kubelet_identity()
    with host.cluster(endpoint) as cluster:
        node = cluster["nodes"].get(name)
        if node is None:
            raise fail(f'nodes "{name}" not found')
        if action == "plan":
            wanted = next((a.lstrip("v") for a in rest if not a.startswith("-")), None)
            if wanted:
                _upgrade_target(host, cluster, wanted)
            print(f"[upgrade/versions] Cluster version: {cluster['version']}")
            print(f"[upgrade/versions] kubeadm version: {package_version(host, 'kubeadm')}")
            return 0
        if action == "apply":
            wanted = next((a.lstrip("v") for a in rest if not a.startswith("-")), "")
            if not wanted:
                raise fail("missing one or more required arguments. Required arguments: [version]")
            if "--yes" not in rest and "-y" not in rest:
                raise fail("[upgrade] Are you sure you want to proceed? [y/N]: aborted (no terminal)")
            if not node.get("controlPlane"):
                raise fail("[upgrade/apply] FATAL: this node is not a control-plane node")
            _upgrade_target(host, cluster, wanted)
            cluster["version"] = wanted
            node["controlPlaneVersion"] = wanted
            record_versions(cluster, f"kubeadm upgrade apply {name}")
            _write_static_pods(wanted)
            message = f'[upgrade/successful] SUCCESS! Your cluster was upgraded to "v{wanted}". Enjoy!'
        elif action == "node":
            kubeadm_version = package_version(host, "kubeadm")
            if version_tuple(kubeadm_version)[:2] < version_tuple(cluster["version"])[:2]:
                raise fail(
                    f'[upgrade] FATAL: the kubeadm version "v{kubeadm_version}" is older than the cluster version'
                    f' "v{cluster["version"]}": upgrade kubeadm first'
                )
            if node.get("controlPlane"):
                node["controlPlaneVersion"] = cluster["version"]
                record_versions(cluster, f"kubeadm upgrade node {name}")
                _write_static_pods(cluster["version"])
            message = "[upgrade] The configuration for this node was successfully upgraded!"
        else:
            raise fail(f"kubeadm upgrade: the stub does not know {' '.join(argv)}")
    # kubeadm's default --certificate-renewal=true: a control plane's upgrade renews its certificates.
    if PKI_EXPIRY.exists():
        _renew(host, json.loads(PKI_EXPIRY.read_text()))
    print(message)
    return 0


def kubeadm(host: Host, argv: list[str]) -> int:
    commands = {"init": init, "join": join, "token": token, "reset": reset, "upgrade": upgrade, "certs": certs}
    if not argv or argv[0] not in commands:
        raise fail(f"kubeadm: the stub does not know {' '.join(argv)}")
    return commands[argv[0]](host, argv[1:])


if __name__ == "__main__":
    main({"kubeadm": kubeadm})
