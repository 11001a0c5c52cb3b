"""Training layer: Trainer release values, storage, the seeds' workloads as validated manifests, and wiring."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from components.config.spec import Spec
from components.render.kueue import QUEUE_NAME_LABEL
from components.render.storage import storage_release
from components.render.training import kubeflow_trainer_release
from components.render.workloads import (
    pytorch_job,
    train_job,
    training_job,
    workload_manifests,
    yolo_predict_job,
)

from .conftest import STACKS, known, stack_values
from .test_config_validation import base, errors_of, mutate, parse
from .upstream import UPSTREAM, chart_values, crd_errors, kubernetes_errors, unknown_value_keys

# The second seed's Job, as given: the rendered Job must contain exactly this, plus only the documented additions.
# (The seed names no container; `yolo`, as in the Kueue guide.)
SEED_YOLO_JOB = yaml.safe_load(
    """
apiVersion: batch/v1
kind: Job
metadata:
  name: yolo26-predict
spec:
  backoffLimit: 2
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: yolo
          image: ultralytics/ultralytics:latest
          command: ["yolo", "predict", "model=yolo26n.pt", "source=https://ultralytics.com/images/bus.jpg"]
          resources:
            limits:
              nvidia.com/gpu: 1
"""
)
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}

CRDS = {
    "TrainJob": "kubeflow-trainer/v2.3.0/trainer.kubeflow.org_trainjobs.yaml",
    "PyTorchJob": "kubeflow-training-operator/v1.9.4/kubeflow.org_pytorchjobs.yaml",
    "Notebook": "kubeflow-notebooks/v1.11.0/kubeflow.org_notebooks.yaml",
}
CORE_KINDS = {"Job", "PersistentVolumeClaim", "Namespace"}


def stack_spec(stack: str, change: Callable[[dict[str, Any]], None] | None = None) -> Spec:
    values, secret = stack_values(stack)
    values = copy.deepcopy(values)
    if change:
        change(values)
    return parse(values, tuple(secret))


def onprem(change: Callable[[dict[str, Any]], None] | None = None) -> Spec:
    return stack_spec("onprem", change)


def everything_on(values: dict[str, Any]) -> None:
    values["kubeflow"].update(legacyTrainingOperator=True, pipelines=True, notebooks=True)
    values["workloads"]["notebook"] = True


def nfs_two_nodes(values: dict[str, Any]) -> None:
    everything_on(values)
    values["storage"] = {"provisioner": "nfs", "nfsServer": "198.18.0.5", "nfsPath": "/exports/ml"}
    values["workloads"]["training"]["numNodes"] = 2


def kueue_off(values: dict[str, Any]) -> None:
    values["kueue"]["enabled"] = False
    values["workloads"]["createNamespace"] = True


VARIANTS: dict[str, Callable[[], Spec]] = {
    "onprem": onprem,
    "onprem, all kubeflow parts": lambda: onprem(everything_on),
    "onprem, nfs, 2 nodes": lambda: onprem(nfs_two_nodes),
    "onprem, no kueue": lambda: onprem(kueue_off),
    "cloud": lambda: stack_spec("cloud"),
}


# --- the seed's YOLO Job ------------------------------------------------------------------------------


def _without_additions(job: dict[str, Any]) -> dict[str, Any]:
    """The rendered Job minus what we add on purpose: namespace, queue label, GPU toleration."""
    stripped = copy.deepcopy(job)
    stripped["metadata"].pop("namespace")
    stripped["metadata"].pop("labels", None)
    stripped["spec"]["template"]["spec"].pop("tolerations")
    return stripped


@pytest.mark.parametrize("kueue", [True, False], ids=["kueue on", "kueue off"])
def test_yolo_job_is_the_seed_field_by_field(kueue: bool) -> None:
    spec = onprem(None if kueue else kueue_off)
    job = yolo_predict_job(spec.workloads, spec.kueue)
    assert _without_additions(job) == SEED_YOLO_JOB
    assert job["metadata"]["namespace"] == "vision"
    assert job["spec"]["template"]["spec"]["tolerations"] == [GPU_TOLERATION]
    assert job["metadata"].get("labels") == ({QUEUE_NAME_LABEL: "vision"} if kueue else None)


def test_kueue_guide_submits_the_job_the_stack_renders() -> None:
    from .test_kueue import guide_blocks

    guide_job = next(b for b in guide_blocks() if b.get("kind") == "Job")
    guide_job["metadata"]["labels"].pop("kueue.x-k8s.io/priority-class")
    assert guide_job == yolo_predict_job(onprem().workloads, onprem().kueue)


def test_seed_comparison_notices_a_changed_field() -> None:
    job = yolo_predict_job(onprem().workloads, onprem().kueue)
    job["spec"]["backoffLimit"] = 3
    assert _without_additions(job) != SEED_YOLO_JOB


# --- manifests validate upstream ----------------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_workload_manifest_validates(variant: str) -> None:
    spec = VARIANTS[variant]()
    manifests = workload_manifests(spec)
    kinds = sorted({m["kind"] for m in manifests})
    assert {"Job", "PersistentVolumeClaim"} <= set(kinds)
    for manifest in manifests:
        kind = manifest["kind"]
        where = f"{kind}/{manifest['metadata']['name']}"
        if kind in CORE_KINDS:
            assert kubernetes_errors(manifest, spec.kubernetes_version) == [], where
        else:
            assert crd_errors(manifest, CRDS[kind]) == [], where


def test_all_three_custom_resources_are_rendered_and_checked() -> None:
    kinds = {m["kind"] for m in workload_manifests(onprem(everything_on))}
    assert set(CRDS) <= kinds


def test_validators_can_fail() -> None:
    spec = onprem(everything_on)
    job = training_job(spec)
    job["spec"]["template"]["spec"]["restartpolicy"] = "Never"
    assert kubernetes_errors(job, spec.kubernetes_version)
    trainjob = train_job(spec)
    trainjob["spec"]["trainer"]["gpus"] = 1
    assert crd_errors(trainjob, CRDS["TrainJob"])
    assert crd_errors({**trainjob, "apiVersion": "trainer.kubeflow.org/v1"}, CRDS["TrainJob"]) == [
        "<root>: version v1 not served by kubeflow-trainer/v2.3.0/trainer.kubeflow.org_trainjobs.yaml"
        " (has ['v1alpha1'])"
    ]


# --- training: checkpoints, /dev/shm, GPUs, queue ------------------------------------------------------


def _pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    kind = manifest["kind"]
    if kind == "Job":
        return [manifest["spec"]["template"]["spec"]]
    if kind == "PyTorchJob":
        return [r["template"]["spec"] for r in manifest["spec"]["pytorchReplicaSpecs"].values()]
    patch = manifest["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    return [job["template"]["spec"]["template"]["spec"] for job in patch["replicatedJobs"]]


@pytest.mark.parametrize("render", [training_job, train_job, pytorch_job], ids=["Job", "TrainJob", "PyTorchJob"])
def test_training_mounts_checkpoints_and_memory_shm(render: Callable[[Spec], dict[str, Any]]) -> None:
    spec = onprem(nfs_two_nodes)
    manifest = render(spec)
    assert manifest["metadata"]["labels"] == {QUEUE_NAME_LABEL: "vision"}
    claim = f"pytorch-train{'' if manifest['kind'] == 'Job' else '-' + manifest['kind'].lower()}-checkpoints"
    for pod in _pod_specs(manifest):
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
        assert volumes["checkpoints"]["persistentVolumeClaim"] == {"claimName": claim}
        mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
        assert mounts == {"/dev/shm": "dshm", "/checkpoints": "checkpoints"}
        assert pod["tolerations"] == [GPU_TOLERATION]
    gpu_limits = (
        manifest["spec"]["trainer"]["resourcesPerNode"]["limits"]
        if manifest["kind"] == "TrainJob"
        else _pod_specs(manifest)[0]["containers"][0]["resources"]["limits"]
    )
    assert gpu_limits == {"nvidia.com/gpu": 1}


def test_trainjob_uses_a_default_runtime_on_every_node() -> None:
    manifest = train_job(onprem(nfs_two_nodes))
    assert manifest["spec"]["runtimeRef"]["name"] == "torch-distributed"
    assert manifest["spec"]["trainer"]["numNodes"] == 2
    assert kubeflow_trainer_release(onprem()).values["runtimes"] == {"defaultEnabled": True}


def test_pytorchjob_has_a_master_and_the_other_nodes_as_workers() -> None:
    replicas = pytorch_job(onprem(nfs_two_nodes))["spec"]["pytorchReplicaSpecs"]
    assert {name: r["replicas"] for name, r in replicas.items()} == {"Master": 1, "Worker": 1}


@pytest.mark.parametrize(
    ("variant", "access", "storage_class"),
    [
        ("onprem", "ReadWriteOnce", "local-path"),
        ("onprem, nfs, 2 nodes", "ReadWriteMany", "nfs-client"),
        ("cloud", "ReadWriteOnce", None),
    ],
)
def test_checkpoint_claim_fits_the_storage(variant: str, access: str, storage_class: str | None) -> None:
    claims = [m for m in workload_manifests(VARIANTS[variant]()) if m["kind"] == "PersistentVolumeClaim"]
    assert claims
    for claim in claims:
        assert claim["spec"]["accessModes"] == [access]
        assert claim["spec"].get("storageClassName") == storage_class
        assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"


# --- chart values -------------------------------------------------------------------------------------

STORAGE_CASES = {
    "local-path": ({"enabled": True}, "local-path-provisioner", "0.0.37"),
    "nfs": (
        {"provisioner": "nfs", "nfsServer": "198.18.0.5", "nfsPath": "/exports/ml"},
        "nfs-subdir-external-provisioner",
        "4.0.18",
    ),
}


@pytest.mark.parametrize("case", list(STORAGE_CASES))
def test_storage_values_exist_upstream_and_make_a_default_class(case: str) -> None:
    storage, chart, version = STORAGE_CASES[case]
    release = storage_release(parse({**base(), "storage": storage}))
    assert (release.upstream_chart, release.version) == (chart, version)
    assert unknown_value_keys(dict(release.values), chart_values(chart, version)) == []
    assert release.values["storageClass"]["defaultClass"] is True


def test_trainer_chart_installs_jobset_as_its_pinned_dependency() -> None:
    chart = yaml.safe_load((UPSTREAM / "charts" / "kubeflow-trainer" / "2.3.0" / "Chart.yaml").read_text())
    jobset = next(d for d in chart["dependencies"] if d["name"] == "jobset")
    assert (jobset["version"], jobset["condition"]) == ("0.12.0", "jobset.install")
    release = kubeflow_trainer_release(onprem())
    assert release.values["jobset"] == {"install": True}
    assert unknown_value_keys(dict(release.values), chart_values("kubeflow-trainer", "2.3.0")) == []
    assert (UPSTREAM / "charts" / "jobset" / jobset["version"] / "values.yaml").is_file()


# --- validation ---------------------------------------------------------------------------------------

RULES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "trainer needs kubernetes 1.31",
        mutate("kubernetesVersion", "1.30.9"),
        "mlcluster:kubeflow.version: 2.3.0: Kubeflow Trainer 2.3 supports Kubernetes >= 1.31 (kubeflow/trainer"
        " installation.md); the stack asks for 1.30 (kubernetesVersion)",
    ),
    (
        "checkpoint claim needs a class",
        lambda v: v.update(storage={"enabled": False}, workloads={"training": {"enabled": True}}),
        "mlcluster:workloads.training.storageClass: is required when storage.enabled is false",
    ),
    (
        "multi-node training on local-path",
        mutate("workloads", {"training": {"enabled": True, "numNodes": 2}}),
        "mlcluster:workloads.training.numNodes: (2) needs a checkpoint volume every node can mount",
    ),
    (
        "trainjob needs the trainer",
        lambda v: v.update(kubeflow={"enabled": False}, workloads={"training": {"enabled": True}}),
        "mlcluster:workloads.training.trainJob: needs kubeflow.enabled: true",
    ),
    (
        "notebook needs the controller",
        mutate("workloads", {"notebook": True}),
        "mlcluster:workloads.notebook: needs kubeflow.notebooks: true",
    ),
    (
        "nfs needs a path",
        mutate("storage", {"provisioner": "nfs", "nfsServer": "198.18.0.5"}),
        "mlcluster:storage.nfsPath: is required when storage.provisioner is nfs",
    ),
    (
        "pipelines pinned to a tag",
        mutate("kubeflow", {"pipelines": True, "pipelinesVersion": "master"}),
        'mlcluster:kubeflow.pipelinesVersion: "master" is not a pinned release tag',
    ),
    ("shm size", mutate("workloads", {"training": {"shmSize": "lots"}}), "mlcluster:workloads.training.shmSize:"),
    (
        "training name is not the YOLO Job's",
        mutate("workloads", {"yoloPredict": True, "training": {"enabled": True, "name": "yolo26-predict"}}),
        'mlcluster:workloads.training.name: "yolo26-predict" is the YOLO Job\'s name',
    ),
    (
        "GPU jobs need a GPU node",
        lambda v: v.update(nodes=v["nodes"][:2], workloads={"yoloPredict": True}),
        "mlcluster:workloads.yoloPredict: asks for nvidia.com/gpu but no node in nodes has a gpu section",
    ),
]


@pytest.mark.parametrize(("rule", "change", "expected"), RULES, ids=[r[0] for r in RULES])
def test_training_rule(rule: str, change: Callable[[dict[str, Any]], None], expected: str) -> None:
    values = base()
    change(values)
    errors = errors_of(values)
    assert any(expected in e for e in errors), f"{rule}: {expected!r} not in {errors}"


@pytest.mark.parametrize("version", ["1.31.0", "1.34.2"])
def test_trainer_accepts_kubernetes_from_1_31(version: str) -> None:
    # The layers whose own floors are higher are off: this is the Trainer's floor (tests/test_support_calendar.py).
    higher = {layer: {"enabled": False} for layer in ("gpuOperator", "kserve", "monitoring")}
    assert parse({**base(), **higher, "kubernetesVersion": version}).kubeflow.enabled


def test_workloads_are_off_unless_the_stack_asks() -> None:
    assert workload_manifests(parse(base())) == []


# --- wiring on the mock engine -------------------------------------------------------------------------

RELEASE = "kubernetes:helm.sh/v3:Release"


def test_workloads_wait_for_what_they_need(run_stack) -> None:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    everything_on(values)
    run = run_stack(values=values, secret=secret)
    releases = {r.name: r.urn for r in run.of_type(RELEASE)}
    needs = {releases[n] for n in ("local-path-provisioner", "kubeflow-trainer", "kueue", "gpu-operator")}
    directories = {r.name: r for r in run.of_type("kubernetes:kustomize/v2:Directory")}
    # The vision team's namespace and LocalQueue, created by the Kueue layer.
    by_type = {(r.type.rsplit(":", 1)[-1], r.name): r.urn for r in run.resources}
    team = {by_type["Namespace", "vision"], by_type["LocalQueue", "vision-vision"]}
    workloads = [r for r in run.resources if r.parent == run.named("workloads").urn]
    assert {r.type.rsplit(":", 1)[-1] for r in workloads} == {
        "Job",
        "PersistentVolumeClaim",
        "TrainJob",
        "PyTorchJob",
        "Notebook",
    }
    for workload in workloads:
        assert needs | team <= set(workload.depends_on), workload.name
        # The kustomize installs (the legacy operator for PyTorchJob, the controller for Notebook) come first too.
        assert {directories["training-operator"].urn, directories["notebook-controller"].urn} <= set(
            workload.depends_on
        )
    claims = {r.name: r.urn for r in workloads if r.type.endswith("PersistentVolumeClaim")}
    mounts = {
        "kubernetes:batch/v1:Job::vision-pytorch-train": "vision-pytorch-train-checkpoints",
        "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob::vision-pytorch-train": (
            "vision-pytorch-train-trainjob-checkpoints"
        ),
        "kubernetes:kubeflow.org/v1:PyTorchJob::vision-pytorch-train": ("vision-pytorch-train-pytorchjob-checkpoints"),
    }
    for job in workloads:
        waits_for = {urn for urn in job.depends_on if urn in claims.values()}
        assert waits_for == ({claims[mounts[job.short]]} if job.short in mounts else set()), job.short


def test_kustomize_targets_are_pinned_and_ordered(run_stack) -> None:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    everything_on(values)
    run = run_stack(values=values, secret=secret)
    directories = {r.name: r for r in run.of_type("kubernetes:kustomize/v2:Directory")}
    assert {name: known(d.inputs["directory"]) for name, d in directories.items()} == {
        "training-operator": "https://github.com/kubeflow/trainer//manifests/overlays/standalone?ref=v1.9.4",
        "pipelines-cluster-scoped": (
            "https://github.com/kubeflow/pipelines//manifests/kustomize/cluster-scoped-resources?ref=2.14.3"
        ),
        "pipelines": "https://github.com/kubeflow/pipelines//manifests/kustomize/env/platform-agnostic?ref=2.14.3",
        "notebook-controller": (
            "https://github.com/kubeflow/notebooks//components/notebook-controller/config/overlays/standalone"
            "?ref=v1.11.0"
        ),
    }
    # The CRDs (Application, ...) before the standalone install that uses them.
    assert directories["pipelines-cluster-scoped"].urn in directories["pipelines"].depends_on


def test_yolo_job_is_awaited_and_training_is_not(run_stack) -> None:
    run = run_stack("onprem")
    jobs = {r.name: r for r in run.of_type("kubernetes:batch/v1:Job")}
    yolo, train = jobs["vision-yolo26-predict"], jobs["vision-pytorch-train"]
    # Its image (ultralytics, 9.8 GiB declared in images.prepull) at 20 MiB/s, plus the run: docs/scheduling.md.
    assert yolo.options["customTimeouts"] == {"create": "2340s"}
    assert "annotations" not in known(yolo.inputs["metadata"])
    assert known(train.inputs["metadata"])["annotations"] == {"pulumi.com/skipAwait": "true"}
    (trainjob,) = run.of_type("kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")
    assert known(trainjob.inputs["spec"])["runtimeRef"]["name"] == "torch-distributed"


def test_default_training_command_is_valid_python() -> None:
    from components.config.workloads import TRAINING_COMMAND

    assert TRAINING_COMMAND[:2] == ("python", "-c")
    compile(TRAINING_COMMAND[2], "training-command", "exec")
    assert "CHECKPOINT_DIR" in TRAINING_COMMAND[2] and "num_workers" in TRAINING_COMMAND[2]


def test_workloads_cli_prints_what_the_program_creates(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    from components.plan.workloads import main

    assert main(["--stack", "onprem"]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    # The vision namespace is the Kueue team's: not printed (createNamespace: false).
    assert documents == workload_manifests(onprem())
    assert documents[0]["spec"]["backoffLimit"] == 2 and isinstance(documents[0]["spec"]["backoffLimit"], int)
    assert main(["--stack", "cloud"]) == 0
    cloud = list(yaml.safe_load_all(capsys.readouterr().out))
    # ml-workloads is the Kueue team ml's namespace: the Kueue layer creates it, so it is not printed.
    assert cloud == workload_manifests(stack_spec("cloud")) and "Namespace" not in [d["kind"] for d in cloud]
    assert "kueue.x-k8s.io/queue-name: ml\n" in yaml.safe_dump_all(cloud)

    broken = tmp_path / "Pulumi.broken.yaml"
    broken.write_text("config:\n  mlcluster:kubernetesVersion: 1.30.0\n  mlcluster:cluster: {mode: existing}\n")
    assert main(["--stack-file", str(broken)]) == 2
    refused = capsys.readouterr().err
    assert "mlcluster:kubeflow.version: 2.3.0: Kubeflow Trainer 2.3 supports Kubernetes >= 1.31" in refused


TEAM_QUEUE_RULES: list[tuple[dict[str, Any], str]] = [
    (
        {"queueName": "default"},
        'mlcluster:workloads.queueName: "default" is not a Kueue team\'s LocalQueue in namespace "vision" (the'
        " teams' queues: llm in llm, research in research, vision in vision); the jobs would never be admitted",
    ),
    (
        {"createNamespace": True},
        'mlcluster:workloads.createNamespace: must be false: namespace "vision" is a Kueue team\'s, created by the'
        " Kueue layer",
    ),
]


@pytest.mark.parametrize("stack", ["onprem", "cloud"])
def test_workloads_with_kueue_and_no_team_are_refused_in_every_mode(stack: str) -> None:
    """Kueue on, no team: no LocalQueue exists, so a labelled job would wait forever (the cloud example did)."""
    values, secret = stack_values(stack)
    values = copy.deepcopy(values)
    values["kueue"] = {**values["kueue"], "teams": []}
    values["workloads"] = {**values["workloads"], "createNamespace": True, "yoloPredict": True}
    found = errors_of(values, tuple(secret))
    assert any(
        e.startswith("mlcluster:workloads.queueName: ") and "kueue.teams is empty, so the stack creates none" in e
        for e in found
    ), found


@pytest.mark.parametrize(("change", "expected"), TEAM_QUEUE_RULES, ids=["queue", "namespace"])
def test_workloads_use_a_kueue_team_queue(change: dict[str, Any], expected: str) -> None:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["workloads"].update(change)
    assert expected in errors_of(values, tuple(secret))


def test_plan_summary_lists_the_pinned_kustomize_targets(tmp_path) -> None:
    from components.config.load import read_stack_file
    from components.plan.engine import run_program
    from components.plan.writer import write_plan

    config, secret_keys = read_stack_file(STACKS / "Pulumi.onprem.yaml")
    kubeflow = {**json.loads(config["mlcluster:kubeflow"]), "pipelines": True}
    config["mlcluster:kubeflow"] = json.dumps(kubeflow)
    run = run_program(config, secret_keys, stack="onprem")
    text = write_plan(run, tmp_path, project="mlcluster", stack="onprem", spec=None)
    lines = text.splitlines()
    start = lines.index(f"{'kustomize target':<32} directory")
    assert lines[start + 1 : start + 3] == [
        f"{'pipelines-cluster-scoped':<32} "
        "https://github.com/kubeflow/pipelines//manifests/kustomize/cluster-scoped-resources?ref=2.14.3",
        f"{'pipelines':<32} https://github.com/kubeflow/pipelines//manifests/kustomize/env/platform-agnostic?ref=2.14.3",
    ]
