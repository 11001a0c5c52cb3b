"""The seeds' workloads as manifests (plain dicts): the YOLO batch-inference Job and a checkpointed training run.

Every workload tolerates the GPU taint our GPU nodes carry and, when Kueue is on, names its LocalQueue with
the label `kueue.x-k8s.io/queue-name` (Kueue then suspends it until the queue admits it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import checks
from ..config.derived import GPU_TAINT
from ..config.kueue import KueueSpec
from ..config.network import NetworkSpec
from ..config.spec import Spec
from ..config.storage import StorageSpec
from ..config.workloads import YOLO_JOB_NAME, TrainingWorkloadSpec, WorkloadsSpec
from . import manifests
from .kueue import QUEUE_NAME_LABEL, training_topology_annotations
from .network import rdma_container_patch, rdma_limits

Manifest = dict[str, Any]

GPU_RESOURCE = "nvidia.com/gpu"
SKIP_AWAIT = "pulumi.com/skipAwait"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
TRAINER_RUNTIME = "torch-distributed"
"""The default ClusterTrainingRuntime for PyTorch: replicated job `node`, container `node`."""
RUNTIME_PATCH_MANAGER = "mlcluster.io/workloads"
NOTEBOOK_IMAGE = "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-cuda-full:v1.10.0"


def queue_labels(kueue: KueueSpec, workloads: WorkloadsSpec) -> dict[str, str]:
    return {QUEUE_NAME_LABEL: workloads.queue_name} if kueue.enabled else {}


def pod_images(manifest: Mapping[str, Any]) -> list[str]:
    """The images a Job's pod pulls (init containers first, as the kubelet pulls them)."""
    pod = manifest.get("spec", {}).get("template", {}).get("spec", {})
    return [c["image"] for key in ("initContainers", "containers") for c in pod.get(key, [])]


def gpu_tolerations() -> list[dict[str, str]]:
    return [checks.toleration_of(GPU_TAINT)]


def _metadata(
    workloads: WorkloadsSpec,
    kueue: KueueSpec,
    name: str,
    *,
    queued: bool = True,
    annotations: dict[str, str] | None = None,
) -> Manifest:
    metadata: Manifest = {"name": name, "namespace": workloads.namespace}
    labels = queue_labels(kueue, workloads) if queued else {}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return metadata


def workloads_namespace(workloads: WorkloadsSpec) -> Manifest:
    return manifests.namespace(workloads.namespace)


def yolo_predict_job(workloads: WorkloadsSpec, kueue: KueueSpec) -> Manifest:
    """The second seed's Job, field for field, plus the namespace, the queue label and the GPU toleration."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(workloads, kueue, YOLO_JOB_NAME),
        "spec": {
            "backoffLimit": 2,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": gpu_tolerations(),
                    "containers": [
                        {
                            "name": "yolo",
                            "image": "ultralytics/ultralytics:latest",
                            "command": [
                                "yolo",
                                "predict",
                                "model=yolo26n.pt",
                                "source=https://ultralytics.com/images/bus.jpg",
                            ],
                            "resources": {"limits": {GPU_RESOURCE: 1}},
                        }
                    ],
                }
            },
        },
    }


# --- training -------------------------------------------------------------------------------------------

CHECKPOINTS_VOLUME = "checkpoints"
SHM_VOLUME = "dshm"


def checkpoint_claim_name(training: TrainingWorkloadSpec, kind: str) -> str:
    suffix = {"Job": "", "TrainJob": "-trainjob", "PyTorchJob": "-pytorchjob"}[kind]
    return f"{training.name}{suffix}-checkpoints"


def checkpoint_claim(workloads: WorkloadsSpec, storage: StorageSpec, kind: str) -> Manifest:
    """One claim per workload kind, so each run resumes from its own checkpoints."""
    training = workloads.training
    storage_class = training.storage_class or (storage.storage_class if storage.enabled else None)
    shared = storage.enabled and storage.provisioner == "nfs" and training.storage_class is None
    claim_spec: Manifest = {
        # NFS subdirectories can be mounted from every node; local-path volumes only on the node that has them.
        "accessModes": ["ReadWriteMany" if shared else "ReadWriteOnce"],
        "resources": {"requests": {"storage": training.checkpoint_size}},
    }
    if storage_class:
        claim_spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": checkpoint_claim_name(training, kind), "namespace": workloads.namespace},
        "spec": claim_spec,
    }


def _training_volumes(workloads: WorkloadsSpec, kind: str) -> list[Manifest]:
    training = workloads.training
    return [
        {"name": CHECKPOINTS_VOLUME, "persistentVolumeClaim": {"claimName": checkpoint_claim_name(training, kind)}},
        # Docker's 64 MiB /dev/shm default breaks DataLoader workers; memory-backed and capped instead.
        {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": training.shm_size}},
    ]


def _training_mounts(workloads: WorkloadsSpec) -> list[Manifest]:
    return [
        {"name": CHECKPOINTS_VOLUME, "mountPath": workloads.training.checkpoint_path},
        {"name": SHM_VOLUME, "mountPath": "/dev/shm"},
    ]


def _checkpoint_env(workloads: WorkloadsSpec) -> list[Manifest]:
    return [{"name": "CHECKPOINT_DIR", "value": workloads.training.checkpoint_path}]


def _gpu_limits(training: TrainingWorkloadSpec) -> Manifest:
    return {"limits": {GPU_RESOURCE: training.gpus}}


def _multi_node(network: NetworkSpec, workloads: WorkloadsSpec, container: Manifest) -> Manifest:
    """A container of a run over several nodes: with network.rdma, its RDMA device and what RDMA needs."""
    limits = rdma_limits(network, workloads)
    if "resources" in container and limits:
        container["resources"] = {"limits": {**container["resources"]["limits"], **limits}}
    return {**container, **rdma_container_patch(network, workloads)}


def _training_pod(workloads: WorkloadsSpec, kind: str, container_name: str) -> Manifest:
    """The pod of a Job or PyTorchJob replica: the training container, its volumes, the GPU toleration."""
    training = workloads.training
    container = {
        "name": container_name,
        "image": training.image,
        "command": training.container_command,
        "env": _checkpoint_env(workloads),
        "resources": _gpu_limits(training),
        "volumeMounts": _training_mounts(workloads),
    }
    return {
        "restartPolicy": "OnFailure",
        "tolerations": gpu_tolerations(),
        "containers": [container],
        "volumes": _training_volumes(workloads, kind),
    }


def _training_template(kueue: KueueSpec, pod: Manifest) -> Manifest:
    """A training pod template: Kueue reads a pod set's topology request from its template's annotations."""
    template: Manifest = {"spec": pod}
    annotations = training_topology_annotations(kueue)
    if annotations:
        template = {"metadata": {"annotations": annotations}, **template}
    return template


def training_job(spec: Spec) -> Manifest:
    """A plain batch/v1 Job: one pod, resumable from its checkpoint claim (restarts continue, not restart)."""
    training = spec.workloads.training
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        # Training runs for hours: `up` must not wait for it to finish.
        "metadata": _metadata(spec.workloads, spec.kueue, training.name, annotations={SKIP_AWAIT: "true"}),
        "spec": {
            "backoffLimit": 3,
            "template": _training_template(spec.kueue, _training_pod(spec.workloads, "Job", "train")),
        },
    }


def train_job(spec: Spec) -> Manifest:
    """The same run as a Kubeflow Trainer TrainJob on the default torch-distributed runtime."""
    training = spec.workloads.training
    pod_spec = {
        "tolerations": gpu_tolerations(),
        "volumes": _training_volumes(spec.workloads, "TrainJob"),
        "containers": [
            _multi_node(
                spec.network,
                spec.workloads,
                {
                    "name": "node",
                    "env": _checkpoint_env(spec.workloads),
                    "volumeMounts": _training_mounts(spec.workloads),
                },
            )
        ],
    }
    node_pod = _training_template(spec.kueue, pod_spec)
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": _metadata(spec.workloads, spec.kueue, training.name, annotations={SKIP_AWAIT: "true"}),
        "spec": {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
                "name": TRAINER_RUNTIME,
            },
            "trainer": {
                "image": training.image,
                "command": training.container_command,
                "numNodes": training.num_nodes,
                "resourcesPerNode": {
                    "limits": {**_gpu_limits(training)["limits"], **rdma_limits(spec.network, spec.workloads)}
                },
            },
            "runtimePatches": [
                {
                    "manager": RUNTIME_PATCH_MANAGER,
                    "trainingRuntimeSpec": {
                        "template": {
                            "spec": {
                                # The Trainer 2.3 CRD patches a replicated job's pod template metadata
                                # (labels and annotations only): Kueue builds the JobSet with this patch.
                                "replicatedJobs": [{"name": "node", "template": {"spec": {"template": node_pod}}}]
                            }
                        }
                    },
                }
            ],
        },
    }


def pytorch_job(spec: Spec) -> Manifest:
    """The same run on the legacy Training Operator (kubeflow.org/v1): one Master, numNodes - 1 Workers."""
    training = spec.workloads.training

    def replica(replicas: int) -> Manifest:
        # The operator finds the training container by the name `pytorch`; restartPolicy sits on the replica.
        pod = _training_pod(spec.workloads, "PyTorchJob", "pytorch")
        pod["containers"] = [_multi_node(spec.network, spec.workloads, c) for c in pod["containers"]]
        restart_policy = pod.pop("restartPolicy")
        return {"replicas": replicas, "restartPolicy": restart_policy, "template": _training_template(spec.kueue, pod)}

    replica_specs = {"Master": replica(1)}
    if training.num_nodes > 1:
        replica_specs["Worker"] = replica(training.num_nodes - 1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": _metadata(spec.workloads, spec.kueue, training.name, annotations={SKIP_AWAIT: "true"}),
        "spec": {"pytorchReplicaSpecs": replica_specs},
    }


def notebook(workloads: WorkloadsSpec, kueue: KueueSpec) -> Manifest:
    """A sample Jupyter server (Kubeflow Notebook controller): one GPU, the GPU toleration, not queued."""
    name = "ml-notebook"
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": _metadata(workloads, kueue, name, queued=False),
        "spec": {
            "template": {
                "spec": {
                    "tolerations": gpu_tolerations(),
                    # The controller finds the server container by the Notebook's name.
                    "containers": [{"name": name, "image": NOTEBOOK_IMAGE, "resources": {"limits": {GPU_RESOURCE: 1}}}],
                }
            }
        },
    }


def workload_manifests(spec: Spec) -> list[Manifest]:
    """Every workload object the stack asks for, claims before the jobs that mount them."""
    workloads, kubeflow = spec.workloads, spec.kubeflow
    out: list[Manifest] = []
    if workloads.yolo_predict:
        out.append(yolo_predict_job(spec.workloads, spec.kueue))
    training = workloads.training
    if training.enabled:
        kinds = [("Job", training_job)]
        if training.train_job and kubeflow.enabled:
            kinds.append(("TrainJob", train_job))
        if training.pytorch_job and kubeflow.legacy_training_operator:
            kinds.append(("PyTorchJob", pytorch_job))
        for kind, render in kinds:
            out += [checkpoint_claim(spec.workloads, spec.storage, kind), render(spec)]
    if workloads.notebook and kubeflow.notebooks:
        out.append(notebook(spec.workloads, spec.kueue))
    return out


def claims_used(manifest: Any) -> set[str]:
    """Names of the PersistentVolumeClaims a workload mounts, wherever its pod templates sit."""
    if isinstance(manifest, list):
        return set().union(*(claims_used(item) for item in manifest))
    if not isinstance(manifest, dict):
        return set()
    found = {str(manifest["persistentVolumeClaim"]["claimName"])} if "persistentVolumeClaim" in manifest else set()
    return found.union(*(claims_used(value) for value in manifest.values()))
