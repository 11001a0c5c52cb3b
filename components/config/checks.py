"""Value checks shared by config sections: each returns None when fine, else what is wrong."""

from __future__ import annotations

import ipaddress
import posixpath
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from . import formats, go_yaml
from .redact import redacted
from .schema import Check

_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)
_DURATION = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+", re.ASCII)
_PROMETHEUS_DURATION = re.compile(r"(\d+(ms|s|m|h|d|w|y))+", re.ASCII)
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*", re.ASCII)
_QUANTITY = re.compile(r"\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?", re.ASCII)
_PERCENTAGE = re.compile(r"\d+(\.\d+)?%", re.ASCII)
_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)", re.ASCII)
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", re.ASCII)
_TAINT = re.compile(r"([^=:]+)(=([^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)", re.ASCII)


def host(value: str) -> str | None:
    if formats.is_ip(value) and formats.single_line(value) is None:
        if (mapped := formats.ipv4_mapped(value)) is not None:
            return (
                f"is an IPv4-mapped IPv6 address: write the IPv4 address {mapped} (one spelling per address, so"
                " that it compares equal to itself everywhere it is used)"
            )
        return None
    if "%" in value and formats.is_ip(value.split("%", 1)[0]):
        return "is an IPv6 address with a zone id (%…), which names an interface of the machine reading it: no zone id"
    return formats.dns_name(value) or reads_as_written(value, "a host name")


def host_port(value: str) -> str | None:
    """host, host:port or [ipv6]:port."""
    match = re.fullmatch(r"\[(?P<v6>[^\]]+)\](:(?P<port6>[0-9]+))?|(?P<host>[^:]+)(:(?P<port>[0-9]+))?", value)
    if not match:
        return "is not host or host:port" if host(value) else None
    name = match.group("v6") or match.group("host")
    port = match.group("port6") or match.group("port")
    if host(name):
        return "is not an IP address or DNS name (with an optional :port)"
    if port is not None and not 1 <= int(port) <= 65535:
        return "has a port outside 1-65535"
    return None


def cidr(value: str) -> str | None:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as err:
        return f"is not a CIDR network ({err})"
    return None


def k8s_name(value: str) -> str | None:
    if len(value) > 63 or not _K8S_NAME.fullmatch(value):
        return "is not a valid name (lowercase letters, digits and '-', at most 63, start and end alphanumeric)"
    return reads_as_written(value)


def reads_as_written(value: str, what: str = "a name") -> str | None:
    """A name or host the charts write unquoted (every chart its namespace, some their object names, the NFS chart
    its server) must reach the cluster as that text: Kubernetes' YAML reader takes `123`, `1e3`, `0x1f`, `y`, `on`
    or `null` as a number, a boolean or null, and the object is refused or wrong (tests/test_unquoted_chart_values.py
    lists every such placement)."""
    kind = go_yaml.plain_scalar_kind(value)
    if kind == "string":
        return None
    read = {"number": "a number", "bool": "a boolean", "null": "null"}.get(kind, "no value")
    return (
        f"reads as {read} in YAML, and charts write such values unquoted, so Kubernetes would not get this text:"
        f" choose {what} that YAML reads as text"
    )


GO_DURATION_MAX_SECONDS = (2**63 - 1) / 1e9
"""time.ParseDuration's limit (int64 nanoseconds, about 2562047h): kubelet, containerd and kubectl refuse more."""


def duration(value: str) -> str | None:
    """A duration as Go's time.ParseDuration reads it (every reader of ours is a Go program): a whole number of
    nanoseconds, as time.Duration is an int64 of them; ParseDuration drops a fraction of one, so `0.5ns` would
    reach the component as 0 and `1.5ns` as 1ns."""
    if not _DURATION.fullmatch(value):
        return "is not a duration such as 30m, 1h30m or 90s"
    if duration_seconds(value) > GO_DURATION_MAX_SECONDS:
        return "is longer than a Go duration can be (2562047h)"
    if duration_nanoseconds(value) % 1:
        return (
            "is not a whole number of nanoseconds: Go's duration type holds whole nanoseconds and drops the rest"
            f" ({value} would be read as {int(duration_nanoseconds(value))}ns)"
        )
    return None


def positive_duration(value: str) -> str | None:
    """A duration its component refuses as 0 (Kueue's waitForPodsReady.timeout: pkg/config/validation.go, v0.19.2,
    `Timeout.Duration == 0` is "must be specified")."""
    if problem := duration(value):
        return problem
    if duration_nanoseconds(value) == 0:
        return "must be longer than 0"
    return None


def duration_nanoseconds(value: str) -> Decimal:
    units = {"ns": 1, "us": 1000, "µs": 1000, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
    return sum(
        (Decimal(n) * units[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)", value)), Decimal(0)
    )


def prometheus_duration(value: str) -> str | None:
    if not _PROMETHEUS_DURATION.fullmatch(value):
        return "is not a Prometheus duration such as 15d, 12h or 1w"
    return None


def prometheus_metric_name(value: str) -> str | None:
    if not _METRIC_NAME.fullmatch(value):
        return "is not a Prometheus metric name (letters, digits, _ and :, not starting with a digit)"
    return None


def duration_seconds(value: str) -> float:
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)", value))


def quantity(value: str) -> str | None:
    """An amount (CPU, memory, a size, a weight): a percentage is no amount, and Kubernetes refuses one here."""
    if not _QUANTITY.fullmatch(value):
        return "is not a Kubernetes quantity such as 500m or 4Gi"
    return None


def quantity_or_percentage(value: str) -> str | None:
    """Where the reader takes either (the kubelet's eviction thresholds: 10% or 5Gi)."""
    if _PERCENTAGE.fullmatch(value) or _QUANTITY.fullmatch(value):
        return None
    return "is not a quantity or percentage such as 10% or 5Gi"


def size(value: str) -> str | None:
    """A volume or memory size: a quantity above zero (a zero-sized volume can never be bound or written)."""
    if problem := quantity(value):
        return problem
    if float(re.sub(r"[A-Za-z]+$", "", value)) == 0:
        return "must be larger than 0"
    return None


FREE_TEXT_MAX = 200


def free_text(value: str) -> str | None:
    """A note a person writes (where a number comes from): one printable line of at most FREE_TEXT_MAX characters,
    and nothing shaped like a credential, since it is copied into objects anyone with read access sees."""
    if not value.strip():
        return "is empty"
    if len(value) > FREE_TEXT_MAX:
        return f"is {len(value)} characters long: at most {FREE_TEXT_MAX}, one line (a reference, not a document)"
    if problem := formats.single_line(value):
        return problem
    if redacted(value) != value:
        return "looks like it holds a credential (a key, token or password): it would be copied in plaintext"
    return None


def basic_auth_user(value: str) -> str | None:
    """An HTTP basic-auth user-id (RFC 7617): one line of printable text without a colon, which ends the user-id."""
    if not value or len(value) > 256 or not value.isprintable() or ":" in value:
        return "is not a basic-auth user name (1 to 256 printable characters, no colon)"
    return None


def _number_hint(value: str) -> str:
    """YAML reads an unquoted 1.30 as the number 1.3: say so where a version arrived as a number."""
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?", value):
        return ' (YAML read it as a number: write the version in quotes, e.g. "1.30")'
    return ""


def k8s_version(value: str) -> str | None:
    match = _VERSION.fullmatch(value)
    if not match or match.group(1) != "1":
        return "is not a Kubernetes version such as 1.34.2 (Kubernetes releases are 1.x)" + _number_hint(value)
    return None


def version_tuple(value: str) -> tuple[int, int, int]:
    match = _VERSION.fullmatch(value)
    if not match:
        raise ValueError(value)
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch)


_PINNED = re.compile(r"v?\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?", re.ASCII)


def pinned_chart_version(value: str) -> str | None:
    if not _PINNED.fullmatch(value):
        return "is not a pinned chart version such as 1.2.3 (ranges and 'latest' are not allowed)" + _number_hint(value)
    return None


def between(low: float, high: float) -> Check:
    def check(value: Any) -> str | None:
        if not low <= value <= high:
            return f"must be between {low:g} and {high:g}"
        return None

    return check


_MAX_UNAVAILABLE = re.compile(r"(\d+)(%?)", re.ASCII)


def max_unavailable(value: str) -> str | None:
    """Nodes out at once: a count or a percentage; zero would never let a rollout start."""
    match = _MAX_UNAVAILABLE.fullmatch(value)
    if not match or int(match.group(1)) == 0 or (match.group(2) and int(match.group(1)) > 100):
        return "is not a node count (1, 2, ...) or a percentage (1%-100%)"
    return None


_SELECTOR_TERMS = re.compile(r",(?![^()]*\))")
_SELECTOR_SET = re.compile(r"\s*(\S+)\s+(in|notin)\s*\(([^()]*)\)\s*", re.ASCII)
_SELECTOR_EQUALITY = re.compile(r"\s*([^!=\s]+)\s*(==|=|!=)\s*([^\s]*)\s*", re.ASCII)
_SELECTOR_EXISTS = re.compile(r"\s*(!?)\s*([^!=\s]+)\s*", re.ASCII)


def label_selector(value: str) -> str | None:
    """A label selector string as `kubectl -l` and the API's labelSelector take it (apimachinery labels.Parse):
    comma-separated `key`, `!key`, `key=v`, `key==v`, `key!=v`, `key in (v,...)`, `key notin (v,...)`.
    The empty selector (every pod) is allowed: the key's own doc says what it means there."""
    if not value.strip():
        return None
    for term in _SELECTOR_TERMS.split(value):
        if match := _SELECTOR_SET.fullmatch(term):
            key, values = match.group(1), [v.strip() for v in match.group(3).split(",")]
            if values == [""]:
                return f"has {term.strip()!r}: an in/notin set needs at least one value"
        elif match := _SELECTOR_EQUALITY.fullmatch(term):
            key, values = match.group(1), [match.group(3)]
        elif match := _SELECTOR_EXISTS.fullmatch(term):
            key, values = match.group(2), []
        else:
            return (
                f"has {term.strip()!r}, which is not a label selector term (key, !key, key=value, key!=value,"
                " key in (a,b), key notin (a,b))"
            )
        if label_key(key):
            return f"has {term.strip()!r}, whose key {key!r} is not a valid label key"
        bad = [v for v in values if formats.label_value(v)]
        if bad:
            return f"has {term.strip()!r}, whose value {bad[0]!r} is not a valid label value"
    return None


_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)


GATEWAY_HOSTNAME = re.compile(r"(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
"""Gateway API's Hostname (gateway-api v1.6.1 HTTPRoute CRD, spec.hostnames items: this pattern, 1 to 253
characters, "IPs are not allowed")."""
HOSTNAME_MAX = 253


def gateway_hostname(value: str) -> str | None:
    """A name a Gateway API route can carry: lowercase, no trailing dot, no wildcard here (KServe builds each
    endpoint's host under it), no IP address, at most 253 characters."""
    if formats.is_ip(value):
        return "is an IP address: Gateway API hostnames are DNS names (its HTTPRoute CRD: IPs are not allowed)"
    if value.startswith("*.") or len(value) > HOSTNAME_MAX or not GATEWAY_HOSTNAME.fullmatch(value):
        return (
            "is not a Gateway API hostname: lowercase letters, digits, '-' and '.', no trailing dot or wildcard, at"
            f" most {HOSTNAME_MAX} characters (e.g. models.example.com)"
        )
    return None


def label_key(value: str) -> str | None:
    """A qualified name as Kubernetes validates label and taint keys (k8s.io/apimachinery
    pkg/util/validation/validation.go, IsQualifiedName): an optional prefix that is a lowercase DNS-1123 subdomain
    of at most 253 characters, not empty when the `/` is there, then a name of at most 63."""
    prefix, slash, name = value.rpartition("/")
    if slash and not prefix:
        return "has an empty prefix before '/': the prefix is a DNS subdomain such as example.com"
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return "has a prefix that is not a lowercase DNS subdomain (a-z, 0-9, '-' and '.', at most 253 characters)"
    if not _LABEL_NAME.fullmatch(name):
        return "is not a valid label key"
    return None


# What the kubelet may set on its own Node (NodeRestriction; k8s.io/kubelet/pkg/apis/well_known_labels.go).
KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def kubelet_may_set_label(key: str) -> bool:
    """Whether a kubelet may self-apply the label (node labels go through kubelet --node-labels at join)."""
    namespace = key.rpartition("/")[0]
    reserved = any(namespace == d or namespace.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))
    if not reserved or key in KUBELET_LABELS:
        return True
    return any(namespace == n or namespace.endswith("." + n) for n in KUBELET_LABEL_NAMESPACES)


def kubelet_label_problem(key: str) -> str:
    return (
        f"has label {key!r}, which the kubelet may not set on its own node (kubernetes.io and k8s.io labels are"
        f" reserved except {', '.join(n + '/*' for n in KUBELET_LABEL_NAMESPACES)} and a few well-known ones); use"
        " another prefix such as mlcluster.io/, or label the node with kubectl after it joined"
    )


def labels(value: Any) -> str | None:
    for key, val in value.items():
        if label_key(key):
            return f"has an invalid label key {key!r}"
        if formats.label_value(val):
            return f"has an invalid value {val!r} for label {key!r}"
    return None


def taint(value: str) -> str | None:
    match = _TAINT.fullmatch(value)
    # Key and value follow the label grammar (they reach kubeadm's JoinConfiguration and the node object).
    if not match or label_key(match.group(1)) or formats.label_value(match.group(3) or ""):
        return "is not a taint such as nvidia.com/gpu=present:NoSchedule"
    return None


def parse_taint(value: str) -> dict[str, str]:
    match = _TAINT.fullmatch(value)
    if not match:
        raise ValueError(value)
    out = {"key": match.group(1), "effect": match.group(4)}
    if match.group(3):
        out["value"] = match.group(3)
    return out


def each(check: Callable[[Any], str | None]) -> Check:
    def check_all(values: Any) -> str | None:
        for item in values:
            message = check(item)
            if message:
                return f"item {item!r} {message}"
        return None

    return check_all


def gpu_model(value: str) -> str | None:
    """A GPU model becomes the mlcluster.io/gpu-model node-label value and (lowercased) a Kueue flavor name."""
    if not value or formats.label_value(value):
        return "is not a GPU model name such as H100-SXM-80GB (a label value: letters, digits, '-', '_', '.')"
    return None


def version_tag(value: str) -> str | None:
    """A version that becomes an image tag (a driver version such as 580.95.05)."""
    if not re.fullmatch(r"[0-9][A-Za-z0-9._-]{0,127}", value):
        return "is not a version such as 580.95.05 (it becomes an image tag)"
    return None


def metric_name(value: str) -> str | None:
    if not re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:.|/-]{0,252}", value):
        return "is not a metric name such as queue_length"
    return None


PATH_MAX = 4095
"""Linux's PATH_MAX (4096) less the terminating NUL; a component is at most NAME_MAX, 255 bytes."""

SYSTEM_DIRECTORIES = frozenset(
    {
        "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media", "/mnt", "/opt", "/proc",
        "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/lib", "/usr/local",
        "/usr/local/bin", "/usr/sbin", "/usr/share", "/var", "/var/lib", "/var/log", "/var/tmp",
        "/etc/kubernetes", "/etc/containerd", "/var/lib/kubelet", "/var/lib/containerd", "/var/lib/etcd",
    }
)  # fmt: skip
"""Directories a step must never take over as its own (create, chmod 0700, prune): the system's and Kubernetes'."""

ETCD_DATA_DIR = "/var/lib/etcd"


def absolute_path(value: str) -> str | None:
    """An absolute path written as the kernel resolves it: normalised (no `.`, `..` or `//`; one trailing `/` is
    allowed, and dropped wherever paths are compared: `directory_key`), printable
    ASCII (no control or direction-override characters that would show another path than the one used), within
    PATH_MAX and NAME_MAX."""
    if not value.startswith("/"):
        return "is not an absolute path"
    if not all(" " <= character <= "~" for character in value):
        return "is not an absolute path of printable ASCII characters"
    if posixpath.normpath(value) != directory_key(value) or value.startswith("//"):
        return f"is not a normalised absolute path (write {posixpath.normpath('/' + value.lstrip('/'))})"
    if len(value.encode()) > PATH_MAX or any(len(part.encode()) > 255 for part in value.split("/")):
        return f"is longer than a path may be ({PATH_MAX} bytes, 255 a component)"
    return None


def node_directory(value: str) -> str | None:
    """A directory a node step creates and owns as root: an absolute path, and not one the system or Kubernetes
    owns (the step would chmod or prune it)."""
    if problem := absolute_path(value):
        return problem
    if directory_key(value) in SYSTEM_DIRECTORIES:
        return "is a system directory: give a directory of its own, such as /var/lib/mlcluster/etcd-snapshots"
    if is_within(directory_key(value), ETCD_DATA_DIR):
        return f"is inside etcd's data directory ({ETCD_DATA_DIR}), which a restore replaces"
    return None


def mount_path(value: str) -> str | None:
    """Where a volume is mounted in a container: an absolute path other than the container's root."""
    if problem := absolute_path(value):
        return problem
    if value == "/":
        return "is the container's root: mount the volume on a directory of its own, such as /checkpoints"
    return None


def directory_key(path: str) -> str:
    """What identifies a directory: `/var/lib/s/` is `/var/lib/s`."""
    return path.rstrip("/") or "/"


def is_within(path: str, directory: str) -> bool:
    """`path` is `directory` or below it (both normalised absolute paths)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def git_tag(value: str) -> str | None:
    """A release tag (v1.9.4, 2.14.3): a pinned ref, never a branch such as master."""
    if not _PINNED.fullmatch(value):
        return "is not a pinned release tag such as v1.9.4 (branches are not allowed)" + _number_hint(value)
    return None


def toleration_of(taint: str) -> dict[str, str]:
    """The pod toleration that matches a key=value:Effect taint exactly."""
    parsed = parse_taint(taint)
    operator = {"operator": "Equal", "value": parsed["value"]} if "value" in parsed else {"operator": "Exists"}
    return {"key": parsed["key"], **operator, "effect": parsed["effect"]}


_STACK_PART = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)


def stack_reference(value: str) -> str | None:
    """A fully qualified stack name, as StackReference takes it: organization/project/stack."""
    parts = value.split("/")
    if len(parts) != 3 or not all(_STACK_PART.fullmatch(part) for part in parts):
        return "is not a stack name of the form organization/project/stack (e.g. acme/mlcluster-nodes/prod)"
    return None
