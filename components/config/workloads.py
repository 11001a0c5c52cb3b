"""The seeds' workloads, declared in stack config: the YOLO batch-inference Job and a checkpointed training run.

Both are off by default (an `up` should not start GPU jobs nobody asked for); the example stacks turn them on.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import checks, formats
from .schema import setting

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
