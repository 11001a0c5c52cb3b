"""mlcluster's guard rails as Pulumi policies: run by `pulumi preview --policy-pack policy`, and unit-tested
without the CLI by calling each policy's `validate` on the arguments the engine would pass.

Self-contained on purpose (pulumi_policy and the standard library only): the CLI runs a policy pack in its
own virtualenv, where the project's code is not importable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

COMMAND = "command:remote:Command"
COPY = "command:remote:CopyToRemote"
SSH_TYPES = (COMMAND, COPY)
"""The resources that open SSH sessions (a command, the copy of each node's scripts)."""
HELM_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"

# --- helpers --------------------------------------------------------------------------------------


def _get(mapping: Any, key: str) -> Any:
    """A value that is unknown during preview reads as None: a policy checks what is known, never guesses."""
    if not isinstance(mapping, Mapping):
        return None
    try:
        return mapping.get(key)
    except UnknownValueError:
        return None


def _items(value: Any) -> Iterator[Any]:
    """Elements of a list, skipping those unknown during preview; nothing for a non-list."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        for index in range(len(value)):
            try:
                yield value[index]
            except UnknownValueError:
                continue


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, value) pair, depth first, skipping values unknown during preview."""
    yield path, value
    if isinstance(value, Mapping):
        for key in value:
            try:
                child = value[key]
            except UnknownValueError:
                continue
            yield from _walk(child, f"{path}.{key}" if path else str(key))
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        for index in range(len(value)):
            try:
                child = value[index]
            except UnknownValueError:
                continue
            yield from _walk(child, f"{path}[{index}]")


def _scripts(props: Mapping[str, Any]) -> str:
    return "\n".join(s for key in ("create", "update") if isinstance(s := _get(props, key), str))


def _int(quantity: Any) -> int | None:
    if isinstance(quantity, bool):
        return None
    if isinstance(quantity, (int, float)):
        return int(quantity)
    if isinstance(quantity, str) and quantity.strip().isdigit():
        return int(quantity)
    return None


# --- ssh-host-keys-pinned -------------------------------------------------------------------------


def _host_keys_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in SSH_TYPES:
        return
    connection = _get(args.props, "connection")
    if not isinstance(connection, Mapping):
        return
    host = _get(connection, "host") or "?"
    if not _get(connection, "hostKey"):
        report(f"SSH to {host} accepts any host key: pin it (nodes[i].hostKey, `ssh-keyscan -t ed25519 {host}`)", None)
    proxy = _get(connection, "proxy")
    if isinstance(proxy, Mapping) and not _get(proxy, "hostKey"):
        report(f"the bastion {_get(proxy, 'host') or '?'} in front of {host} has no pinned host key", None)


# --- chart-versions-pinned ------------------------------------------------------------------------

EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


def _chart_versions_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in HELM_TYPES:
        return
    chart, version = _get(args.props, "chart"), _get(args.props, "version")
    if isinstance(chart, str) and "@sha256:" in chart:
        return
    if not isinstance(version, str) or not EXACT_VERSION.match(version):
        report(f"chart {chart} has version {version!r}: pin an exact version so a preview shows every upgrade", None)


# --- gpu-workloads-have-gpu-limits ----------------------------------------------------------------

GPU_RESOURCE = re.compile(r"^nvidia\.com/(gpu|mig-.+)$")
GPU_NODE_LABELS = (
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.product",
    "mlcluster.io/gpu-model",
    "cloud.google.com/gke-accelerator",
    "kubernetes.azure.com/accelerator",
)


def _gpu_keys(mapping: Any) -> dict[str, Any]:
    if not isinstance(mapping, Mapping):
        return {}
    return {k: _get(mapping, k) for k in mapping if GPU_RESOURCE.match(str(k))}


def _targets_gpu_nodes(pod: Mapping[str, Any]) -> bool:
    selector = _get(pod, "nodeSelector")
    if isinstance(selector, Mapping) and any(k in GPU_NODE_LABELS for k in selector):
        return True
    return any(_get(toleration, "key") == "nvidia.com/gpu" for toleration in _items(_get(pod, "tolerations")))


# Where Kubernetes objects carry a container's resources: containers, KServe model/predictor specs
# (`resources`), Kubeflow TrainJob trainers (`resourcesPerNode`).
RESOURCE_KEYS = ("resources", "resourcesPerNode")


def _same_quantity(a: Any, b: Any) -> bool:
    """1, 1.0 (the wire has only doubles) and "1" are the same quantity."""
    number_a, number_b = _int(a), _int(b)
    return number_a == number_b if number_a is not None and number_b is not None else str(a) == str(b)


def _gpu_limits(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if not args.resource_type.startswith("kubernetes:") or args.resource_type in HELM_TYPES:
        return
    kind = _get(args.props, "kind")
    placed: list[str] = []
    limited = False
    for path, value in _walk(args.props):
        if not isinstance(value, Mapping):
            continue
        for key in RESOURCE_KEYS:
            resources = _get(value, key)
            if not isinstance(resources, Mapping):
                continue
            requests, limits = _gpu_keys(_get(resources, "requests")), _gpu_keys(_get(resources, "limits"))
            limited = limited or bool(limits)
            for name, amount in requests.items():
                if not _same_quantity(limits.get(name), amount):
                    where = f"{path}.{key}" if path else key
                    report(f"{where}: requests {name}: {amount} without the same limit (GPUs are set as limits)", None)
        if kind != "DaemonSet" and _get(value, "containers") is not None and _targets_gpu_nodes(value):
            placed.append(path or str(kind))
    # A pod template placed on GPU nodes needs a GPU limit somewhere in the object: in its containers, or where
    # the object's own API sets it for them (a TrainJob's trainer.resourcesPerNode fills its runtime's pods).
    if not limited:
        for path in placed:
            report(
                f"{path}: runs on GPU nodes but no container has an nvidia.com/gpu limit"
                " (it would see GPUs the scheduler gave to others)",
                None,
            )


# --- kubelet-thresholds-sane ----------------------------------------------------------------------

MAX_HIGH_THRESHOLD = 95
UPSTREAM_HIGH = 85
_THRESHOLD = re.compile(
    r"""["']?imageGC(?P<camel>High|Low)ThresholdPercent["']?\s*[:=]\s*["']?(?P<a>\d+)"""
    r"""|--image-gc-(?P<flag>high|low)-threshold[= ]+["']?(?P<b>\d+)"""
)


def kubelet_thresholds(text: str) -> tuple[list[int], list[int]]:
    """(high, low) image GC thresholds set in a script: KubeletConfiguration keys or kubelet flags."""
    highs: list[int] = []
    lows: list[int] = []
    for match in _THRESHOLD.finditer(text):
        which = (match.group("camel") or match.group("flag")).lower()
        (highs if which == "high" else lows).append(int(match.group("a") or match.group("b")))
    return highs, lows


def _kubelet_thresholds_sane(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != COMMAND:
        return
    highs, lows = kubelet_thresholds(_scripts(args.props))
    for high in highs:
        if high > MAX_HIGH_THRESHOLD:
            report(f"image GC high threshold {high}% leaves no room before disk-pressure eviction (at most 95)", None)
    if not lows:
        return
    high = min(highs) if highs else UPSTREAM_HIGH
    for low in lows:
        if low >= high:
            report(f"image GC low threshold {low}% is not below the high threshold {high}%: GC would never free", None)


# --- no-secret-in-plain-input ---------------------------------------------------------------------

# The inputs mlcluster marks secret (or sends on stdin); a secret-looking value anywhere else has leaked.
CONNECTION_SECRETS = (
    "connection.privateKey",
    "connection.password",
    "connection.proxy.privateKey",
    "connection.proxy.password",
)
SECRET_INPUTS: dict[str, tuple[str, ...]] = {
    COMMAND: (*CONNECTION_SECRETS, "stdin"),
    COPY: CONNECTION_SECRETS,
    KUBERNETES_PROVIDER: ("kubeconfig",),
    "kubernetes:core/v1:Secret": ("data", "stringData"),
}
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("kubeadm bootstrap token", re.compile(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b")),
    ("kubeadm certificate key", re.compile(r"(certificateKey|certificate-key)[\"']?[:= ]+[\"']?[0-9a-f]{64}\b")),
    ("kubeconfig client key", re.compile(r"client-key-data:\s*[A-Za-z0-9+/=]{16,}")),
    ("service account token (JWT)", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.")),
    ("AWS access key", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36}\b")),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{34}\b")),
)


def secret_kind(text: str) -> str | None:
    return next((kind for kind, pattern in SECRET_PATTERNS if pattern.search(text)), None)


def _no_plain_secrets(args: ResourceValidationArgs, report: ReportViolation) -> None:
    allowed = SECRET_INPUTS.get(args.resource_type, ())
    for path, value in _walk(args.props):
        if not isinstance(value, str) or any(path == a or path.startswith(f"{a}.") for a in allowed):
            continue
        kind = secret_kind(value)
        if kind:
            report(f"input {path} holds what looks like a {kind}: pass it as a secret (config --secret, stdin)", None)


# --- first-control-plane-protected ----------------------------------------------------------------


def _is_kubeadm_init(resource: Any) -> bool:
    if resource.resource_type != COMMAND:
        return False
    return bool(resource.name.endswith("-kubeadm-init") or "# mlcluster step: kubeadm-init" in _scripts(resource.props))


def _first_control_plane_protected(args: StackValidationArgs, report: ReportViolation) -> None:
    inits = [r for r in args.resources if _is_kubeadm_init(r)]
    if not inits:
        args.not_applicable("no kubeadm init step in this stack (an existing cluster)")
    if len(inits) > 1:
        report(f"{len(inits)} kubeadm init steps ({', '.join(r.name for r in inits)}): a cluster has one", None)
    for init in inits:
        if not init.opts.protect:
            report(
                f"{init.name} is not protected: deleting it would run `kubeadm reset` on the first control plane",
                init.urn,
            )


# --- kueue-quotas-within-inventory ----------------------------------------------------------------

GPU = "nvidia.com/gpu"
GPU_COUNT_LABEL = "mlcluster.io/gpu-count"
DECLARED_GPUS_ANNOTATION = "mlcluster.io/declared-gpus"
"""On each GPU flavor the program makes: its devices per resource as the stack's validation counted them (the
nodes' GPUs × MIG slices × time-slicing replicas, or kueue.inventory), as JSON: {"nvidia.com/gpu": 32}; `unchecked`
where validation could not count them (components/render/kueue.py). One number for both checks."""
UNCHECKED = "unchecked"
FLAVOR_LABEL = "mlcluster.io/flavor"
"""On each flavor the program makes: the name the quotas use (a flavor with a topology is named after the fields
Kueue freezes, components/render/kueue.py named_after), which the policy config's gpuInventory names too."""
_NODE_LABELS = re.compile(r"name: node-labels\s*\n\s*value: ['\"]?([^\s'\"]+)")


def _kueue_objects(args: StackValidationArgs, kind: str) -> list[Any]:
    found = []
    for resource in args.resources:
        api_version = _get(resource.props, "apiVersion")
        if (
            isinstance(api_version, str)
            and api_version.startswith("kueue.x-k8s.io/")
            and _get(resource.props, "kind") == kind
        ):
            found.append(resource)
    return found


def node_inventory(args: StackValidationArgs) -> list[tuple[dict[str, str], int]]:
    """(labels, GPUs) of each node the stack bootstraps, read from its kubeadm init/join configuration: for a
    flavor the program did not make (no annotation), whole GPUs by the nodes its nodeLabels select."""
    nodes = []
    for resource in args.resources:
        if resource.resource_type != COMMAND or not re.search(r"-kubeadm-(init|join)$", resource.name):
            continue
        match = _NODE_LABELS.search(_scripts(resource.props))
        labels = dict(pair.split("=", 1) for pair in match.group(1).split(",") if "=" in pair) if match else {}
        count = _int(labels.get(GPU_COUNT_LABEL))
        if count:
            nodes.append((labels, count))
    return nodes


def declared_inventory(flavors: Sequence[Any]) -> dict[str, dict[str, int] | None]:
    """Devices per resource of each flavor, from its annotation; None for a flavor marked unchecked."""
    declared: dict[str, dict[str, int] | None] = {}
    for flavor in flavors:
        metadata = _get(flavor.props, "metadata")
        text = _get(_get(metadata, "annotations"), DECLARED_GPUS_ANNOTATION)
        name = str(_get(metadata, "name"))
        if text == UNCHECKED:
            declared[name] = None
            continue
        try:
            parsed = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            counts = {str(k): _int(v) for k, v in parsed.items()}
            declared[name] = {k: v for k, v in counts.items() if v is not None}
    return declared


def _kueue_quotas_within_inventory(args: StackValidationArgs, report: ReportViolation) -> None:
    queues = _kueue_objects(args, "ClusterQueue")
    if not queues:
        return
    flavor_objects = _kueue_objects(args, "ResourceFlavor")
    flavors = {
        _get(_get(f.props, "metadata"), "name"): dict(_get(_get(f.props, "spec"), "nodeLabels") or {})
        for f in flavor_objects
    }
    declared = declared_inventory(flavor_objects)
    quota_names = {
        _get(_get(f.props, "metadata"), "name"): (_get(_get(f.props, "metadata"), "labels") or {}).get(FLAVOR_LABEL)
        for f in flavor_objects
    }
    # The policy config wins over the stack's declaration: it is the operator's word on a cluster it knows.
    configured = {str(k): {GPU: int(v)} for k, v in (args.get_config().get("gpuInventory") or {}).items()}
    nodes = node_inventory(args)
    if not nodes and not configured and not declared:
        args.not_applicable(
            "no node inventory in this stack: declare kueue.inventory, or set the policy config gpuInventory"
            " {flavor: GPUs}"
        )
    quota: dict[tuple[str, str], int] = {}
    without_cohort: set[tuple[str, str]] = set()
    for queue in queues:
        # Within a cohort the teams may lend and borrow beyond their nominal quotas: validation warns there, and
        # refuses an over-commit only without one; so does this policy.
        has_cohort = bool(_get(_get(queue.props, "spec"), "cohortName") or _get(_get(queue.props, "spec"), "cohort"))
        for group in _items(_get(_get(queue.props, "spec"), "resourceGroups")):
            for flavor in _items(_get(group, "flavors")):
                for resource in _items(_get(flavor, "resources")):
                    amount = _int(_get(resource, "nominalQuota"))
                    name = _get(resource, "name")
                    if isinstance(name, str) and name.startswith("nvidia.com/") and amount is not None:
                        key = (str(_get(flavor, "name")), name)
                        quota[key] = quota.get(key, 0) + amount
                        if not has_cohort:
                            without_cohort.add(key)
    for (flavor, resource), total in sorted(quota.items()):
        named = quota_names.get(flavor) or flavor
        if named in configured or flavor in configured:
            capacity = configured.get(named, configured.get(flavor, {})).get(resource)
        elif flavor in declared:
            counts = declared[flavor]
            if counts is None:
                continue
            capacity = counts.get(resource, 0)
        elif resource == GPU:
            wanted = flavors.get(flavor, {})
            capacity = sum(count for labels, count in nodes if all(labels.get(k) == v for k, v in wanted.items()))
        else:
            continue
        if capacity is not None and total > capacity and (flavor, resource) in without_cohort:
            report(
                f"ClusterQueues give flavor {flavor} {total} {resource} of nominal quota, but its nodes have"
                f" {capacity}",
                None,
            )


# --- the pack -------------------------------------------------------------------------------------

POLICIES: list[ResourceValidationPolicy | StackValidationPolicy] = [
    ResourceValidationPolicy(
        name="ssh-host-keys-pinned",
        description="Every SSH connection (and its bastion) pins the host key.",
        validate=_host_keys_pinned,
    ),
    ResourceValidationPolicy(
        name="chart-versions-pinned",
        description="Every Helm chart has an exact version (no range, no latest).",
        validate=_chart_versions_pinned,
    ),
    ResourceValidationPolicy(
        name="gpu-workloads-have-gpu-limits",
        description="GPU requests come with equal limits; pods placed on GPU nodes limit nvidia.com/gpu.",
        validate=_gpu_limits,
    ),
    ResourceValidationPolicy(
        name="kubelet-thresholds-sane",
        description="Kubelet image GC thresholds: low < high <= 95.",
        validate=_kubelet_thresholds_sane,
    ),
    ResourceValidationPolicy(
        name="no-secret-in-plain-input",
        description="No secret-looking value (key, token, credential) outside the inputs mlcluster marks secret.",
        validate=_no_plain_secrets,
    ),
    StackValidationPolicy(
        name="first-control-plane-protected",
        description="The kubeadm init step of the first control plane is protected (and there is one).",
        validate=_first_control_plane_protected,
    ),
    StackValidationPolicy(
        name="kueue-quotas-within-inventory",
        description="Kueue ClusterQueue nominal GPU quotas per flavor do not exceed the GPUs of its nodes.",
        validate=_kueue_quotas_within_inventory,
        config_schema=PolicyConfigSchema(
            properties={
                "gpuInventory": {
                    "type": "object",
                    "description": "GPUs per Kueue flavor, where the stack has no nodes (existing clusters).",
                    "additionalProperties": {"type": "integer", "minimum": 0},
                }
            }
        ),
    ),
]
ENFORCEMENT = EnforcementLevel.MANDATORY
