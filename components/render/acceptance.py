"""Acceptance as pure data: the test Jobs and the multi-node TrainJob, the input of the first control plane's
acceptance step, and the reading of what it printed (docs/acceptance.md).

The step (components/scripts/acceptance.sh) gets one Job template per GPU count class and a table of the nodes
with the record each must carry (what acceptance vouches for: the machine, GPU model, driver, GPU Operator,
toolkit, level). It tests a node when the record the node last passed or failed with differs from the table's, so
the table is where the retest rules (components/acceptance/triggers.py) take effect: a node that needs no test keeps
its previous record in the table, the step's input does not change, and an unchanged `up` runs nothing.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..acceptance.spec import DCGM_RUN_LEVEL, LEVEL_ORDER, AcceptanceLevel
from ..acceptance.triggers import NodeNow, NodeRecord, StackNow, nodes_to_retest
from ..acceptance.verdict import QUARANTINE_TAINT, NodeEvidence, ctrf_report, judge, judge_group
from ..acceptance.waves import plan_waves
from ..config import checks
from ..config.acceptance import AcceptanceSettings, loopback_fabric
from ..config.derived import multi_node_fabric, node_taints, tested_nodes
from ..config.gpu import GpuOperatorSpec
from ..config.kueue import CPU_FLAVOR, KueueSpec, flavor_name
from ..config.network import NetworkSpec
from ..config.nodes import NodeSpec
from ..config.spec import Spec
from .kueue import flavor_objects, resource_flavors
from .network import rdma_device, rdma_security_context
from .shell import NodeStep, rendered_step
from .yaml_text import dump_all

OUTPUT = "acceptance"
"""The stack output with each node's verdict and record; the next run (a preview included) reads it back."""
REPORT_OUTPUT = "acceptanceReport"
"""The CTRF document of the last run."""
RUNTIME_NAME = "mlcluster-nccl-all-reduce"
QUEUE_NAME = "mlcluster-acceptance"
PATCH_MANAGER = "mlcluster.io/acceptance"
NODES_ANNOTATION = "mlcluster.io/acceptance-nodes"
APP_LABEL = {"app.kubernetes.io/name": "mlcluster-acceptance"}
NODE_PLACEHOLDER, JOB_PLACEHOLDER, GPUS_PLACEHOLDER = "@NODE@", "@JOB@", "@GPUS@"
SSH_PORT = 2222
SSHD_COMMAND = (
    "set -e; "
    "if ! test -x /usr/sbin/sshd; then apt-get update -qq && apt-get install -y -qq --no-install-recommends"
    " openssh-server; fi; "
    "mkdir -p /run/sshd && ssh-keygen -A && "
    f"exec /usr/sbin/sshd -De -p {SSH_PORT} -o StrictModes=no"
)
"""The node pods' sshd, as NVIDIA's own MPI NCCL tests start it in the NGC PyTorch image, which has none (CRE's
nccl-all-reduce entry and cloudai install openssh-server first): host keys generated, StrictModes off for the key
files Trainer's MPI plugin mounts with its own modes (as mpi-operator's base image sets it). The install needs the
distribution's package mirror from the pod (an air-gapped site: an image with sshd, acceptance.ncclTestsImage)."""
MPIRUN = "/usr/local/mpi/bin/mpirun"
ALL_REDUCE = "/usr/local/bin/all_reduce_perf_mpi"
SSH_CLIENT_OPTIONS = (
    f"-p {SSH_PORT} -o ConnectionAttempts=10 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
)
"""How mpirun's ssh reaches the node pods: their port; host keys generated at start, so none is known beforehand
(mpi-operator's base image sets StrictHostKeyChecking no; ConnectionAttempts as Trainer's MPI plugin sets it)."""
NCCL_SIZES = ["-b", "8", "-e", "8G", "-f", "2"]
"""8 B to 8 GiB, doubling: the verdict reads the largest size (bandwidth), the small ones show latency."""
OUTPUT_PREFIX = "mlcluster-acceptance: "


def job_name(node: str) -> str:
    """`acceptance-<node>`, shortened with a hash where the node's name would take it past 63 characters."""
    name = f"acceptance-{node}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(node.encode()).hexdigest()[:8]
    return f"acceptance-{node[:42].rstrip('-.')}-{digest}"


def _gpu_taint_tolerations(nodes: tuple[NodeSpec, ...], only: Sequence[str]) -> list[dict[str, str]]:
    """Every taint mlcluster puts on a tested node, and the quarantine taint (a failed node is retested)."""
    taints = sorted({taint for node in tested_nodes(nodes, only) for taint in node_taints(nodes, node)})
    tolerations = [checks.toleration_of(taint) for taint in taints]
    tolerations.append({"key": QUARANTINE_TAINT.key, "operator": "Exists", "effect": QUARANTINE_TAINT.effect})
    return tolerations


def _pinned_to(nodes: Sequence[str]) -> dict[str, Any]:
    """Required node affinity on the Node's name, as DaemonSets pin their pods (the hostname label may differ).
    One term per node: the API server takes a single value in a metadata.name field selector, and terms are ORed."""
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]} for node in nodes]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def _gpu_limits(gpus: str) -> dict[str, Any]:
    return {"limits": {"nvidia.com/gpu": gpus}}


def _dcgm_container(acceptance: AcceptanceSettings) -> dict[str, Any]:
    level = DCGM_RUN_LEVEL[acceptance.level]
    # The JSON must be all the container prints: the host engine's start line goes away, and a failed test
    # (dcgmi's non-zero exit) still lets the NCCL test run; the JSON says what failed.
    script = (
        "nv-hostengine >/dev/null 2>&1 || { echo 'nv-hostengine did not start' >&2; exit 1; }\n"
        f"dcgmi diag -r {level} -j || true\n"
    )
    return {
        "name": "dcgm-diag",
        "image": acceptance.dcgm_image,
        "command": ["/bin/sh", "-c", script],
        "resources": _gpu_limits(GPUS_PLACEHOLDER),
        # DCGM's diagnostics read GPU counters that need CAP_SYS_ADMIN (as dcgm-exporter's profiling metrics).
        "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}},
    }


def _nccl_loopback_container(acceptance: AcceptanceSettings) -> dict[str, Any]:
    return {
        "name": "nccl-loopback",
        "image": acceptance.nccl_tests_image,
        "command": ["all_reduce_perf"],
        "args": [*NCCL_SIZES, "-g", GPUS_PLACEHOLDER, "-c", "1"],
        "resources": _gpu_limits(GPUS_PLACEHOLDER),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }


def _queue_label(kueue: KueueSpec) -> dict[str, str]:
    return {"kueue.x-k8s.io/queue-name": QUEUE_NAME} if kueue.enabled else {}


def job_template(
    nodes: tuple[NodeSpec, ...],
    acceptance: AcceptanceSettings,
    kueue: KueueSpec,
    wave_timeout_seconds: int,
    *,
    multi_gpu: bool,
) -> dict[str, Any]:
    """The Job for one node, with @NODE@, @JOB@ and @GPUS@ for the step to fill in (`fill_job`)."""
    labels = {**APP_LABEL, "mlcluster.io/acceptance-node": NODE_PLACEHOLDER}
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "affinity": _pinned_to([NODE_PLACEHOLDER]),
        "tolerations": _gpu_taint_tolerations(nodes, acceptance.nodes),
    }
    if multi_gpu:
        pod["initContainers"] = [_dcgm_container(acceptance)]
        pod["containers"] = [_nccl_loopback_container(acceptance)]
        pod["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    else:
        pod["containers"] = [_dcgm_container(acceptance)]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": JOB_PLACEHOLDER,
            "namespace": acceptance.namespace,
            "labels": {**labels, **_queue_label(kueue)},
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": wave_timeout_seconds,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def fill_job(template_text: str, node: str, gpus: int) -> str:
    """What the step's sed does to a template: the Job of `node` (tests read the result as the API would)."""
    return (
        template_text.replace(JOB_PLACEHOLDER, job_name(node))
        .replace(NODE_PLACEHOLDER, node)
        .replace(GPUS_PLACEHOLDER, str(gpus))
    )


def training_runtime(acceptance: AcceptanceSettings, nodes: tuple[NodeSpec, ...]) -> dict[str, Any]:
    """An MPI TrainingRuntime for nccl-tests, patterned on Kubeflow Trainer's own deepspeed-distributed runtime:
    sshd on every node, a launcher that runs mpirun once they are ready."""
    image = acceptance.nccl_tests_image
    tolerations = _gpu_taint_tolerations(nodes, acceptance.nodes)
    sshd = SSHD_COMMAND
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {
            "name": RUNTIME_NAME,
            "namespace": acceptance.namespace,
            "labels": {**APP_LABEL, "trainer.kubeflow.org/framework": "mpi"},
        },
        "spec": {
            "mlPolicy": {
                "numNodes": 2,
                "mpi": {
                    "numProcPerNode": 1,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": "/root/.ssh",
                    "runLauncherAsNode": False,
                },
            },
            "template": {
                "spec": {
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "tolerations": tolerations,
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": image,
                                                    "command": ["/bin/sh", "-c", sshd],
                                                    "readinessProbe": {
                                                        "tcpSocket": {"port": SSH_PORT},
                                                        "initialDelaySeconds": 5,
                                                    },
                                                    "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                                                }
                                            ],
                                            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                                        }
                                    }
                                }
                            },
                        },
                        {
                            "name": "launcher",
                            "dependsOn": [{"name": "node", "status": "Ready"}],
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "tolerations": tolerations,
                                            "containers": [{"name": "node", "image": image}],
                                        }
                                    }
                                },
                            },
                        },
                    ],
                }
            },
        },
    }


@dataclass(frozen=True)
class NodeGroup:
    """Nodes one multi-node all-reduce spans: one topology domain, one GPU model and count."""

    name: str
    nodes: tuple[str, ...]
    gpu_model: str
    gpus_per_node: int


def _domain(kueue: KueueSpec, node: NodeSpec) -> str:
    if not node.topology:
        return "all"
    levels = kueue.topology.levels if kueue.topology is not None else tuple(node.topology)
    finest = [level for level in levels if level in node.topology]
    return node.topology[finest[-1]] if finest else "all"


def node_groups(nodes: tuple[NodeSpec, ...], kueue: KueueSpec, only: Sequence[str]) -> tuple[NodeGroup, ...]:
    """The multi-node groups: nodes of one topology domain (the finest level they declare, else all nodes) with
    the same GPU model and count, as a TrainJob gives every node the same resources."""
    members: dict[tuple[str, str, int], list[str]] = {}
    for node in tested_nodes(nodes, only):
        assert node.gpu is not None
        members.setdefault((_domain(kueue, node), node.gpu.model, node.gpu.count), []).append(node.name)
    groups = []
    for (domain, model, count), names in sorted(members.items()):
        raw = f"{domain}-{model}-{count}gpu".lower()
        name = re.sub(r"[^a-z0-9-]+", "-", raw).strip("-")[:40].rstrip("-")
        groups.append(NodeGroup(name, tuple(sorted(names)), model, count))
    return tuple(groups)


def train_job(
    acceptance: AcceptanceSettings,
    kueue: KueueSpec,
    network: NetworkSpec,
    group: NodeGroup,
    wave_timeout_seconds: int,
) -> dict[str, Any]:
    """The all-reduce across one group's nodes; with network.rdma on, over the fabric it is judged for: each node
    pod holds the RDMA device and IPC_LOCK, as a training pod does, so NCCL does not fall back to sockets."""
    ranks = len(group.nodes) * group.gpus_per_node
    mpirun = [
        MPIRUN,
        "--allow-run-as-root",
        "-np",
        str(ranks),
        "-N",
        str(group.gpus_per_node),
        "--bind-to",
        "none",
        "-mca",
        "plm_rsh_args",
        SSH_CLIENT_OPTIONS,
        ALL_REDUCE,
        *NCCL_SIZES,
        "-g",
        "1",
        "-c",
        "1",
    ]
    pod_patch: dict[str, Any] = {"affinity": _pinned_to(group.nodes)}
    if network.rdma.enabled:
        # runtimePatches' containers are a list-map keyed by name (the TrainJob CRD): this merges into `node`.
        pod_patch["containers"] = [{"name": "node", **rdma_security_context(network)}]
    node_patch = {"name": "node", "template": {"spec": {"template": {"spec": pod_patch}}}}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": f"all-reduce-{group.name}",
            "namespace": acceptance.namespace,
            "labels": {**APP_LABEL, **_queue_label(kueue)},
            "annotations": {NODES_ANNOTATION: ",".join(group.nodes)},
        },
        "spec": {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": RUNTIME_NAME},
            "activeDeadlineSeconds": wave_timeout_seconds,
            "trainer": {
                "numNodes": len(group.nodes),
                "command": mpirun,
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": str(group.gpus_per_node), **rdma_device(network)}},
            },
            "runtimePatches": [
                {
                    "manager": PATCH_MANAGER,
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node_patch]}}},
                }
            ],
        },
    }


def kueue_objects(
    kueue: KueueSpec,
    nodes: tuple[NodeSpec, ...],
    acceptance: AcceptanceSettings,
    flavor_names: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Where Kueue is on: a ClusterQueue of its own (no cohort: it borrows from and lends to no team) sized to the
    fleet's GPUs, and its LocalQueue; the team quotas stay as they are. flavor_names: a flavor's object name
    where it differs from the quotas' name (render.kueue.flavor_objects)."""
    objects = flavor_names or {}
    if not kueue.enabled:
        return []
    gpus = sum(node.gpu.count for node in tested_nodes(nodes, acceptance.nodes) if node.gpu is not None)
    flavors = sorted({node.gpu.model for node in tested_nodes(nodes, acceptance.nodes) if node.gpu is not None})
    quotas = [
        {
            "name": objects.get(flavor_name(model), flavor_name(model)),
            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}],
        }
        for model in flavors
    ]
    cpu = {
        "name": CPU_FLAVOR,
        "resources": [{"name": "cpu", "nominalQuota": 1000}, {"name": "memory", "nominalQuota": "4Ti"}],
    }
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": QUEUE_NAME, "labels": APP_LABEL},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": acceptance.namespace}},
                "resourceGroups": [
                    {"coveredResources": ["cpu", "memory"], "flavors": [cpu]},
                    {"coveredResources": ["nvidia.com/gpu"], "flavors": quotas},
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE_NAME, "namespace": acceptance.namespace, "labels": APP_LABEL},
            "spec": {"clusterQueue": QUEUE_NAME},
        },
    ]


def cluster_objects(spec: Spec) -> list[dict[str, Any]]:
    """What the step applies before any test: the namespace, the queue where Kueue is on, the MPI runtime."""
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": spec.acceptance.namespace, "labels": APP_LABEL},
    }
    runtime = [training_runtime(spec.acceptance, spec.nodes)] if multi_node_runs(spec) else []
    queue = kueue_objects(spec.kueue, spec.nodes, spec.acceptance, flavor_objects(resource_flavors(spec)))
    return [namespace, *queue, *runtime]


def multi_node_runs(spec: Spec) -> bool:
    return (
        spec.acceptance.multi_node
        and spec.kubeflow.enabled
        and any(len(g.nodes) > 1 for g in node_groups(spec.nodes, spec.kueue, spec.acceptance.nodes))
    )


# ---- records: what a node's result vouches for ------------------------------------------------------------------

RECORD_FIELDS = ("machine", "model", "driver", "operator", "toolkit", "level", "retest")


def record_text(record: NodeRecord, retest: str) -> str:
    values = (
        record.machine_id,
        record.gpu_model,
        record.driver_version,
        record.gpu_operator_version,
        record.toolkit_version,
        record.level,
        retest,
    )
    return ";".join(f"{key}={value}" for key, value in zip(RECORD_FIELDS, values, strict=True))


def parse_record(node: str, text: str) -> tuple[NodeRecord, str] | None:
    fields = dict(item.split("=", 1) for item in text.split(";") if "=" in item)
    if set(fields) != set(RECORD_FIELDS) or fields["level"] not in LEVEL_ORDER:
        return None
    level: AcceptanceLevel = fields["level"]  # type: ignore[assignment]
    record = NodeRecord(
        node, fields["machine"], fields["model"], fields["driver"], fields["operator"], fields["toolkit"], level
    )
    return record, fields["retest"]


def machine_id(node: NodeSpec) -> str:
    """The pinned host key's SHA256 fingerprint (a reinstalled or swapped server has a new one), else its address."""
    if node.host_key:
        key = node.host_key.split()[-1] if len(node.host_key.split()) > 1 else node.host_key
        try:
            digest = hashlib.sha256(base64.b64decode(key, validate=True)).digest()
        except ValueError:
            return f"host:{node.host}"
        return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")
    return f"host:{node.host}"


def driver_of(gpu_operator: GpuOperatorSpec, node: NodeSpec, host_driver: str | None) -> str:
    """The host driver version the preflight read where the host provides it, else what the operator installs."""
    if host_driver:
        return host_driver
    return gpu_operator.driver_version or f"operator-default-{gpu_operator.version}"


def toolkit_of(gpu_operator: GpuOperatorSpec) -> str:
    toolkit = gpu_operator.toolkit
    return "auto" if toolkit is None else ("on" if toolkit else "off")


@dataclass(frozen=True)
class Plan:
    """The step's node table and why each node is tested."""

    lines: tuple[str, ...]
    due: dict[str, tuple[str, ...]]
    records: dict[str, str]
    level: AcceptanceLevel
    """The level this run tests at: the stack's where a node is due, else the last run's, so that lowering the
    level (which tests nothing) leaves the step's input as it was."""
    recorded_drivers: dict[str, str] = field(default_factory=dict)
    """The driver each node's last record was tested on (the `acceptance` output's nodes[].driver)."""


DRIVER_AS_TESTED = "as-tested"
"""The driver field of a record planned before any node's driver is known (no node has a record yet, so the plan
waits for no GPU preflight): the record names the driver by reference and the `acceptance` output keeps the version
it was tested on (nodes[].driver), which the next plan compares. The step's input is then known at a first
preview."""


def needs_drivers(
    nodes: tuple[NodeSpec, ...], acceptance: AcceptanceSettings, previous: Mapping[str, Any] | None
) -> bool:
    """Whether the plan depends on the nodes' drivers: only to compare a recorded node's driver with its current one
    (a never-tested node is due whatever its driver)."""
    previous_nodes = (previous or {}).get("nodes") or {}
    return any(node.name in previous_nodes for node in tested_nodes(nodes, acceptance.nodes))


def plan_tests(spec: Spec, previous: Mapping[str, Any] | None, host_drivers: Mapping[str, str | None] | None) -> Plan:
    """Each tested node's line `<node> <gpus> <wave> <job> <record>`: the new record where the node is due (with every
    reason), the previous one where it is not, so that an `up` with nothing to test leaves the step's input alone.
    host_drivers None: not known yet (needs_drivers is false: no recorded node to compare)."""
    settings = spec.acceptance
    previous_nodes = (previous or {}).get("nodes") or {}
    recorded: dict[str, NodeRecord] = {}
    recorded_retest: dict[str, str] = {}
    recorded_text: dict[str, str] = {}
    recorded_drivers: dict[str, str] = {}
    for name, entry in previous_nodes.items():
        parsed = parse_record(name, str((entry or {}).get("record", "")))
        if parsed is not None:
            record, recorded_retest[name] = parsed
            if record.driver_version == DRIVER_AS_TESTED:
                record = replace(record, driver_version=str(entry.get("driver") or DRIVER_AS_TESTED))
            recorded[name] = record
            recorded_drivers[name] = record.driver_version
            recorded_text[name] = str(entry["record"])
    stack = StackNow(spec.gpu_operator.version, toolkit_of(spec.gpu_operator), settings.level)
    nodes = tested_nodes(spec.nodes, settings.nodes)

    def driver_now(node: NodeSpec) -> str:
        recorded_driver = recorded_drivers.get(node.name)
        if host_drivers is None:
            # Not known yet, and not needed: no node has a record to compare it with.
            return recorded_driver or DRIVER_AS_TESTED
        if recorded_driver == DRIVER_AS_TESTED:
            return recorded_driver  # a record whose driver went unkept: no driver change is claimed
        return driver_of(spec.gpu_operator, node, host_drivers.get(node.name))

    now = [
        NodeNow(node.name, machine_id(node), node.gpu.model, driver_now(node)) for node in nodes if node.gpu is not None
    ]
    due = {name: list(reasons) for name, reasons in nodes_to_retest(recorded, now, stack).items()}
    for node in nodes:
        entry = previous_nodes.get(node.name) or {}
        if entry.get("result") == "fail" and node.name not in due and recorded_retest.get(node.name) != settings.retest:
            due[node.name] = [
                f"retest asked: acceptance.retest {recorded_retest.get(node.name)!r} → {settings.retest!r}"
            ]
    # Waves over every tested node, not only the due ones: a node's line must not change when it stops being due
    # (that would run the step again on the next `up`); the step skips the nodes already tested in each wave.
    waves = plan_waves(sorted(node.name for node in nodes), spec.acceptance.acceptance_spec())
    wave_of = {name: index for index, wave in enumerate(waves.waves, start=1) for name in wave.nodes}
    lines, records = [], {}
    for node, current in zip((n for n in nodes if n.gpu is not None), now, strict=True):
        assert node.gpu is not None
        if node.name in due:
            new = NodeRecord(
                node.name,
                current.machine_id,
                current.gpu_model,
                # Planned before any preflight read it (a first test): the record names it by reference.
                current.driver_version if host_drivers is not None else DRIVER_AS_TESTED,
                stack.gpu_operator_version,
                stack.toolkit_version,
                settings.level,
            )
            text = record_text(new, settings.retest)
        else:
            text = recorded_text[node.name]
        records[node.name] = text
        lines.append(f"{node.name} {node.gpu.count} {wave_of[node.name]} {job_name(node.name)} {text}")
    last_level = (previous or {}).get("level")
    level: AcceptanceLevel = settings.level
    if not due and last_level in LEVEL_ORDER:
        level = last_level
    due_reasons = {name: tuple(reasons) for name, reasons in due.items()}
    return Plan(tuple(lines), due_reasons, records, level, recorded_drivers)


def wave_timeout_seconds(spec: Spec) -> int:
    """The stack's `acceptance.waveTimeoutMinutes`, else the wave plan's timeout for the level."""
    if spec.acceptance.wave_timeout_minutes is not None:
        return spec.acceptance.wave_timeout_minutes * 60
    return plan_waves(["one"], spec.acceptance.acceptance_spec()).wave_timeout_seconds


def step_input(spec: Spec, plan: Plan) -> str:
    """The step's stdin: sections `=== <name>`, each a file the step reads."""
    spec = with_level(spec, plan.level)
    timeout = wave_timeout_seconds(spec)
    sections = [
        ("objects.yaml", dump_all(cluster_objects(spec))),
        (
            "job-multi-gpu.yaml",
            dump_all([job_template(spec.nodes, spec.acceptance, spec.kueue, timeout, multi_gpu=True)]),
        ),
        (
            "job-one-gpu.yaml",
            dump_all([job_template(spec.nodes, spec.acceptance, spec.kueue, timeout, multi_gpu=False)]),
        ),
        ("nodes", "".join(line + "\n" for line in plan.lines)),
    ]
    groups = (
        [g for g in node_groups(spec.nodes, spec.kueue, spec.acceptance.nodes) if len(g.nodes) > 1]
        if multi_node_runs(spec)
        else []
    )
    index = []
    for group in groups:
        record = hashlib.sha256("\n".join(plan.records[n] for n in group.nodes).encode()).hexdigest()[:16]
        index.append(f"{group.name} {record} {','.join(group.nodes)}\n")
        sections.append(
            (
                f"group-{group.name}.yaml",
                dump_all([train_job(spec.acceptance, spec.kueue, spec.network, group, timeout)]),
            )
        )
    sections.append(("groups", "".join(index)))
    return "".join(
        f"=== {name}\n{text if text.endswith(chr(10)) or not text else text + chr(10)}" for name, text in sections
    )


# ---- what the step printed ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepResult:
    evidence: tuple[NodeEvidence, ...]
    records: dict[str, str]
    groups: dict[str, str | None]
    """Each group's launcher output (None: it never printed one)."""
    group_status: dict[str, str]


def _unpack(value: str) -> str | None:
    if value in ("", "-"):
        return None
    try:
        return gzip.decompress(base64.b64decode(value, validate=True)).decode("utf-8", "replace")
    except (ValueError, OSError, EOFError):
        return None


def parse_step_output(spec: Spec, stdout: str | None) -> StepResult:
    """Read the step's `mlcluster-acceptance: node|group …` lines into evidence for `judge` (none: every node
    without output, so each fails as one that printed nothing)."""
    stdout = stdout or ""
    models = {n.name: n.gpu for n in tested_nodes(spec.nodes, spec.acceptance.nodes)}
    evidence, records, groups, group_status = [], {}, {}, {}
    for line in stdout.splitlines():
        if not line.startswith(OUTPUT_PREFIX):
            continue
        kind, *fields = line.removeprefix(OUTPUT_PREFIX).split(" ")
        if kind == "node" and len(fields) == 6 and fields[0] in models:
            node, record, status, seconds, diag, nccl = fields
            gpu = models[node]
            assert gpu is not None
            skipped = "one GPU: no peer GPU to reduce with" if gpu.count == 1 else None
            evidence.append(
                NodeEvidence(
                    node=node,
                    gpu_model=gpu.model,
                    diag_json=_unpack(diag),
                    nccl_output=_unpack(nccl),
                    fabric=loopback_fabric(gpu.model),
                    duration_ms=int(seconds) * 1000 if seconds.isdigit() else 0,
                    nccl_skipped=skipped,
                    stuck=None if status == "done" else _status_reason(status, spec),
                )
            )
            records[node] = record
        elif kind == "group" and len(fields) == 3:
            groups[fields[0]] = _unpack(fields[2])
            group_status[fields[0]] = fields[1]
    return StepResult(tuple(evidence), records, groups, group_status)


def _status_reason(status: str, spec: Spec) -> str:
    if status == "stuck":
        return f"its test did not finish within the wave's {wave_timeout_seconds(spec) // 60} min (timed out)"
    return f"its test ended as {status}"


def with_level(spec: Spec, level: AcceptanceLevel) -> Spec:
    return replace(spec, acceptance=replace(spec.acceptance, level=level))


# ---- the steps, the verdicts and the outputs ----------------------------------------------------------------------

POLL_SECONDS = 10


def acceptance_step(spec: Spec, plan: Plan | None = None, poll_seconds: int = POLL_SECONDS) -> NodeStep:
    """The step at the plan's level (without a plan: how it is wired, which does not depend on the level)."""
    if plan is not None:
        spec = with_level(spec, plan.level)
    return rendered_step(
        "acceptance",
        "GPU acceptance: DCGM diagnostics and NCCL bandwidth on the nodes due, in waves",
        {
            "NAMESPACE": spec.acceptance.namespace,
            "WAVE_TIMEOUT": str(wave_timeout_seconds(spec)),
            "POLL_SECONDS": str(poll_seconds),
            "LEVEL": spec.acceptance.level,
        },
        log_stdout=False,
    )


def quarantine_step(failed: Sequence[str], passed: Sequence[str]) -> NodeStep:
    return rendered_step(
        "acceptance-quarantine",
        "Quarantine taint on exactly the nodes that failed acceptance",
        {
            "TAINT_KEY": QUARANTINE_TAINT.key,
            "TAINT_VALUE": QUARANTINE_TAINT.value,
            "TAINT_EFFECT": QUARANTINE_TAINT.effect,
            "FAILED": " ".join(sorted(failed)),
            "PASSED": " ".join(sorted(passed)),
        },
    )


def previous_failures(spec: Spec, last_run: Mapping[str, Any] | None) -> list[tuple[str, list[str]]]:
    """The nodes of this stack that the last run failed, with its reasons: the next preview warns about each."""
    names = {node.name for node in tested_nodes(spec.nodes, spec.acceptance.nodes)}
    nodes = (last_run or {}).get("nodes") or {}
    return [
        (name, [str(reason) for reason in entry.get("reasons") or []] or ["no reason recorded"])
        for name, entry in sorted(nodes.items())
        if name in names and isinstance(entry, Mapping) and entry.get("result") == "fail"
    ]


@dataclass(frozen=True)
class Outcome:
    summary: dict[str, Any]
    ctrf: dict[str, Any]
    failed: tuple[str, ...]
    passed: tuple[str, ...]


def report(
    spec: Spec,
    result: StepResult,
    plan: Plan,
    now_ms: int | None = None,
    host_drivers: Mapping[str, str | None] | None = None,
) -> Outcome:
    """The verdicts of every node (the fleet's medians over all of them) and group, as the `acceptance` stack
    output, the CTRF report and the two lists the quarantine step takes. Each node's `driver`: what it was tested
    on (its GPU preflight's reading, else the operator's), or what its kept record was tested on."""
    acceptance = with_level(spec, plan.level).acceptance.acceptance_spec()
    verdict = judge(result.evidence, acceptance)
    fabric = multi_node_fabric(spec)
    groups = [
        judge_group(group.name, group.nodes, group.gpu_model, fabric, result.groups.get(group.name), acceptance)
        for group in node_groups(spec.nodes, spec.kueue, spec.acceptance.nodes)
        if group.name in result.groups
    ]
    stop = now_ms if now_ms is not None else int(time.time() * 1000)
    longest = max((node.duration_ms for node in verdict.nodes), default=0)
    ctrf = ctrf_report(verdict, stop - longest, stop)
    for group in groups:
        ctrf["results"]["tests"].append(
            {
                "name": f"acceptance all-reduce {group.group}",
                "status": "passed" if group.passed else "failed",
                "duration": 0,
                "message": "; ".join(group.reasons)
                or f"all_reduce_perf across {len(group.nodes)} nodes at {group.busbw_gbps:g} GB/s",
                "extra": group.as_dict(),
            }
        )
    summary_counts = ctrf["results"]["summary"]
    summary_counts["tests"] = len(ctrf["results"]["tests"])
    summary_counts["passed"] = sum(test["status"] == "passed" for test in ctrf["results"]["tests"])
    summary_counts["failed"] = summary_counts["tests"] - summary_counts["passed"]
    by_name = {node.name: node for node in spec.nodes}

    def tested_on(name: str) -> str:
        if name in plan.due and name in by_name:
            return driver_of(spec.gpu_operator, by_name[name], (host_drivers or {}).get(name))
        return plan.recorded_drivers.get(name, "")

    nodes = {
        node.node: {**node.as_dict(), "record": result.records.get(node.node, ""), "driver": tested_on(node.node)}
        for node in verdict.nodes
    }
    summary = {
        "level": plan.level,
        "dcgmRunLevel": verdict.diag_level,
        "retest": spec.acceptance.retest,
        "taint": str(QUARANTINE_TAINT),
        "tested": sorted(plan.due),
        "nodes": nodes,
        "gpuModels": [group.as_dict() for group in verdict.groups],
        "multiNode": [group.as_dict() for group in groups],
        "quarantined": sorted(verdict.nodes_to_taint()),
    }
    failed = tuple(sorted(verdict.nodes_to_taint()))
    passed = tuple(sorted(node.node for node in verdict.nodes if node.passed))
    return Outcome(summary, ctrf, failed, passed)


def summary_config_map(outcome: Outcome) -> dict[str, str]:
    """The ConfigMap dashboards read: one key per node (`pass`/`fail`), the counts, and the whole summary."""
    nodes = outcome.summary["nodes"]
    data = {f"node.{name}": entry["result"] for name, entry in nodes.items()}
    data["passed"] = str(len(outcome.passed))
    data["failed"] = str(len(outcome.failed))
    data["summary.json"] = json.dumps(outcome.summary, sort_keys=True)
    return data
