"""The seeds' workloads, declared in stack config: the YOLO batch-inference Job and a checkpointed training run.

Both are off by default (an `up` should not start GPU jobs nobody asked for); the example stacks turn them on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import checks, formats
from .schema import Problems, join_path, setting
from .training import TRAINER_MIN_KUBERNETES

if TYPE_CHECKING:
    from .spec import Spec

YOLO_JOB_NAME = "yolo26-predict"

TRAINING_IMAGE = "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime"
"""The image of the Trainer's own torch-distributed runtime (kubeflow/trainer manifests/base/runtimes)."""

# Trains a small model with DataLoader worker processes (which share batches through /dev/shm) and
# writes a checkpoint per epoch, resuming from the last one: a restarted pod continues, not restarts.
TRAINING_COMMAND = (
    "python",
    "-c",
    "import os, torch\n"
    "from torch.utils.data import DataLoader, TensorDataset\n"
    "ckpt = os.path.join(os.environ['CHECKPOINT_DIR'], 'last.pt')\n"
    "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
    "model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)).to(device)\n"
    "opt = torch.optim.AdamW(model.parameters())\n"
    "start = 0\n"
    "if os.path.exists(ckpt):\n"
    "    state = torch.load(ckpt, map_location=device)\n"
    "    model.load_state_dict(state['model']); opt.load_state_dict(state['opt']); start = state['epoch'] + 1\n"
    "x = torch.randn(65536, 64, generator=torch.Generator().manual_seed(0))\n"
    "data = TensorDataset(x, x[:, :8].sum(dim=1, keepdim=True))\n"
    "loader = DataLoader(data, batch_size=512, shuffle=True, num_workers=4)\n"
    "for epoch in range(start, 5):\n"
    "    for xb, yb in loader:\n"
    "        opt.zero_grad(); loss = torch.nn.functional.mse_loss(model(xb.to(device)), yb.to(device))\n"
    "        loss.backward(); opt.step()\n"
    "    torch.save({'model': model.state_dict(), 'opt': opt.state_dict(), 'epoch': epoch}, ckpt)\n"
    "    print(f'epoch {epoch} loss {loss.item():.4f} checkpoint {ckpt}', flush=True)\n",
)


@dataclass(frozen=True)
class TrainingWorkloadSpec:
    enabled: bool = setting(False, doc="Run the training workload (a batch Job; TrainJob/PyTorchJob below).")
    name: str = setting("pytorch-train", doc="Name of the Job, TrainJob and PyTorchJob.", check=checks.k8s_name)
    image: str = setting(TRAINING_IMAGE, doc="Training image.", check=formats.image_reference)
    command: tuple[str, ...] = setting(
        (), doc="Training command (default: a small PyTorch run that checkpoints each epoch and resumes)."
    )
    gpus: int = setting(1, doc="GPUs per training pod (nvidia.com/gpu limit).", check=checks.between(1, 16))
    num_nodes: int = setting(
        1, doc="Training nodes of the TrainJob and PyTorchJob (the batch Job is one pod).", check=checks.between(1, 256)
    )
    checkpoint_size: str = setting("50Gi", doc="Size of the checkpoint PVC.", check=checks.size)
    checkpoint_path: str = setting(
        "/checkpoints", doc="Where the checkpoint PVC is mounted (CHECKPOINT_DIR).", check=checks.mount_path
    )
    storage_class: str | None = setting(
        None,
        doc="StorageClass of the checkpoint PVCs (default: storage's class, else the cluster default).",
        check=checks.k8s_name,
    )
    shm_size: str = setting(
        "16Gi",
        doc="sizeLimit of the memory-backed /dev/shm (DataLoader workers pass batches through it; counts"
        " against the pod's memory).",
        check=checks.size,
    )
    train_job: bool = setting(True, doc="Also run it as a Kubeflow Trainer TrainJob (needs kubeflow.enabled).")
    pytorch_job: bool = setting(
        True, doc="Also run it as a legacy PyTorchJob (only when kubeflow.legacyTrainingOperator is on)."
    )

    @property
    def container_command(self) -> list[str]:
        return list(self.command or TRAINING_COMMAND)


@dataclass(frozen=True)
class WorkloadsSpec:
    namespace: str = setting("ml-workloads", doc="Namespace the workloads run in.", check=checks.k8s_name)
    create_namespace: bool = setting(
        True, doc="Create the namespace (false when another layer, e.g. a Kueue team, already creates it)."
    )
    queue_name: str = setting(
        "default",
        doc="Kueue LocalQueue (in the namespace) the workloads are submitted to; the label"
        " kueue.x-k8s.io/queue-name is set only when Kueue is enabled.",
        check=checks.k8s_name,
    )
    yolo_predict: bool = setting(False, doc="Run the seed's YOLO batch-inference Job `yolo26-predict`.")
    training: TrainingWorkloadSpec = setting(
        default_factory=TrainingWorkloadSpec, doc="A GPU training run with checkpoints on a PVC."
    )
    notebook: bool = setting(False, doc="Create a sample Jupyter Notebook (needs kubeflow.notebooks).")

    @property
    def any_enabled(self) -> bool:
        return self.yolo_predict or self.training.enabled or self.notebook


def validate_training(spec: Spec, problems: Problems) -> None:
    """Rules across the kubeflow, storage and workloads sections."""
    kubeflow, workloads = spec.kubeflow, spec.workloads
    valid_version = checks.k8s_version(spec.kubernetes_version) is None
    if (
        kubeflow.enabled
        and valid_version
        and checks.version_tuple(spec.kubernetes_version)[:2] < TRAINER_MIN_KUBERNETES
    ):
        problems.error(
            "kubeflow.enabled",
            f"Kubeflow Trainer {kubeflow.version} needs Kubernetes >= 1.31; kubernetesVersion is"
            f" {spec.kubernetes_version} (upgrade, or set kubeflow.enabled: false)",
        )
    if workloads.notebook and not kubeflow.notebooks:
        problems.error("workloads.notebook", "needs kubeflow.notebooks: true (the Notebook controller)")
    gpu_nodes = [node for node in spec.nodes if node.gpu is not None]
    if spec.cluster.mode == "kubeadm" and spec.nodes and not gpu_nodes:
        # A managed cluster's GPU pools are not in the stack; a kubeadm stack lists every node.
        for key, wanted in (("yoloPredict", workloads.yolo_predict), ("training.enabled", workloads.training.enabled)):
            if wanted:
                problems.error(
                    f"workloads.{key}",
                    "asks for nvidia.com/gpu but no node in nodes has a gpu section: it would never start",
                )
    if spec.kueue.enabled and workloads.any_enabled:
        _validate_team_queue(spec, problems)
    training = workloads.training
    if training.enabled:
        _validate_training_workload(spec, training, problems)


def _validate_team_queue(spec: Spec, problems: Problems) -> None:
    """The queue label must name a LocalQueue the Kueue layer creates, or the jobs wait forever."""
    workloads = spec.workloads
    queues = {(team.queue_namespace, team.name) for team in spec.kueue.teams}
    if not queues:
        # Kueue labels the jobs with the queue, and Kueue holds a job whose LocalQueue does not exist forever.
        problems.error(
            "workloads.queueName",
            f'"{workloads.queue_name}" names a LocalQueue, but kueue.teams is empty, so the stack creates none and'
            " the jobs would never be admitted: add a team (its LocalQueue is named after it, in its namespace;"
            f" e.g. name: {workloads.queue_name}, namespace: {workloads.namespace}, with a quota) or set"
            " kueue.enabled: false",
        )
    elif (workloads.namespace, workloads.queue_name) not in queues:
        known = ", ".join(f"{name} in {namespace}" for namespace, name in sorted(queues))
        problems.error(
            "workloads.queueName",
            f'"{workloads.queue_name}" is not a Kueue team\'s LocalQueue in namespace "{workloads.namespace}"'
            f" (the teams' queues: {known}); the jobs would never be admitted",
        )
    if workloads.create_namespace and workloads.namespace in {namespace for namespace, _ in queues}:
        problems.error(
            "workloads.createNamespace",
            f'must be false: namespace "{workloads.namespace}" is a Kueue team\'s, created by the Kueue layer',
        )


def _validate_training_workload(spec: Spec, training: TrainingWorkloadSpec, problems: Problems) -> None:
    path = "workloads.training"
    storage = spec.storage
    if spec.workloads.yolo_predict and training.name == YOLO_JOB_NAME:
        problems.error(join_path(path, "name"), f'"{training.name}" is the YOLO Job\'s name: pick another')
    if training.train_job and not spec.kubeflow.enabled:
        problems.error(join_path(path, "trainJob"), "needs kubeflow.enabled: true (Kubeflow Trainer)")
    if training.storage_class is None and not storage.enabled and spec.cluster.mode == "kubeadm":
        problems.error(
            join_path(path, "storageClass"),
            "is required when storage.enabled is false: a kubeadm cluster has no default StorageClass,"
            " so the checkpoint PVC would never bind",
        )
    node_local = training.storage_class is None and storage.enabled and storage.provisioner == "local-path"
    if node_local and training.num_nodes > 1:
        problems.error(
            join_path(path, "numNodes"),
            f"({training.num_nodes}) needs a checkpoint volume every node can mount: local-path volumes live on"
            " one node; use storage.provisioner: nfs or a ReadWriteMany storageClass",
        )
