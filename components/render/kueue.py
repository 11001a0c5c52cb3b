"""Kueue as pure data: the release (manager configuration with the ML integrations) and the objects that
turn the stack's GPUs into team queues: the Topology, ResourceFlavors, ClusterQueues, namespaces, LocalQueues and
WorkloadPriorityClasses, all in kueue.x-k8s.io/v1beta2 (the storage version)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..config import checks
from ..config.derived import GPU_TAINT, GpuFlavor, gpu_flavors, monitoring_wanted, node_taints, platform_tolerations
from ..config.kueue import CPU_FLAVOR, GPU_RESOURCE_PREFIX, KueueSpec, QuotaSpec, TeamSpec
from ..config.nodes import GPU_MODEL_LABEL, NodeSpec
from ..config.serving import KserveSpec, llm_endpoints
from ..config.spec import Spec
from ..config.training import KubeflowSpec
from . import manifests, yaml_text
from .helm import ChartRelease, tolerating
from .kubeadm import node_labels

KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
TOPOLOGY_NAME = "datacenter"
"""The one Topology the GPU flavors share; its object is named after its levels (see named_after)."""
FLAVOR_LABEL = "mlcluster.io/flavor"
"""On every ResourceFlavor: the name the stack's quotas use (kueue.teams[].quotas[].flavor), whatever the object's
name (see named_after)."""
TOPOLOGY_ANNOTATIONS = {
    "preferred": "kueue.x-k8s.io/podset-preferred-topology",
    "required": "kueue.x-k8s.io/podset-required-topology",
}

# Kueue defers a framework whose CRDs are not there yet and starts it when they appear, so the
# integrations can be on before the Trainer (TrainJob, JobSet) is installed.
BASE_INTEGRATIONS = ("batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob")
LEGACY_PYTORCHJOB = "kubeflow.org/pytorchjob"

Manifest = dict[str, Any]


SERVING_INTEGRATIONS = ("deployment", "leaderworkerset.x-k8s.io/leaderworkerset")
"""What a queued LLM endpoint's workload is: a Deployment, or a LeaderWorkerSet across nodes. Both enable Kueue's
pod integration implicitly (kueue v0.19.2 pkg/controller/jobs/{deployment,leaderworkerset}, ImplicitlyEnabled
FrameworkNames), so pods without a queue-name label stay unmanaged (manageJobsWithoutQueueName is false)."""


def integrations(kubeflow: KubeflowSpec, kserve: KserveSpec | None = None) -> list[str]:
    frameworks = list(BASE_INTEGRATIONS)
    if kubeflow.legacy_training_operator:
        frameworks.append(LEGACY_PYTORCHJOB)
    if kserve is not None and any(e.queue is not None for e in llm_endpoints(kserve)):
        frameworks.extend(SERVING_INTEGRATIONS)
    return frameworks


def manager_configuration(kueue: KueueSpec, kubeflow: KubeflowSpec, kserve: KserveSpec | None = None) -> dict[str, Any]:
    """config.kueue.x-k8s.io/v1beta2 Configuration. The chart takes it as one YAML string that replaces its
    default, so the chart's defaults (ports, leader election, concurrency) are repeated here."""
    configuration: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 10,
                "LocalQueue.kueue.x-k8s.io": 5,
                "ClusterQueue.kueue.x-k8s.io": 5,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 300, "burst": 500},
        "integrations": {"frameworks": integrations(kubeflow, kserve)},
    }
    if (gang := wait_for_pods_ready(kueue)) is not None:
        configuration["waitForPodsReady"] = gang
    if kueue.fair_sharing:
        # In v1beta2 the section's presence turns fair sharing on.
        configuration["fairSharing"] = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    return configuration


def wait_for_pods_ready(kueue: KueueSpec) -> dict[str, Any] | None:
    """The manager configuration's waitForPodsReady, or None when off. In config v1beta2 the section's presence
    turns it on (v1beta1's `enable` is gone) and `timeout` is required. blockAdmission stays at Kueue's default
    (false): evicting a gang that cannot start is enough, and blocking would let one stuck image pull hold every
    other team's admissions."""
    gang = kueue.wait_for_pods_ready
    if not gang.enabled:
        return None
    requeuing: dict[str, Any] = {
        "timestamp": gang.requeuing_timestamp,
        "backoffBaseSeconds": gang.backoff_base_seconds,
        "backoffMaxSeconds": gang.backoff_max_seconds,
    }
    if gang.backoff_limit_count is not None:
        requeuing["backoffLimitCount"] = gang.backoff_limit_count
    section: dict[str, Any] = {"timeout": gang.timeout, "requeuingStrategy": requeuing}
    if gang.recovery_timeout is not None:
        section["recoveryTimeout"] = gang.recovery_timeout
    return section


def kueue_values(spec: Spec) -> dict[str, Any]:
    values: dict[str, Any] = {
        "managerConfig": {
            "controllerManagerConfigYaml": yaml_text.dump(manager_configuration(spec.kueue, spec.kubeflow, spec.kserve))
        }
    }
    if monitoring_wanted(spec):
        # The chart's ServiceMonitor, for the queue and quota metrics the Kueue dashboard and alerts read.
        values["enablePrometheus"] = True
        values["metrics"] = {"prometheusNamespace": spec.monitoring.namespace}
    return values


def kueue_release(spec: Spec) -> ChartRelease:
    return ChartRelease(
        name="kueue",
        chart="oci://registry.k8s.io/kueue/charts/kueue",
        version=spec.kueue.version,
        namespace=spec.kueue.namespace,
        values=tolerating(kueue_values(spec), ["controllerManager.tolerations"], platform_tolerations(spec)),
        upstream_chart="kueue",
    )


DECLARED_GPUS_ANNOTATION = "mlcluster.io/declared-gpus"
"""On each GPU flavor: its devices per resource as validation counted them (the nodes' GPUs × MIG slices ×
time-slicing replicas, or `kueue.inventory` in mode existing), as JSON, so that the policy pack checks the quotas
against the same number (policies see resources, not config); `unchecked` where validation cannot count them (a
custom MIG layout) and checks nothing."""
UNCHECKED = "unchecked"


def named_after(base: str, immutable: Any) -> str:
    """The object name of a Kueue object whose fields Kueue 0.19's CRDs make immutable: `<base>-<6 hex>` of those
    fields. A Topology's levels never change (`self == oldSelf`), nor do a flavor's nodeLabels, tolerations and
    topologyName once topologyName is set. Changing them needs a new object, and the old one cannot be deleted
    first: Kueue's resource-in-use finalizer holds a flavor while a ClusterQueue lists it and a Topology while a
    flavor names it. A new name makes the change one Pulumi can apply in an order the API accepts: the new object
    is created, what references it moves to it, and the old one is deleted at the end, once nothing uses it
    (docs/kueue.md, Changing what Kueue makes immutable)."""
    digest = hashlib.sha256(json.dumps(immutable, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"{base}-{digest[:6]}"


def _gpu_flavor_spec(kueue: KueueSpec, nodes: tuple[NodeSpec, ...], flavor: GpuFlavor) -> dict[str, Any]:
    """nodeLabels and tolerations from the same functions that label and taint the nodes, so they cannot drift."""
    if flavor.nodes:
        labels = {GPU_MODEL_LABEL: node_labels(flavor.nodes[0])[GPU_MODEL_LABEL]}
        taints = sorted(
            {t for node in flavor.nodes for t in node_taints(nodes, node) if t.startswith("nvidia.com/gpu")}
        )
    else:
        labels = dict(flavor.node_labels) or {GPU_MODEL_LABEL: flavor.model}
        taints = [GPU_TAINT]
    # Kueue adds these tolerations to the pods it admits on this flavor: jobs need not carry them.
    body: dict[str, Any] = {"nodeLabels": labels, "tolerations": [checks.toleration_of(t) for t in taints]}
    if (datacenter := topology(kueue)) is not None:
        body["topologyName"] = datacenter["metadata"]["name"]
    return body


def topology(kueue: KueueSpec) -> Manifest | None:
    """The datacenter levels, coarsest first and the node last (Kueue's rule), as the GPU flavors' Topology."""
    if kueue.topology is None:
        return None
    levels = [{"nodeLabel": label} for label in kueue.topology.level_labels().values()]
    return {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": named_after(TOPOLOGY_NAME, levels)},
        "spec": {"levels": levels},
    }


def training_topology_annotations(kueue: KueueSpec) -> dict[str, str]:
    """What a training pod template asks Kueue for: all its pods in one domain of kueue.topology.trainingLevel."""
    declared = kueue.topology
    if not kueue.enabled or declared is None:
        return {}
    return {TOPOLOGY_ANNOTATIONS[declared.training_placement]: declared.level_labels()[declared.training_level]}


def resource_flavors(spec: Spec) -> list[Manifest]:
    """The CPU flavor and one per GPU model. A flavor with a topology is named after its immutable fields
    (named_after); the others keep the quotas' name, as Kueue lets their fields change in place."""
    flavors = [_object("ResourceFlavor", CPU_FLAVOR, spec={}, labels={FLAVOR_LABEL: CPU_FLAVOR})]
    for flavor in sorted(gpu_flavors(spec).values(), key=lambda f: f.name):
        body = _gpu_flavor_spec(spec.kueue, spec.nodes, flavor)
        name = named_after(flavor.name, body) if "topologyName" in body else flavor.name
        manifest = _object("ResourceFlavor", name, spec=body, labels={FLAVOR_LABEL: flavor.name})
        if flavor.unchecked:
            manifest["metadata"]["annotations"] = {DECLARED_GPUS_ANNOTATION: UNCHECKED}
        elif flavor.capacity:
            declared = json.dumps(dict(sorted(flavor.capacity.items())), separators=(",", ":"))
            manifest["metadata"]["annotations"] = {DECLARED_GPUS_ANNOTATION: declared}
        flavors.append(manifest)
    return flavors


def flavor_objects(flavors: list[Manifest]) -> dict[str, str]:
    """The quotas' flavor name -> the ResourceFlavor object's name (they differ for a flavor with a topology), from
    the rendered flavors (resource_flavors)."""
    return {str(f["metadata"]["labels"][FLAVOR_LABEL]): str(f["metadata"]["name"]) for f in flavors}


def _covered_resources(quotas: tuple[QuotaSpec, ...]) -> list[str]:
    names = {name for quota in quotas for name in quota.nominal}
    first = [n for n in ("cpu", "memory") if n in names]
    devices = sorted(n for n in names if n.startswith(GPU_RESOURCE_PREFIX))
    return first + sorted(names - set(first) - set(devices)) + devices


def _flavor_quotas(quota: QuotaSpec, covered: list[str], objects: Mapping[str, str]) -> dict[str, Any]:
    resources = []
    for name in covered:
        entry: dict[str, Any] = {"name": name, "nominalQuota": quota.nominal.get(name, "0")}
        if name in quota.borrowing_limit:
            entry["borrowingLimit"] = quota.borrowing_limit[name]
        if name in quota.lending_limit:
            entry["lendingLimit"] = quota.lending_limit[name]
        resources.append(entry)
    return {"name": objects.get(quota.flavor, quota.flavor), "resources": resources}


def cluster_queue(kueue: KueueSpec, team: TeamSpec, flavor_names: Mapping[str, str] | None = None) -> Manifest:
    """flavor_names: the quotas' flavor name -> the object's name (flavor_objects); a name not in it is the
    object's."""
    objects = flavor_names or {}
    covered = _covered_resources(team.quotas)
    body: dict[str, Any] = {}
    if kueue.cohort:
        body["cohortName"] = kueue.cohort
    # A null selector admits no namespace at all: name the team's own.
    body["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": team.queue_namespace}}
    body["queueingStrategy"] = team.queueing_strategy
    # One resource group: every flavor lists every resource, so a job lands on one flavor as a whole and a
    # CPU-only job never takes GPU-node quota while the CPU flavor (listed first) has room.
    body["resourceGroups"] = [
        {"coveredResources": covered, "flavors": [_flavor_quotas(q, covered, objects) for q in team.quotas]}
    ]
    preemption = team.preemption
    body["preemption"] = {
        "withinClusterQueue": preemption.within_cluster_queue,
        "reclaimWithinCohort": preemption.reclaim_within_cohort,
        "borrowWithinCohort": {"policy": preemption.borrow_within_cohort},
    }
    if team.fair_sharing_weight is not None:
        body["fairSharing"] = {"weight": team.fair_sharing_weight}
    return _object("ClusterQueue", team.name, spec=body)


def team_namespace(team: TeamSpec) -> Manifest:
    return manifests.namespace(team.queue_namespace)


def local_queue(team: TeamSpec) -> Manifest:
    return _object("LocalQueue", team.name, namespace=team.queue_namespace, spec={"clusterQueue": team.name})


def priority_classes(kueue: KueueSpec) -> list[Manifest]:
    return [
        {
            "apiVersion": KUEUE_API,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
            "description": f"Priority {value}; jobs opt in with the label {PRIORITY_CLASS_LABEL}: {name}.",
        }
        for name, value in sorted(kueue.priority_classes.items(), key=lambda item: -item[1])
    ]


def _object(
    kind: str,
    name: str,
    *,
    spec: Mapping[str, Any],
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Manifest:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": KUEUE_API, "kind": kind, "metadata": metadata, "spec": dict(spec)}


def kueue_objects(spec: Spec) -> list[Manifest]:
    """Every object, in the order they can be created: the topology, flavors, priorities, queues, namespaces,
    local queues."""
    teams = spec.kueue.teams
    datacenter = topology(spec.kueue)
    flavors = resource_flavors(spec)
    return [
        *([datacenter] if datacenter else []),
        *flavors,
        *priority_classes(spec.kueue),
        *(cluster_queue(spec.kueue, team, flavor_objects(flavors)) for team in teams),
        *(team_namespace(team) for team in teams),
        *(local_queue(team) for team in teams),
    ]
