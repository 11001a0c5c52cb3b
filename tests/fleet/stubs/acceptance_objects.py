"""What the API server, the scheduler, the Job controller, Kueue and Kubeflow Trainer make of the acceptance step's
objects (Namespace, ResourceFlavor, ClusterQueue, LocalQueue, TrainingRuntime, Job, TrainJob), for kubectl's stub.

Pure functions over the cluster dict (the fleet's cluster.json): kubectl.py parses the command line, locks the
cluster, calls these and prints. Errors are `ApiError`s carrying what kubectl would print.

Where the objects live (tests read and seed these):
- `cluster["objects"]["<Kind>/<namespace or ''>/<name>"]`: the object as applied, plus the `status` the controllers
  write (Job: Suspended/SuccessCriteriaMet/Complete/FailureTarget/Failed conditions; TrainJob: Suspended/Complete/
  Failed).
- `cluster["acceptance"]["nodes"][NODE]`: what a test says each node's hardware does: `gpus` (allocatable
  nvidia.com/gpu, 0 when missing), `diag` ("pass"/"fail": which dcgmi diag sample its logs print), `busbw` (GB/s at
  the largest all_reduce_perf size), `hang` (its pods start and never finish), `labels` (labels beyond the Node's).
- `cluster["acceptance"]["workloads"]`: each Job's and TrainJob's state (Suspended, Pending, Running, Complete,
  Failed), admission, nodes and the GPUs it holds; `["unschedulable"][name]`: why a Job or TrainJob is not running;
  `["runs"]`: one entry per pod start (kind, name, namespace, node or nodes, at; `dcgmLevel` once its dcgm-diag log
  was read).

Validating, never kinder than the cluster: the API server's checks (names, restartPolicy, tolerations, extended
resources, node field selectors, immutable Job templates), the scheduler's (node affinity and selector, untolerated
NoSchedule/NoExecute taints, cordoned and NotReady nodes, GPUs held by pods still running), Kueue's admission
(LocalQueue -> ClusterQueue -> ResourceFlavors, namespaceSelector, covered resources, nominal quota in use, the flavor's
nodeLabels and tolerations injected into the pods) and the Job controller's conditions as Kubernetes >= 1.31 writes
them. Where our own rules go further (pinned images, Jobs pinned to one node), the message says "stub policy".
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "acceptance"
"""tests/fixtures/acceptance: the stubs run in place from the checkout (tests/fleet/hosts.py STUBS)."""
DIAG_SAMPLES = {
    "pass": FIXTURES / "dcgmi-diag-r2.constructed.pass.json",
    "fail": FIXTURES / "dcgmi-diag-r2.constructed.fail.json",
}
ALL_REDUCE_SAMPLE = FIXTURES / "all_reduce_perf.h100-2node.txt"

KUEUE_API = "kueue.x-k8s.io/v1beta2"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
NODES_ANNOTATION = "mlcluster.io/acceptance-nodes"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
"""What JobSet v0.12.0 puts on every Job it creates and on that Job's pod template (kubernetes-sigs/jobset
api/jobset/v1alpha2/jobset_types.go: JobSetNameKey, ReplicatedJobNameKey, JobIndexKey; set by
pkg/controllers/jobset_controller.go labelAndAnnotateObject, called for the Job and for job.Spec.Template). Kubeflow
Trainer v2.3.0 names the JobSet after the TrainJob (pkg/runtime/framework/plugins/jobset/jobset.go:
JobSet(trainJob.Name, trainJob.Namespace)) and sets no pod label of its own (its trainjob-ancestor-step label sits
on the Job template only): a pod of a TrainJob is found by these labels, never by a `trainer.kubeflow.org/...` one."""
GPU = "nvidia.com/gpu"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
"""What kubeadm taints a control plane with when its nodeRegistration has no `taints` (None, not [])."""
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
LAUNCHER_TRAINER_FACTOR = 0.9
"""The multi-node all-reduce reaches this share of its slowest member's loopback bandwidth (the stub's model)."""


class ApiError(Exception):
    """What kubectl prints (to stderr) and exits 1 with."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ---- kinds ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    kind: str
    api_version: str
    plural: str
    """Resource name as kubectl prints it in errors: `jobs.batch`, `namespaces`."""
    singular: str
    """As kubectl prints it after apply or delete: `job.batch`, `namespace`."""
    namespaced: bool
    aliases: tuple[str, ...]

    def matches(self, word: str) -> bool:
        word = word.lower()
        group = self.api_version.rpartition("/")[0]
        names = {*self.aliases, self.plural, self.singular}
        if group:
            names |= {f"{alias}.{group}" for alias in self.aliases}
        return word in names


KINDS = (
    Kind("Namespace", "v1", "namespaces", "namespace", False, ("namespace", "namespaces", "ns")),
    Kind(
        "ResourceFlavor",
        KUEUE_API,
        "resourceflavors.kueue.x-k8s.io",
        "resourceflavor.kueue.x-k8s.io",
        False,
        ("resourceflavor", "resourceflavors", "rf", "flavor", "flavors"),
    ),
    Kind(
        "ClusterQueue",
        KUEUE_API,
        "clusterqueues.kueue.x-k8s.io",
        "clusterqueue.kueue.x-k8s.io",
        False,
        ("clusterqueue", "clusterqueues", "cq"),
    ),
    Kind(
        "LocalQueue",
        KUEUE_API,
        "localqueues.kueue.x-k8s.io",
        "localqueue.kueue.x-k8s.io",
        True,
        ("localqueue", "localqueues", "queue", "queues", "lq"),
    ),
    Kind(
        "TrainingRuntime",
        TRAINER_API,
        "trainingruntimes.trainer.kubeflow.org",
        "trainingruntime.trainer.kubeflow.org",
        True,
        ("trainingruntime", "trainingruntimes"),
    ),
    Kind("Job", "batch/v1", "jobs.batch", "job.batch", True, ("job", "jobs")),
    Kind(
        "TrainJob",
        TRAINER_API,
        "trainjobs.trainer.kubeflow.org",
        "trainjob.trainer.kubeflow.org",
        True,
        ("trainjob", "trainjobs"),
    ),
)
BY_KIND = {kind.kind: kind for kind in KINDS}


def kind_for_resource(word: str) -> Kind | None:
    """The kind a kubectl resource word names (`job`, `jobs.batch`, `trainjob`, `cq`...), None if not one of ours."""
    return next((kind for kind in KINDS if kind.matches(word)), None)


def object_key(kind: str, namespace: str | None, name: str) -> str:
    return f"{kind}/{namespace or ''}/{name}"


def _objects(cluster: dict[str, Any]) -> dict[str, Any]:
    objects: dict[str, Any] = cluster.setdefault("objects", {})
    return objects


def _acceptance(cluster: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = cluster.setdefault("acceptance", {})
    for key, empty in (("nodes", {}), ("workloads", {}), ("unschedulable", {}), ("runs", [])):
        state.setdefault(key, copy.deepcopy(empty))
    state.setdefault("seq", 0)
    return state


def _get(obj: Any, *path: str | int) -> Any:
    for step in path:
        if isinstance(step, int):
            if not isinstance(obj, list) or step >= len(obj):
                return None
            obj = obj[step]
        else:
            if not isinstance(obj, dict):
                return None
            obj = obj.get(step)
    return obj


def _name(obj: dict[str, Any]) -> str:
    return str(_get(obj, "metadata", "name") or "")


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict(_get(obj, "metadata", "labels") or {})


# ---- quantities -------------------------------------------------------------------------------------------------

_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)
_SUFFIX = {
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


def quantity(value: Any) -> Fraction:
    """A Kubernetes resource quantity (8, "8", "500m", "4Ti", "1e3") as an exact number; ValueError if it is none."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise ValueError(f"{value!r} is not a quantity")
    number = Fraction(match[1])
    if match[2]:
        number *= Fraction(10) ** int(match[2][1:])
    if match[3]:
        number *= _SUFFIX[match[3]]
    return number


def _show(number: Fraction) -> str:
    return str(number.numerator) if number.denominator == 1 else f"{float(number):g}"


# ---- names and labels ---------------------------------------------------------------------------------------------

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _subdomain_error(value: str) -> str | None:
    if len(value) > 253:
        return "must be no more than 253 characters"
    if not _DNS_SUBDOMAIN.match(value):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must"
            " start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is"
            " '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    return None


def _label_error(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS_LABEL.match(value):
        return (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and"
            " end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is"
            " '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        )
    return None


def label_value_valid(value: str) -> bool:
    return len(value) <= 63 and bool(_LABEL_VALUE.match(value))


def qualified_name_error(key: str) -> str | None:
    """A label or taint key: optional DNS subdomain prefix and '/', then a name of at most 63 characters."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or _subdomain_error(prefix)):
        return f"prefix part {_subdomain_error(prefix) or 'must be non-empty'}"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an"
            " alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is"
            " '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') and be at most 63 characters"
        )
    return None


def _invalid(kind: str, name: str, errors: list[str]) -> ApiError:
    """The API server's 422, as kubectl prints it."""
    detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return ApiError(f'The {kind} "{name}" is invalid: {detail}')


# ---- taints and tolerations -------------------------------------------------------------------------------------


def node_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The taints on the Node's spec: the registered ones (kubeadm gives a control plane its default taint when its
    nodeRegistration has none), then what the node controllers add: node.kubernetes.io/unschedulable while cordoned,
    node.kubernetes.io/not-ready (NoSchedule and NoExecute) while NotReady."""
    stored = node.get("taints")
    if stored is None:
        taints = [dict(CONTROL_PLANE_TAINT)] if node.get("controlPlane") else []
    else:
        taints = [dict(t) for t in stored]
    for taint in taints:
        if not taint.get("value"):
            taint.pop("value", None)
    if node.get("unschedulable") and not any(t["key"] == "node.kubernetes.io/unschedulable" for t in taints):
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    if node.get("ready", True) is False:
        for effect in ("NoSchedule", "NoExecute"):
            taints.append({"key": "node.kubernetes.io/not-ready", "effect": effect})
    return taints


def taints_jsonpath(node: dict[str, Any]) -> str:
    """`-o jsonpath={.spec.taints}`: compact JSON, each taint's keys sorted (effect, key, value) as kubectl's
    JSON printer writes a map; nothing when the Node has no taints."""
    taints = node_taints(node)
    return json.dumps(taints, separators=(",", ":"), sort_keys=True) if taints else ""


def tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    """Kubernetes' ToleratesTaint: an empty effect matches every effect, an empty key (with Exists) every key;
    Exists matches any value of the key, Equal (or no operator) needs the same value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated(taints: list[dict[str, Any]], tolerations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The NoSchedule and NoExecute taints no toleration matches (PreferNoSchedule only steers)."""
    return [
        t for t in taints if t.get("effect") in BLOCKING_EFFECTS and not any(tolerates(tol, t) for tol in tolerations)
    ]


def taint_text(taint: dict[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    effect = f":{taint['effect']}" if taint.get("effect") else ""
    return f"{taint['key']}{value}{effect}"


def _parse_taint_spec(spec: str) -> tuple[dict[str, Any], bool]:
    """`KEY=VALUE:EFFECT`, `KEY:EFFECT` (to add) or `KEY[:EFFECT]-` (to remove), as kubectl taint parses them."""
    remove = spec.endswith("-")
    body = spec[:-1] if remove else spec
    key_value, colon, effect = body.partition(":")
    if ":" in effect:
        raise ApiError(f"error: invalid taint spec: {spec}")
    key, equals, value = key_value.partition("=")
    if remove:
        if equals:
            raise ApiError(f"error: invalid taint spec: {spec}")
    elif not colon or not effect:
        raise ApiError(f"error: invalid taint spec: {spec}")
    if effect and effect not in TAINT_EFFECTS:
        raise ApiError(f"error: invalid taint effect: {effect}, unsupported taint effect")
    if error := qualified_name_error(key):
        raise ApiError(f"error: invalid taint spec: {spec}, {error}")
    if value and (len(value) > 63 or not _LABEL_VALUE.match(value)):
        raise ApiError(
            f"error: invalid taint spec: {spec}, a valid label must be an empty string or consist of"
            " alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric"
            " character"
        )
    taint: dict[str, Any] = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint, remove


def taint_node(cluster: dict[str, Any], name: str, specs: list[str], overwrite: bool) -> str:
    """`kubectl taint nodes NAME SPEC... [--overwrite]`: kubectl's reorganizeTaints. Returns the line it prints."""
    nodes: dict[str, Any] = cluster.get("nodes") or {}
    if not specs:
        raise ApiError("error: at least one taint update is required")
    to_add: list[dict[str, Any]] = []
    to_remove: list[dict[str, Any]] = []
    for spec in specs:
        taint, remove = _parse_taint_spec(spec)
        if remove:
            to_remove.append(taint)
        elif any(t["key"] == taint["key"] and t["effect"] == taint["effect"] for t in to_add):
            raise ApiError(f"error: duplicated taints with the same key and effect: {taint}")
        else:
            to_add.append(taint)
    for taint in to_add:
        if any(t["key"] == taint["key"] and t["effect"] == taint["effect"] for t in to_remove):
            raise ApiError(
                "error: can not both modify and remove the following taint(s) in the same command: " + taint_text(taint)
            )
    if name not in nodes:
        raise ApiError(f'Error from server (NotFound): nodes "{name}" not found')
    node = nodes[name]
    old = node_registered_taints(node)
    if not overwrite:
        clashing = [t["key"] for t in to_add if any(o["key"] == t["key"] and o["effect"] == t["effect"] for o in old)]
        if clashing:
            raise ApiError(
                f"error: node {name} already has {','.join(clashing)} taint(s) with same effect(s) and --overwrite is"
                " false"
            )
    new = [dict(t) for t in to_add]
    for taint in old:
        if not any(t["key"] == taint["key"] and t["effect"] == taint["effect"] for t in new):
            new.append(taint)
    added = len(old) != len(new)
    errors, deleted = [], False
    for unwanted in to_remove:
        kept = [
            t
            for t in new
            if not (t["key"] == unwanted["key"] and (not unwanted["effect"] or t["effect"] == unwanted["effect"]))
        ]
        deleted = len(kept) != len(new)
        if not deleted:
            errors.append(f'taint "{taint_text(unwanted)}" not found')
        new = kept
    if errors:
        raise ApiError("error: " + (errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"))
    node["taints"] = new
    operation = "modified" if (added and deleted) or overwrite else ("tainted" if added else "untainted")
    return f"node/{name} {operation}"


def node_registered_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The Node's own taints (kubeadm's default made explicit), without what the node controllers add."""
    stored = node.get("taints")
    if stored is None:
        return [dict(CONTROL_PLANE_TAINT)] if node.get("controlPlane") else []
    return [{k: v for k, v in t.items() if k != "value" or v} for t in stored]


# ---- images -----------------------------------------------------------------------------------------------------

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def image_pinned(image: str) -> bool:
    """A tag other than `latest`, or a sha256 digest (stub policy: what runs is what was reviewed)."""
    name, at, digest = image.partition("@")
    if at:
        return bool(_DIGEST.match(digest))
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    return bool(tag) and tag != "latest"


# ---- pods: validation, requests, placement ----------------------------------------------------------------------


def _all_containers(pod: dict[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    return [
        (field, index, container)
        for field in ("initContainers", "containers")
        for index, container in enumerate(pod.get(field) or [])
    ]


def _extended(resource: str) -> bool:
    """Not a native resource (cpu, memory, hugepages, kubernetes.io/...): GPUs. Never overcommitted."""
    if "/" not in resource:
        return False
    prefix = resource.split("/", 1)[0]
    return not (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io") or resource.startswith("requests."))


def validate_pod_spec(pod: dict[str, Any], path: str, *, job: bool) -> list[str]:
    """The API server's checks of a pod template that the acceptance objects could trip over."""
    errors: list[str] = []
    if job:
        policy = pod.get("restartPolicy") or ""
        if policy in ("", "Always"):
            errors.append(f'{path}.restartPolicy: Required value: valid values: "OnFailure", "Never"')
        elif policy not in ("OnFailure", "Never"):
            errors.append(
                f'{path}.restartPolicy: Unsupported value: "{policy}": supported values: "OnFailure", "Never"'
            )
    if not pod.get("containers"):
        errors.append(f"{path}.containers: Required value")
    seen: set[str] = set()
    for field, index, container in _all_containers(pod):
        where = f"{path}.{field}[{index}]"
        name = str(container.get("name") or "")
        if not name:
            errors.append(f"{where}.name: Required value")
        elif error := _label_error(name):
            errors.append(f'{where}.name: Invalid value: "{name}": {error}')
        elif name in seen:
            errors.append(f'{where}.name: Duplicate value: "{name}"')
        seen.add(name)
        if not str(container.get("image") or "").strip():
            errors.append(f"{where}.image: Required value")
        resources = container.get("resources") or {}
        limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
        parsed: dict[str, dict[str, Fraction]] = {"limits": {}, "requests": {}}
        for part, values in (("limits", limits), ("requests", requests)):
            for resource, value in values.items():
                try:
                    parsed[part][resource] = quantity(value)
                except ValueError:
                    errors.append(
                        f'{where}.resources.{part}[{resource}]: Invalid value: "{value}": quantities must match the'
                        " regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                    )
                    continue
                if _extended(resource) and parsed[part][resource].denominator != 1:
                    errors.append(f'{where}.resources.{part}[{resource}]: Invalid value: "{value}": must be an integer')
        for resource, amount in parsed["requests"].items():
            if not _extended(resource):
                continue
            if resource not in limits:
                errors.append(
                    f"{where}.resources.limits: Required value: Limit must be set for non overcommitable resources"
                )
            elif resource in parsed["limits"] and parsed["limits"][resource] != amount:
                errors.append(
                    f'{where}.resources.requests[{resource}]: Invalid value: "{_show(amount)}": must be equal to'
                    f" {resource} limit of {_show(parsed['limits'][resource])}"
                )
    for index, toleration in enumerate(pod.get("tolerations") or []):
        where = f"{path}.tolerations[{index}]"
        operator = toleration.get("operator") or ""
        if operator not in ("", "Equal", "Exists"):
            errors.append(f'{where}.operator: Unsupported value: "{operator}": supported values: "Equal", "Exists"')
        elif not toleration.get("key") and operator != "Exists":
            errors.append(
                f'{where}.operator: Invalid value: "{operator}": operator must be Exists when `key` is empty, which'
                ' means "match all values and all keys"'
            )
        elif operator == "Exists" and toleration.get("value"):
            errors.append(
                f'{where}.operator: Invalid value: "{toleration["value"]}": value must be empty when'
                " `operator` is 'Exists'"
            )
        effect = toleration.get("effect") or ""
        if effect and effect not in TAINT_EFFECTS:
            errors.append(
                f'{where}.effect: Unsupported value: "{effect}": supported values: "NoSchedule", "PreferNoSchedule",'
                ' "NoExecute"'
            )
        elif toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errors.append(
                f"{where}.effect: Invalid value: \"{effect}\": effect must be 'NoExecute' when"
                " `tolerationSeconds` is set"
            )
    terms = _get(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    affinity_path = f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    if terms is not None and not terms:
        errors.append(f"{affinity_path}: Required value: must have at least one node selector term")
    for t_index, term in enumerate(terms or []):
        for f_index, requirement in enumerate(term.get("matchFields") or []):
            where = f"{affinity_path}[{t_index}].matchFields[{f_index}]"
            if requirement.get("operator") not in ("In", "NotIn"):
                errors.append(
                    f'{where}.operator: Invalid value: "{requirement.get("operator")}": not a valid selector operator'
                )
            elif len(requirement.get("values") or []) != 1:
                errors.append(
                    f"{where}.values: Required value: must be only one value when `operator` is 'In' or"
                    " 'NotIn' for node field selector"
                )
            if requirement.get("key") != "metadata.name":
                errors.append(f'{where}.key: Invalid value: "{requirement.get("key")}": not a valid field selector key')
    return errors


def container_requests(container: dict[str, Any]) -> dict[str, Fraction]:
    """What the container asks the scheduler for: its requests, each defaulting to its limit (API defaulting)."""
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    out: dict[str, Fraction] = {}
    for resource in {*limits, *requests}:
        value = requests[resource] if resource in requests else limits[resource]
        out[resource] = quantity(value)
    return out


def pod_requests(pod: dict[str, Any]) -> dict[str, Fraction]:
    """The pod's effective requests: the app containers (and sidecars) together, or the largest init container
    (plus the sidecars started before it) where that is more."""
    sidecars: dict[str, Fraction] = {}
    peaks: dict[str, Fraction] = {}
    for container in pod.get("initContainers") or []:
        asked = container_requests(container)
        if container.get("restartPolicy") == "Always":
            for resource, amount in asked.items():
                sidecars[resource] = sidecars.get(resource, Fraction(0)) + amount
            continue
        for resource, amount in asked.items():
            peaks[resource] = max(peaks.get(resource, Fraction(0)), amount + sidecars.get(resource, Fraction(0)))
    total = dict(sidecars)
    for container in pod.get("containers") or []:
        for resource, amount in container_requests(container).items():
            total[resource] = total.get(resource, Fraction(0)) + amount
    for resource, amount in peaks.items():
        total[resource] = max(total.get(resource, Fraction(0)), amount)
    return {resource: amount for resource, amount in total.items() if amount}


def node_labels(cluster: dict[str, Any], name: str) -> dict[str, str]:
    """The Node's labels: what it registered with, what the kubelet always sets, and a test's extra labels."""
    node = (cluster.get("nodes") or {}).get(name) or {}
    extra = ((_acceptance(cluster)["nodes"].get(name) or {}).get("labels")) or {}
    return {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        **(node.get("labels") or {}),
        **extra,
    }


def _requirement_matches(requirement: dict[str, Any], value: str | None) -> bool:
    operator, values = requirement.get("operator"), [str(v) for v in requirement.get("values") or []]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            number, bound = int(value), int(values[0])
        except ValueError:
            return False
        return number > bound if operator == "Gt" else number < bound
    return False


def node_admits(cluster: dict[str, Any], name: str, pod: dict[str, Any]) -> str | None:
    """Why the pod's nodeSelector or required node affinity keeps it off node `name` (None: it does not)."""
    labels = node_labels(cluster, name)
    for key, value in (pod.get("nodeSelector") or {}).items():
        if labels.get(key) != str(value):
            return f"node {name} does not match the pod's nodeSelector {key}={value}"
    terms = _get(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    if terms is None:
        return None
    for term in terms:
        expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not expressions and not fields:
            continue  # an empty term matches nothing
        if all(_requirement_matches(r, labels.get(r.get("key", ""))) for r in expressions) and all(
            _requirement_matches(r, name if r.get("key") == "metadata.name" else None) for r in fields
        ):
            return None
    return f"node {name} does not match the pod's required node affinity"


def pinned_node(pod: dict[str, Any]) -> str | None:
    """The one node a pod is pinned to by `nodeSelectorTerms[0].matchFields` = metadata.name In [NODE]."""
    terms = _get(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    if not isinstance(terms, list) or len(terms) != 1:
        return None
    fields = terms[0].get("matchFields") or []
    if len(fields) != 1:
        return None
    field = fields[0]
    values = field.get("values") or []
    if field.get("key") != "metadata.name" or field.get("operator") != "In" or len(values) != 1:
        return None
    return str(values[0])


def _node_gpus(cluster: dict[str, Any], name: str) -> int:
    return int((_acceptance(cluster)["nodes"].get(name) or {}).get("gpus") or 0)


def _gpus_in_use(cluster: dict[str, Any], name: str, but: str) -> int:
    """GPUs that pods still running on the node hold (a hanging test keeps its GPUs)."""
    used = 0
    for key, workload in _acceptance(cluster)["workloads"].items():
        if key != but and workload.get("state") == "Running":
            used += int((workload.get("gpus") or {}).get(name, 0))
    return used


def _placement_problem(cluster: dict[str, Any], key: str, name: str, pod: dict[str, Any]) -> str | None:
    """Why the scheduler does not bind the pod to node `name`; None when it does."""
    nodes = cluster.get("nodes") or {}
    if name not in nodes:
        return f"node {name} does not exist (0 nodes match the pod's node affinity)"
    if problem := node_admits(cluster, name, pod):
        return f"{problem} (node(s) didn't match Pod's node affinity/selector)"
    blocking = untolerated(node_taints(nodes[name]), list(pod.get("tolerations") or []))
    if blocking:
        shown = ", ".join(taint_text(t) for t in blocking)
        return f"node {name} had untolerated taint(s) {shown}"
    need = pod_requests(pod).get(GPU, Fraction(0))
    if need:
        capacity, used = _node_gpus(cluster, name), _gpus_in_use(cluster, name, key)
        if need > capacity - used:
            return (
                f"Insufficient {GPU}: node {name} has {capacity} allocatable, {used} held by running pods, the pod"
                f" needs {_show(need)}"
            )
    return None


# ---- Kueue ------------------------------------------------------------------------------------------------------


@dataclass
class PodSet:
    name: str
    count: int
    pod: dict[str, Any]


def _selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector: None selects nothing (Kueue's namespaceSelector), {} everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != str(value):
            return False
    return all(_requirement_matches(r, labels.get(r.get("key", ""))) for r in selector.get("matchExpressions") or [])


def namespace_labels(cluster: dict[str, Any], namespace: str) -> dict[str, str]:
    obj = _objects(cluster).get(object_key("Namespace", None, namespace)) or {}
    return {**_labels(obj), "kubernetes.io/metadata.name": namespace}


def _flavor_fits_pod(flavor: dict[str, Any], pod: dict[str, Any]) -> bool:
    """Kueue's flavor assigner: the flavor's nodeLabels must not contradict the pod's nodeSelector or the label
    requirements of its required node affinity (matchFields, on the node's name, are not looked at), and the pod
    must tolerate the flavor's nodeTaints."""
    node_labels_ = {k: str(v) for k, v in (_get(flavor, "spec", "nodeLabels") or {}).items()}
    for key, value in (pod.get("nodeSelector") or {}).items():
        if key in node_labels_ and node_labels_[key] != str(value):
            return False
    terms = _get(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    if terms:
        usable = False
        for term in terms:
            expressions = [r for r in term.get("matchExpressions") or [] if r.get("key") in node_labels_]
            if all(_requirement_matches(r, node_labels_.get(r["key"])) for r in expressions):
                usable = True
        if not usable:
            return False
    tolerations = list(pod.get("tolerations") or []) + list(_get(flavor, "spec", "tolerations") or [])
    return not untolerated(list(_get(flavor, "spec", "nodeTaints") or []), tolerations)


def _quota_in_use(cluster: dict[str, Any], queue: str, flavor: str, resource: str, but: str) -> Fraction:
    used = Fraction(0)
    for key, workload in _acceptance(cluster)["workloads"].items():
        admission = workload.get("admission")
        if key == but or not admission or workload.get("state") not in ("Pending", "Running"):
            continue
        if admission["clusterQueue"] == queue and admission["flavors"].get(resource) == flavor:
            used += Fraction(admission["usage"][resource])
    return used


def kueue_admission(
    cluster: dict[str, Any], key: str, namespace: str, queue_name: str, pod_sets: list[PodSet]
) -> tuple[dict[str, Any] | None, str | None]:
    """Kueue's admission of a workload: (its admission, None) or (None, why it stays suspended)."""
    objects = _objects(cluster)
    local = objects.get(object_key("LocalQueue", namespace, queue_name))
    if local is None:
        return None, f"no LocalQueue {queue_name}"
    if _get(local, "spec", "stopPolicy") in ("Hold", "HoldAndDrain"):
        return None, f"LocalQueue {queue_name} is stopped (stopPolicy {_get(local, 'spec', 'stopPolicy')})"
    queue = str(_get(local, "spec", "clusterQueue") or "")
    cq = objects.get(object_key("ClusterQueue", None, queue))
    if cq is None:
        return None, f"LocalQueue {queue_name} points to ClusterQueue {queue!r}, which doesn't exist"
    if _get(cq, "spec", "stopPolicy") in ("Hold", "HoldAndDrain"):
        return None, f"ClusterQueue {queue} is stopped (stopPolicy {_get(cq, 'spec', 'stopPolicy')})"
    groups = list(_get(cq, "spec", "resourceGroups") or [])
    for group in groups:
        for flavor in group.get("flavors") or []:
            if object_key("ResourceFlavor", None, flavor.get("name", "")) not in objects:
                return None, f"ClusterQueue {queue} is inactive: ResourceFlavor {flavor.get('name')} doesn't exist"
    if not _selector_matches(_get(cq, "spec", "namespaceSelector"), namespace_labels(cluster, namespace)):
        return None, f"namespace {namespace} doesn't match ClusterQueue {queue}'s namespaceSelector"
    usage: dict[str, Fraction] = {}
    for pod_set in pod_sets:
        for resource, amount in pod_requests(pod_set.pod).items():
            usage[resource] = usage.get(resource, Fraction(0)) + amount * pod_set.count
    flavors: dict[str, str] = {}
    for resource in sorted(usage):
        group = next((g for g in groups if resource in (g.get("coveredResources") or [])), None)
        if group is None:
            return None, f"resource {resource} unavailable in ClusterQueue {queue}"
        if resource in flavors:
            continue
        wanted = [r for r in sorted(usage) if r in (group.get("coveredResources") or [])]
        pods = [p.pod for p in pod_sets if any(r in pod_requests(p.pod) for r in wanted)]
        reasons = []
        for flavor in group.get("flavors") or []:
            flavor_obj = objects[object_key("ResourceFlavor", None, flavor["name"])]
            if not all(_flavor_fits_pod(flavor_obj, pod) for pod in pods):
                reasons.append(f"flavor {flavor['name']} doesn't match the pods' node affinity or taints")
                continue
            quotas = {q.get("name"): q.get("nominalQuota") for q in flavor.get("resources") or []}
            short = None
            for wanted_resource in wanted:
                nominal = quantity(quotas.get(wanted_resource, 0))
                used = _quota_in_use(cluster, queue, flavor["name"], wanted_resource, key)
                if usage[wanted_resource] > nominal - used:
                    short = (
                        f"insufficient unused quota for {wanted_resource} in flavor {flavor['name']}: needs"
                        f" {_show(usage[wanted_resource])}, {_show(nominal - used)} of {_show(nominal)} available"
                    )
                    break
            if short:
                reasons.append(short)
                continue
            for wanted_resource in wanted:
                flavors[wanted_resource] = flavor["name"]
            break
        else:
            return None, f"couldn't assign flavors in ClusterQueue {queue}: " + "; ".join(reasons or ["no flavors"])
    admission = {
        "clusterQueue": queue,
        "flavors": flavors,
        "usage": {resource: str(amount) for resource, amount in usage.items()},
    }
    return admission, None


def _with_flavors(cluster: dict[str, Any], pod: dict[str, Any], admission: dict[str, Any] | None) -> dict[str, Any]:
    """The pod as Kueue starts it: the nodeLabels of its flavors as nodeSelector, their tolerations added."""
    if not admission:
        return pod
    pod = copy.deepcopy(pod)
    asked = pod_requests(pod)
    for resource, flavor_name in sorted(admission["flavors"].items()):
        if resource not in asked:
            continue
        flavor = _objects(cluster).get(object_key("ResourceFlavor", None, flavor_name)) or {}
        labels = _get(flavor, "spec", "nodeLabels") or {}
        if labels:
            pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **labels}
        tolerations = _get(flavor, "spec", "tolerations") or []
        if tolerations:
            pod["tolerations"] = [*(pod.get("tolerations") or []), *tolerations]
    return pod


# ---- apply --------------------------------------------------------------------------------------------------------


@dataclass
class ApplyResult:
    lines: list[str]
    """What kubectl prints on stdout, one line per object applied."""
    errors: list[str]
    """What it prints on stderr; kubectl goes on with the other objects and exits 1 when there is any."""


def load_documents(text: str, source: str) -> list[dict[str, Any]]:
    import yaml

    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        raise ApiError(f"error: error parsing {source}: error converting YAML to JSON: yaml: {error}") from None
    flat: list[dict[str, Any]] = []
    for document in documents:
        if not isinstance(document, dict):
            raise ApiError(f"error: error parsing {source}: error unmarshaling JSON: cannot unmarshal into an object")
        if document.get("kind") == "List" and document.get("apiVersion") == "v1":
            flat.extend(item for item in document.get("items") or [] if item)
        else:
            flat.append(document)
    return flat


def namespace_exists(cluster: dict[str, Any], namespace: str) -> bool:
    return namespace in BUILTIN_NAMESPACES or object_key("Namespace", None, namespace) in _objects(cluster)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _without_status(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "status"}


def apply_documents(
    cluster: dict[str, Any], documents: list[dict[str, Any]], source: str, namespace_flag: str | None, now: float
) -> ApplyResult:
    """`kubectl apply -f`: each document in turn (a Namespace applied earlier in the file exists for the later
    ones), every error collected as kubectl does, then the controllers react."""
    result = ApplyResult([], [])
    for document in documents:
        try:
            result.lines.append(_apply_one(cluster, document, source, namespace_flag, now))
        except ApiError as error:
            result.errors.append(error.message)
    reconcile(cluster, now)
    return result


def _apply_one(
    cluster: dict[str, Any], document: dict[str, Any], source: str, namespace_flag: str | None, now: float
) -> str:
    api_version, kind_name = document.get("apiVersion"), document.get("kind")
    missing = [f"{field} not set" for field, value in (("apiVersion", api_version), ("kind", kind_name)) if not value]
    if missing:
        raise ApiError(
            f'error: error validating "{source}": error validating data: [{", ".join(missing)}]; if you choose to'
            " ignore these errors, turn validation off with --validate=false"
        )
    name = _name(document)
    metadata_namespace = _get(document, "metadata", "namespace")
    kind = BY_KIND.get(str(kind_name))
    if kind is None or kind.api_version != api_version:
        raise ApiError(
            f'error: resource mapping not found for name: "{name}" namespace: "{metadata_namespace or ""}" from'
            f' "{source}": no matches for kind "{kind_name}" in version "{api_version}"\n'
            "ensure CRDs are installed first"
        )
    if not name:
        raise ApiError(
            f'error: error when retrieving current configuration of:\nResource: "{kind.plural}", GroupVersionKind:'
            f' "{api_version}, Kind={kind.kind}"\nfrom server for: "{source}": resource name may not be empty'
        )
    obj = copy.deepcopy(document)
    obj.pop("status", None)
    namespace: str | None = None
    if kind.namespaced:
        namespace = str(metadata_namespace or namespace_flag or "default")
        if namespace_flag and metadata_namespace and metadata_namespace != namespace_flag:
            raise ApiError(
                f'error: the namespace from the provided object "{metadata_namespace}" does not match the namespace'
                f" \"{namespace_flag}\". You must pass '--namespace={metadata_namespace}' to perform this operation."
            )
        obj.setdefault("metadata", {})["namespace"] = namespace
        if not namespace_exists(cluster, namespace):
            raise ApiError(
                f'Error from server (NotFound): error when creating "{source}": namespaces "{namespace}" not found'
            )
    else:
        obj.setdefault("metadata", {}).pop("namespace", None)
    name_error = _label_error(name) if kind.kind == "Namespace" else _subdomain_error(name)
    if name_error:
        raise _invalid(kind.kind, name, [f'metadata.name: Invalid value: "{name}": {name_error}'])
    key = object_key(kind.kind, namespace, name)
    existing = _objects(cluster).get(key)
    validators = {"Job": _validate_job, "TrainJob": _validate_train_job, "TrainingRuntime": _validate_runtime}
    if kind.kind in validators:
        validators[kind.kind](cluster, obj, existing, source)
    printed = f"{kind.singular}/{name}"
    if existing is not None:
        if _same(_without_status(existing), obj):
            return f"{printed} unchanged"
        obj["status"] = existing.get("status", {})
        _objects(cluster)[key] = obj
        return f"{printed} configured"
    acceptance = _acceptance(cluster)
    if kind.kind in ("Job", "TrainJob"):
        acceptance["seq"] += 1
        acceptance["workloads"][key] = {"seq": acceptance["seq"], "state": "New", "created": now}
        obj["status"] = {}
    _objects(cluster)[key] = obj
    return f"{printed} created"


def _image_policy(images: list[tuple[str, str]]) -> None:
    for where, image in images:
        if image and not image_pinned(image):
            raise ApiError(
                f"error: stub policy: image {image} is not pinned ({where}): give it a tag other than latest or an"
                " @sha256: digest"
            )


def _pod_images(pod: dict[str, Any], path: str) -> list[tuple[str, str]]:
    return [(f"{path}.{field}[{index}]", str(c.get("image") or "")) for field, index, c in _all_containers(pod)]


def _validate_job(cluster: dict[str, Any], job: dict[str, Any], existing: dict[str, Any] | None, source: str) -> None:
    name = _name(job)
    errors = []
    if len(name) > 63:
        errors.append(f'spec.template.labels: Invalid value: "{name}": must be no more than 63 characters')
    template = _get(job, "spec", "template")
    if not isinstance(template, dict):
        errors.append("spec.template.spec.containers: Required value")
    else:
        errors += validate_pod_spec(template.get("spec") or {}, "spec.template.spec", job=True)
    if errors:
        raise _invalid("Job", name, errors)
    _image_policy(_pod_images(template.get("spec") or {}, "spec.template.spec"))
    for field in ("parallelism", "completions"):
        if _get(job, "spec", field) not in (None, 1):
            raise ApiError(f"error: stub: Job {name}: spec.{field} other than 1 is not modelled by the stub")
    if existing is not None and not _same(_get(existing, "spec", "template"), template):
        shown = json.dumps(template, separators=(",", ":"), sort_keys=True)
        raise ApiError(f'The Job "{name}" is invalid: spec.template: Invalid value: {shown}: field is immutable')


def _validate_runtime(cluster: dict[str, Any], runtime: dict[str, Any], existing: Any, source: str) -> None:
    images = []
    for index, rjob in enumerate(_get(runtime, "spec", "template", "spec", "replicatedJobs") or []):
        pod = _get(rjob, "template", "spec", "template", "spec") or {}
        images += _pod_images(pod, f"spec.template.spec.replicatedJobs[{index}].template.spec.template.spec")
    _image_policy(images)


def _runtime_of(cluster: dict[str, Any], train_job: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The runtime a TrainJob refers to: runtimeRef.kind defaults to ClusterTrainingRuntime (the CRD's default)."""
    ref = _get(train_job, "spec", "runtimeRef") or {}
    kind = ref.get("kind") or "ClusterTrainingRuntime"
    name = str(ref.get("name") or "")
    namespace = _get(train_job, "metadata", "namespace") if kind == "TrainingRuntime" else None
    return f"{kind}.trainer.kubeflow.org {name!r}", _objects(cluster).get(object_key(kind, namespace, name))


def _train_job_nodes(train_job: dict[str, Any]) -> list[str]:
    annotation = _get(train_job, "metadata", "annotations", NODES_ANNOTATION) or ""
    return [n.strip() for n in str(annotation).split(",") if n.strip()]


def _validate_train_job(
    cluster: dict[str, Any], train_job: dict[str, Any], existing: dict[str, Any] | None, source: str
) -> None:
    name = _name(train_job)
    if len(name) > 63 or not _DNS1035_LABEL.match(name):
        raise _invalid(
            "TrainJob",
            name,
            [
                '<nil>: Invalid value: "object": metadata.name must match RFC 1035 DNS'
                " label format and be no more than 63 characters"
            ],
        )
    ref = _get(train_job, "spec", "runtimeRef") or {}
    if not ref.get("name"):
        raise _invalid("TrainJob", name, ["spec.runtimeRef.name: Required value"])
    if (ref.get("apiGroup") or "trainer.kubeflow.org") != "trainer.kubeflow.org" or (
        ref.get("kind") or "ClusterTrainingRuntime"
    ) not in ("TrainingRuntime", "ClusterTrainingRuntime"):
        raise ApiError(
            f'Error from server (Forbidden): error when creating "{source}": admission webhook'
            f' "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimeRef: Invalid value:'
            f" {json.dumps(ref, sort_keys=True)}: unsupported runtime"
        )
    described, runtime = _runtime_of(cluster, train_job)
    if runtime is None:
        raise ApiError(
            f'Error from server (Forbidden): error when creating "{source}": admission webhook'
            f' "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimeRef: Invalid value:'
            f" {json.dumps(ref, sort_keys=True)}: {described} not found"
        )
    if existing is not None:
        if not _same(_get(existing, "spec", "runtimeRef"), ref):
            raise _invalid("TrainJob", name, ['spec.runtimeRef: Invalid value: "object": field is immutable'])
        state = (
            _acceptance(cluster)["workloads"].get(object_key("TrainJob", _get(existing, "metadata", "namespace"), name))
            or {}
        ).get("state")
        if state != "Suspended" and not _same(_get(existing, "spec"), _get(train_job, "spec")):
            raise ApiError(
                f'error: stub: TrainJob "{name}" is not suspended ({state}): the stub refuses a change to its spec, as'
                " the trainer does for a running TrainJob's trainer and runtime patches; delete it first"
            )
    num_nodes = _get(train_job, "spec", "trainer", "numNodes")
    if not isinstance(num_nodes, int) or isinstance(num_nodes, bool) or num_nodes < 2:
        raise ApiError(
            f"error: stub policy: TrainJob {name}: spec.trainer.numNodes must be an integer >= 2, not {num_nodes!r}"
        )
    gpus = _get(train_job, "spec", "trainer", "resourcesPerNode", "limits", GPU)
    try:
        per_node = quantity(gpus)
    except ValueError:
        raise ApiError(
            f"error: stub policy: TrainJob {name}: spec.trainer.resourcesPerNode.limits[{GPU}] must be a"
            f" whole number of GPUs, not {gpus!r}"
        ) from None
    if per_node.denominator != 1 or per_node < 1:
        raise ApiError(
            f"error: stub policy: TrainJob {name}: spec.trainer.resourcesPerNode.limits[{GPU}] must be a"
            f" whole number of GPUs, not {gpus!r}"
        )
    nodes = _train_job_nodes(train_job)
    if len(nodes) != num_nodes or len(set(nodes)) != len(nodes):
        raise ApiError(
            f"error: stub policy: TrainJob {name}: annotation {NODES_ANNOTATION} must name {num_nodes} distinct"
            f" node(s) (spec.trainer.numNodes), not {nodes}"
        )
    if not any(
        rjob.get("name") == "node" for rjob in _get(runtime, "spec", "template", "spec", "replicatedJobs") or []
    ):
        raise ApiError(f"error: stub: {described} has no replicatedJob named node for TrainJob {name}'s nodes")
    image = _get(train_job, "spec", "trainer", "image")
    if image:
        _image_policy([("spec.trainer.image", str(image))])


# ---- the controllers ----------------------------------------------------------------------------------------------


def _conditions_job(cluster: dict[str, Any], state: str, kueue: bool, reason: str = "") -> list[dict[str, Any]]:
    version = str(cluster.get("version") or "1.34.0")
    try:
        delayed = tuple(int(p) for p in version.lstrip("v").split("-")[0].split(".")[:2]) >= (1, 31)
    except ValueError:
        delayed = True
    conditions = []
    if state == "Suspended":
        return [{"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended"}]
    if kueue:
        conditions.append({"type": "Suspended", "status": "False", "reason": "JobResumed", "message": "Job resumed"})
    if state == "Complete":
        if delayed:  # the Job controller's two-step ending since 1.31
            conditions.append(
                {
                    "type": "SuccessCriteriaMet",
                    "status": "True",
                    "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods",
                }
            )
        conditions.append(
            {
                "type": "Complete",
                "status": "True",
                "reason": "CompletionsReached",
                "message": "Reached expected number of succeeded pods",
            }
        )
    elif state == "Failed":
        message = "Job was active longer than specified deadline"
        if delayed:
            conditions.append({"type": "FailureTarget", "status": "True", "reason": reason, "message": message})
        conditions.append({"type": "Failed", "status": "True", "reason": reason, "message": message})
    return conditions


def _conditions_train_job(state: str, kueue: bool, reason: str = "") -> list[dict[str, Any]]:
    if state == "Suspended":
        return [{"type": "Suspended", "status": "True", "reason": "Suspended", "message": "TrainJob is suspended"}]
    conditions = []
    if kueue:
        conditions.append(
            {"type": "Suspended", "status": "False", "reason": "Resumed", "message": "TrainJob is resumed"}
        )
    if state == "Complete":
        conditions.append(
            {"type": "Complete", "status": "True", "reason": "JobsCompleted", "message": "TrainJob is completed"}
        )
    elif state == "Failed":
        conditions.append({"type": "Failed", "status": "True", "reason": reason, "message": "TrainJob has failed"})
    return conditions


def _patched_pod(train_job: dict[str, Any], runtime: dict[str, Any], rjob_name: str) -> dict[str, Any] | None:
    """A replicatedJob's pod spec after the TrainJob's runtimePatches (lists such as tolerations are replaced whole,
    containers merged by name, maps such as nodeSelector merged) and, for the node replicatedJob, the trainer's
    resourcesPerNode."""
    rjob = next(
        (r for r in _get(runtime, "spec", "template", "spec", "replicatedJobs") or [] if r.get("name") == rjob_name),
        None,
    )
    if rjob is None:
        return None
    pod: dict[str, Any] = copy.deepcopy(_get(rjob, "template", "spec", "template", "spec") or {})
    for patch in _get(train_job, "spec", "runtimePatches") or []:
        for patched in _get(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs") or []:
            if patched.get("name") != rjob_name:
                continue
            spec = _get(patched, "template", "spec", "template", "spec") or {}
            for field, value in spec.items():
                if isinstance(value, dict) and field == "nodeSelector":
                    pod[field] = {**(pod.get(field) or {}), **value}
                elif field in ("containers", "initContainers"):
                    # A list-map keyed by name in the TrainJob CRD's runtimePatches (x-kubernetes-list-map-keys:
                    # [name]): server-side apply merges each patched container into the runtime's of that name.
                    merged = {c.get("name"): copy.deepcopy(c) for c in pod.get(field) or []}
                    for container in value:
                        merged[container.get("name")] = {**merged.get(container.get("name"), {}), **container}
                    pod[field] = list(merged.values())
                else:
                    pod[field] = copy.deepcopy(value)
    pod.setdefault("restartPolicy", "OnFailure")  # JobSet's defaulting
    if rjob_name == "node":
        resources = _get(train_job, "spec", "trainer", "resourcesPerNode")
        for container in pod.get("containers") or []:
            if container.get("name") == "node" and resources:
                container["resources"] = copy.deepcopy(resources)
    return pod


def _replicas(runtime: dict[str, Any], rjob_name: str) -> int:
    for rjob in _get(runtime, "spec", "template", "spec", "replicatedJobs") or []:
        if rjob.get("name") == rjob_name:
            return int(rjob.get("replicas") or 1) * int(_get(rjob, "template", "spec", "parallelism") or 1)
    return 0


def _queue_problem(cluster: dict[str, Any], obj: dict[str, Any], kind: str) -> str | None:
    """Why a workload without a queue-name label is held (TrainJobs: Kueue manages those of a namespace with
    LocalQueues); None when it is not Kueue's."""
    if kind != "TrainJob" or QUEUE_LABEL in _labels(obj):
        return None
    namespace = _get(obj, "metadata", "namespace")
    if any(key.startswith(f"LocalQueue/{namespace}/") for key in _objects(cluster)):
        return f"no {QUEUE_LABEL} label while namespace {namespace} has LocalQueues: Kueue keeps the TrainJob suspended"
    return None


def _pod_name(key: str, seq: int) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = hashlib.sha256(f"{key}#{seq}".encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:5])


def _hangs(cluster: dict[str, Any], nodes: list[str]) -> bool:
    return any((_acceptance(cluster)["nodes"].get(n) or {}).get("hang") for n in nodes)


NGC_PYTORCH_BINARIES = frozenset(
    {"/bin/sh", "apt-get", "mkdir", "ssh-keygen", "/usr/local/mpi/bin/mpirun", "/usr/local/bin/all_reduce_perf_mpi"}
)
"""What the NGC PyTorch image (nvcr.io/nvidia/pytorch:YY.MM-py3) offers the acceptance test: the nccl-tests binaries
built with MPI under /usr/local/bin (Run:ai's nccl-tests tutorial for 26.01-py3: "ships with the NCCL test binaries
pre-built under /usr/local/bin/"; NVIDIA cloudai and CRE run /usr/local/bin/all_reduce_perf_mpi), Open MPI's mpirun
under /usr/local/mpi/bin (CRE's nccl-all-reduce entry), apt. It has no sshd: NVIDIA/cloudai#720 ("standard
PyTorch NGC containers do not include sshd", `/usr/sbin/sshd: No such file or directory`); a node pod must install
openssh-server (which brings ssh-keygen and /usr/sbin/sshd) before it starts one, as cloudai and CRE do."""


def _image_problem(pod: dict[str, Any], container: str) -> str | None:
    """Why a container of the NGC PyTorch image cannot run its command: a program the image does not ship."""
    spec = next((c for c in pod.get("containers") or [] if c.get("name") == container), None)
    if spec is None or "nvcr.io/nvidia/pytorch:" not in str(spec.get("image")):
        return None
    text = _command_text(spec)
    if "/usr/sbin/sshd" in text and not re.search(r"apt-get install\b[^;&|]*\bopenssh-server\b", text):
        image = spec.get("image")
        return f"container {container} runs /usr/sbin/sshd, which {image} does not ship (NVIDIA/cloudai#720)"
    for program in re.findall(r"(?<![\w/.-])(/[\w./-]+)", text):
        if program.startswith(("/usr/local/bin/", "/usr/local/mpi/bin/")) and program not in NGC_PYTORCH_BINARIES:
            return f"container {container} runs {program}, which {spec.get('image')} does not ship"
    return None


def reconcile(cluster: dict[str, Any], now: float) -> None:
    """What Kueue, the scheduler, the Job/JobSet controllers and the trainer do until nothing changes: admit
    suspended workloads, bind pending pods, finish what runs (unless a node hangs), fail what outlived
    activeDeadlineSeconds."""
    acceptance = _acceptance(cluster)
    for _ in range(5):
        changed = False
        for key in sorted(acceptance["workloads"], key=lambda k: acceptance["workloads"][k]["seq"]):
            obj = _objects(cluster).get(key)
            if obj is None:
                continue
            changed |= _step(cluster, key, obj, now)
        if not changed:
            break


def _step(cluster: dict[str, Any], key: str, obj: dict[str, Any], now: float) -> bool:
    acceptance = _acceptance(cluster)
    workload = acceptance["workloads"][key]
    kind, namespace, name = key.split("/", 2)
    before = json.dumps(workload, sort_keys=True)
    queue = _labels(obj).get(QUEUE_LABEL)
    kueue = bool(queue) or (kind == "TrainJob" and _queue_problem(cluster, obj, kind) is not None)
    runtime = None
    if kind == "Job":
        pod_sets = [PodSet("main", 1, _get(obj, "spec", "template", "spec") or {})]
    else:
        runtime = _runtime_of(cluster, obj)[1]
        pod_sets = []
        if runtime is not None:
            num_nodes = int(_get(obj, "spec", "trainer", "numNodes") or 0)
            for rjob_name, count in (("node", num_nodes), ("launcher", _replicas(runtime, "launcher"))):
                pod = _patched_pod(obj, runtime, rjob_name)
                if pod is not None and count:
                    pod_sets.append(PodSet(rjob_name, count, pod))
    state = workload.get("state", "New")
    if state == "New":
        state = workload["state"] = "Suspended" if kueue else "Pending"
        if state == "Pending":
            workload["startTime"] = now
    if state == "Suspended":
        problem = _queue_problem(cluster, obj, kind)
        admission = None
        if problem is None and queue:
            admission, problem = kueue_admission(cluster, key, namespace, queue, pod_sets)
        if problem is None:
            workload.update(state="Pending", admission=admission, startTime=now)
            state = "Pending"
        else:
            workload["reason"] = problem
    deadline = _get(obj, "spec", "activeDeadlineSeconds")
    if state in ("Pending", "Running") and deadline is not None and now >= workload["startTime"] + float(deadline):
        workload.update(state="Failed", reason="DeadlineExceeded", gpus={})
        state = "Failed"
    if state == "Pending":
        problem = (
            _bind_job(cluster, key, obj, workload, pod_sets[0].pod)
            if kind == "Job"
            else _bind_train_job(cluster, key, obj, workload, runtime=runtime, pod_sets=pod_sets)
        )
        if problem is None:
            state = workload["state"] = "Running"
            workload["pod"] = f"{name}-{_pod_name(key, workload['seq'])}"
            run: dict[str, Any] = {"kind": kind, "name": name, "namespace": namespace, "at": now}
            if kind == "Job":
                run["node"] = workload["nodes"][0]
            else:
                run["nodes"] = list(workload["nodes"])
            acceptance["runs"].append(run)
            workload["run"] = len(acceptance["runs"]) - 1
        else:
            workload["reason"] = problem
    cannot_start = None
    if kind == "TrainJob" and state == "Running" and runtime is not None:
        for rjob_name in ("node", "launcher"):
            pod = _patched_pod(obj, runtime, rjob_name)
            if pod is not None and (cannot_start := _image_problem(pod, "node")):
                break
    if cannot_start is not None:
        # Its pods crash-loop: the TrainJob runs until its deadline, as a pod that never becomes Ready does.
        workload["reason"] = cannot_start
    elif state == "Running" and not _hangs(cluster, workload["nodes"]):
        workload.update(state="Complete", gpus={}, completed=now)
        state = "Complete"
    if state in ("Running", "Complete"):
        workload.pop("reason", None)
    if state in ("Suspended", "Pending"):
        acceptance["unschedulable"][name] = workload["reason"]
    else:
        acceptance["unschedulable"].pop(name, None)
    conditions = (
        _conditions_job(cluster, state, kueue, workload.get("reason", ""))
        if kind == "Job"
        else _conditions_train_job(state, kueue, workload.get("reason", ""))
    )
    status: dict[str, Any] = {"conditions": conditions} if conditions else {}
    if kind == "Job":
        if state in ("Pending", "Running"):
            status["active"] = 1
        elif state == "Complete":
            status["succeeded"] = 1
        elif state == "Failed":
            status["failed"] = 1
    obj["status"] = status
    return json.dumps(workload, sort_keys=True) != before


def _bind_job(
    cluster: dict[str, Any], key: str, job: dict[str, Any], workload: dict[str, Any], pod: dict[str, Any]
) -> str | None:
    pod = _with_flavors(cluster, pod, workload.get("admission"))
    node = pinned_node(pod)
    if node is None:
        return (
            "stub policy: the pod is not pinned to exactly one node (spec.template.spec.affinity.nodeAffinity."
            "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields = metadata.name In"
            " [NODE])"
        )
    problem = _placement_problem(cluster, key, node, pod)
    if problem:
        return problem
    workload["nodes"] = [node]
    workload["gpus"] = {node: int(pod_requests(pod).get(GPU, Fraction(0)))}
    return None


def _bind_train_job(
    cluster: dict[str, Any],
    key: str,
    train_job: dict[str, Any],
    workload: dict[str, Any],
    *,
    runtime: dict[str, Any] | None,
    pod_sets: list[PodSet],
) -> str | None:
    name = _name(train_job)
    if runtime is None:
        return f"{_runtime_of(cluster, train_job)[0]} not found: the trainer cannot build the JobSet"
    pods = {p.name: p for p in pod_sets}
    if "node" not in pods:
        return f"{_runtime_of(cluster, train_job)[0]} has no replicatedJob named node"
    for pod_set in pod_sets:
        errors = validate_pod_spec(pod_set.pod, "spec.template.spec", job=True)
        if errors:
            job_name = f"{name}-{pod_set.name}-0"
            return f'the JobSet controller cannot create Job "{job_name}": Job.batch "{job_name}" is invalid: ' + (
                errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
            )
    node_pod = _with_flavors(cluster, pods["node"].pod, workload.get("admission"))
    nodes = _train_job_nodes(train_job)
    for node in nodes:
        problem = _placement_problem(cluster, key, node, node_pod)
        if problem:
            return f"node pod for {node}: {problem}"
    if "launcher" in pods:
        launcher = _with_flavors(cluster, pods["launcher"].pod, workload.get("admission"))
        problems = [_placement_problem(cluster, key, n, launcher) for n in sorted(cluster.get("nodes") or {})]
        if all(problems):
            return "launcher pod: no node can take it: " + "; ".join(str(p) for p in problems)
    workload["nodes"] = nodes
    workload["gpus"] = {node: int(pod_requests(node_pod).get(GPU, Fraction(0))) for node in nodes}
    return None


# ---- get and delete -----------------------------------------------------------------------------------------------


def get_object(cluster: dict[str, Any], kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
    obj = _objects(cluster).get(object_key(kind.kind, namespace if kind.namespaced else None, name))
    if obj is None:
        raise ApiError(f'Error from server (NotFound): {kind.plural} "{name}" not found')
    result: dict[str, Any] = obj
    return result


def delete_object(
    cluster: dict[str, Any], kind: Kind, namespace: str | None, name: str, *, ignore_not_found: bool, now: float
) -> str | None:
    """`kubectl delete KIND NAME`: the line kubectl prints, None when it was not there and that was allowed. Deleting a
    Job or TrainJob deletes its pods (background propagation), which frees their GPUs and quota."""
    key = object_key(kind.kind, namespace if kind.namespaced else None, name)
    objects = _objects(cluster)
    if key not in objects:
        if ignore_not_found:
            return None
        raise ApiError(f'Error from server (NotFound): {kind.plural} "{name}" not found')
    doomed = [key]
    if kind.kind == "Namespace":
        doomed += [k for k in objects if k.split("/", 2)[1] == name]
    acceptance = _acceptance(cluster)
    for gone in doomed:
        del objects[gone]
        if acceptance["workloads"].pop(gone, None) is not None:
            acceptance["unschedulable"].pop(gone.split("/", 2)[2], None)
    reconcile(cluster, now)
    return f'{kind.singular} "{name}" deleted'


_JSONPATH_STEP = re.compile(
    r"""\.([A-Za-z0-9_-]+)|\[\?\(@\.([A-Za-z0-9_.-]+)\s*(==|!=)\s*(?:"([^"]*)"|'([^']*)')\)\]|\[(\*|-?\d+)\]"""
)


def jsonpath(obj: Any, template: str) -> str:
    """The subset of kubectl's JSONPath the acceptance step uses: `{.a.b}`, `[N]`, `[*]` and filters
    `[?(@.field=="value")]`; several results are joined by spaces, maps and lists printed as JSON."""
    match = re.fullmatch(r"\{(.*)\}", template.strip())
    if match is None:
        raise ApiError(f"error: the stub's jsonpath needs one {{...}} expression, not {template!r}")
    expression, position, values = match[1], 0, [obj]
    if expression.startswith("$"):
        expression = expression[1:]
    while position < len(expression):
        step = _JSONPATH_STEP.match(expression, position)
        if step is None:
            raise ApiError(f"error: the stub's jsonpath does not understand {expression[position:]!r}")
        position = step.end()
        field, filter_field, operator, quoted, single, index = step.groups()
        following: list[Any] = []
        for value in values:
            if field is not None:
                if isinstance(value, dict) and field in value:
                    following.append(value[field])
            elif filter_field is not None:
                wanted = quoted if quoted is not None else single
                for item in value if isinstance(value, list) else []:
                    actual = _get(item, *filter_field.split("."))
                    if (str(actual) == wanted) == (operator == "=="):
                        following.append(item)
            elif index == "*":
                following.extend(
                    value if isinstance(value, list) else (value.values() if isinstance(value, dict) else [])
                )
            elif isinstance(value, list):
                number = int(index)
                if -len(value) <= number < len(value):
                    following.append(value[number])
        values = following
    return " ".join(_jsonpath_text(v) for v in values)


def _jsonpath_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return "" if value is None else str(value)


# ---- logs -----------------------------------------------------------------------------------------------------------


def _command_text(container: dict[str, Any]) -> str:
    return " ".join(str(part) for part in [*(container.get("command") or []), *(container.get("args") or [])])


_DCGM = re.compile(r"\bdcgmi\s+diag\b([^\n;&|]*)")


def dcgm_level(container: dict[str, Any]) -> int | None:
    """N of `dcgmi diag -r N ... -j` (N in 1..3) in the container's command and args; None if it does not run that."""
    for match in _DCGM.finditer(_command_text(container)):
        arguments = match[1].split()
        level = None
        for index, argument in enumerate(arguments):
            if argument in ("-r", "--run") and index + 1 < len(arguments):
                level = arguments[index + 1]
            elif argument.startswith("--run="):
                level = argument.split("=", 1)[1]
            elif argument.startswith("-r") and len(argument) > 2:
                level = argument[2:]
        if level in ("1", "2", "3") and ("-j" in arguments or "--json" in arguments):
            return int(level)
    return None


def _all_reduce_problem(container: dict[str, Any]) -> str | None:
    text = _command_text(container)
    if "all_reduce_perf" not in text:
        return f"container {container.get('name')} does not run all_reduce_perf ({text!r})"
    arguments = text.split()
    if "-g" in arguments and arguments.index("-g") + 1 < len(arguments):
        wanted = arguments[arguments.index("-g") + 1]
        limit = container_requests(container).get(GPU, Fraction(0))
        if not wanted.isdigit() or int(wanted) < 1 or int(wanted) > limit:
            return (
                f"all_reduce_perf -g {wanted} in container {container.get('name')}, which has {_show(limit)} GPU(s):"
                " the real one fails (CUDA: invalid device ordinal)"
            )
    return None


def _checked(container: dict[str, Any]) -> bool:
    arguments = _command_text(container).split()
    return not any(a == "-c" and i + 1 < len(arguments) and arguments[i + 1] == "0" for i, a in enumerate(arguments))


def _tail(text: str, tail: int) -> str:
    if tail < 0:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[-tail:]) if tail else ""


_ROW_FIELDS = 13


def _sample_busbw(text: str) -> float:
    rows = [line.split() for line in text.splitlines() if _is_row(line.split())]
    largest = max(rows, key=lambda fields: int(fields[0]))
    return min(float(largest[7]), float(largest[11]))


def _is_row(fields: list[str]) -> bool:
    return len(fields) == _ROW_FIELDS and fields[0].isdigit() and fields[1].isdigit()


def _time_text(value: float) -> str:
    return f"{value:.0f}" if value >= 10000 else (f"{value:.1f}" if value >= 100 else f"{value:.2f}")


def scaled_all_reduce(text: str, target_busbw: float, *, checked: bool = True) -> str:
    """nccl-tests' all_reduce_perf output with every algbw and busbw (out-of-place and in-place) and the average line
    multiplied by target / the sample's busbw at its largest size (the lower half), the times divided by it, the
    columns kept right-aligned. Unchecked runs (`-c 0`) print N/A for #wrong, as nccl-tests does."""
    factor = target_busbw / _sample_busbw(text)
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        newline = line[len(body) :]
        fields = body.split()
        if _is_row(fields):
            replacements: dict[int, str] = {}
            for half in (5, 9):
                replacements[half] = _time_text(float(fields[half]) / factor)
                replacements[half + 1] = f"{float(fields[half + 1]) * factor:.2f}"
                replacements[half + 2] = f"{float(fields[half + 2]) * factor:.2f}"
                if not checked:
                    replacements[half + 3] = "N/A"
            pieces, previous_end = [], 0
            for index, token in enumerate(re.finditer(r"\S+", body)):
                width = token.end() - previous_end
                new = replacements.get(index, token.group())
                pieces.append(new.rjust(width) if len(new) < width else " " + new)
                previous_end = token.end()
            out.append("".join(pieces) + body[previous_end:] + newline)
        elif match := re.match(r"^(#\s*Avg bus bandwidth\s*:\s*)(\S+)(.*)$", body):
            out.append(f"{match[1]}{float(match[2]) * factor:.3f}{match[3]}{newline}")
        else:
            out.append(line)
    return "".join(out)


def _waiting(container: str, pod_name: str, has_init: bool) -> ApiError:
    reason = "PodInitializing" if has_init else "ContainerCreating"
    return ApiError(
        f'Error from server (BadRequest): container "{container}" in pod "{pod_name}" is waiting to start: {reason}'
    )


def job_logs(
    cluster: dict[str, Any], namespace: str, name: str, container: str | None, *, tail: int, now: float
) -> str:
    """`kubectl -n NS logs job/NAME -c CONTAINER`: the sample output of what the container runs, once its pod ran."""
    reconcile(cluster, now)
    job = get_object(cluster, BY_KIND["Job"], namespace, name)
    key = object_key("Job", namespace, name)
    workload = _acceptance(cluster)["workloads"].get(key) or {}
    pod = _get(job, "spec", "template", "spec") or {}
    containers = {c.get("name"): c for _, _, c in _all_containers(pod)}
    state = workload.get("state")
    if state not in ("Pending", "Running", "Complete"):
        # No pod at all (suspended, or deleted at the deadline): kubectl waits --pod-running-timeout for one.
        raise ApiError("error: timed out waiting for the condition")
    pod_name = str(workload.get("pod") or f"{name}-{_pod_name(key, workload['seq'])}")
    chosen = container or str((pod.get("containers") or [{}])[0].get("name"))
    if chosen not in containers:
        raise ApiError(f"Error from server (BadRequest): container {chosen} is not valid for pod {pod_name}")
    if state != "Complete":
        raise _waiting(chosen, pod_name, bool(pod.get("initContainers")))
    node = workload["nodes"][0]
    hardware = _acceptance(cluster)["nodes"].get(node) or {}
    spec = containers[chosen]
    if chosen == "dcgm-diag":
        level = dcgm_level(spec)
        if level is None:
            raise ApiError(
                f"error: stub: container dcgm-diag of Job {name} does not run `dcgmi diag -r N -j` (N 1-3):"
                f" {_command_text(spec)!r}"
            )
        _acceptance(cluster)["runs"][workload["run"]]["dcgmLevel"] = level
        diag = str(hardware.get("diag") or "pass")
        return _tail(DIAG_SAMPLES[diag].read_text(), tail)
    if chosen == "nccl-loopback":
        if problem := _all_reduce_problem(spec):
            raise ApiError(f"error: stub: {problem}")
        sample = ALL_REDUCE_SAMPLE.read_text()
        target = float(hardware.get("busbw") or _sample_busbw(sample))
        return _tail(scaled_all_reduce(sample, target, checked=_checked(spec)), tail)
    return ""


def parse_selector(selector: str) -> dict[str, str]:
    pairs = {}
    for part in selector.split(","):
        key, operator, value = re.split(r"(==|=)", part, maxsplit=1) if "=" in part else (part, "", "")
        if not operator or "!" in key:
            raise ApiError(f"error: the stub knows only key=value label selectors, not {selector!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def _pod_labels(train_job_name: str, rjob_name: str) -> dict[str, str]:
    """The JobSet labels the first pod of a TrainJob's replicatedJob carries (see JOBSET_NAME_LABEL)."""
    return {JOBSET_NAME_LABEL: train_job_name, REPLICATED_JOB_LABEL: rjob_name, JOB_INDEX_LABEL: "0"}


def launcher_logs(
    cluster: dict[str, Any], namespace: str, selector: str, container: str | None, *, tail: int, now: float
) -> tuple[str, str]:
    """`kubectl -n NS logs -l SELECTOR -c C` over the pods of the namespace's TrainJobs: (stdout, stderr). A pod
    matches when it carries every key=value of the selector among the labels JobSet really sets (_pod_labels); no
    pod (a label no controller sets, the TrainJob missing, suspended, its nodes pending or the JobSet gone) is
    kubectl's "No resources found in NS namespace." on stderr and exit 0 (kubernetes/kubectl pkg/cmd/logs/logs.go,
    Complete: printed to ErrOut, no error returned)."""
    reconcile(cluster, now)
    labels = parse_selector(selector)
    none = ("", f"No resources found in {namespace} namespace.\n")
    prefix = object_key("TrainJob", namespace, "")
    matched = [
        (key, rjob_name)
        for key in sorted(_objects(cluster))
        if key.startswith(prefix)
        for rjob_name in ("launcher", "node")
        if all(_pod_labels(key[len(prefix) :], rjob_name).get(k) == v for k, v in labels.items())
    ]
    if not matched:
        return none
    if len(matched) > 1:
        raise ApiError(f"error: stub: the selector {selector!r} matches the pods of {len(matched)} replicated jobs")
    key, rjob_name = matched[0]
    name = key[len(prefix) :]
    train_job = _objects(cluster)[key]
    workload = _acceptance(cluster)["workloads"].get(key) or {}
    if workload.get("state") not in ("Running", "Complete"):
        return none
    runtime = _runtime_of(cluster, train_job)[1]
    pod = _patched_pod(train_job, runtime, rjob_name) if runtime else None
    if pod is None:
        return none
    pod_name = f"{name}-{rjob_name}-0-0-{_pod_name(key, workload['seq'])}"
    containers = {c.get("name"): c for _, _, c in _all_containers(pod)}
    chosen = container or str((pod.get("containers") or [{}])[0].get("name"))
    if chosen not in containers:
        raise ApiError(f"error: container {chosen} is not valid for pod {pod_name}")
    if workload["state"] != "Complete" or rjob_name != "launcher":
        return "", ""  # running (a node hangs) or an sshd: nothing printed
    spec = dict(containers[chosen])
    trainer = _get(train_job, "spec", "trainer") or {}
    if chosen == "node" and (trainer.get("command") or trainer.get("args")):
        spec["command"], spec["args"] = trainer.get("command") or spec.get("command"), trainer.get("args") or []
    text = _command_text(spec)
    if "all_reduce_perf" not in text:
        raise ApiError(f"error: stub: the launcher of TrainJob {name} does not run all_reduce_perf ({text!r})")
    sample = ALL_REDUCE_SAMPLE.read_text()
    default = _sample_busbw(sample)
    nodes = _acceptance(cluster)["nodes"]
    slowest = min(float((nodes.get(n) or {}).get("busbw") or default) for n in workload["nodes"])
    return _tail(scaled_all_reduce(sample, LAUNCHER_TRAINER_FACTOR * slowest, checked=_checked(spec)), tail), ""
