"""The fleet's kubectl stub as the acceptance step sees it (tests/fleet/stubs/acceptance_objects.py): apply of the
Namespace, Kueue, Trainer, Job and TrainJob objects, what the API server refuses, what the scheduler and Kueue leave
pending, the Job conditions, the logs, taints. The pure functions run on a cluster dict; the command line runs
in-process against a cluster directory under tmp_path (no fleet host needed)."""

from __future__ import annotations

import copy
import importlib
import io
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.acceptance.nccl import parse_all_reduce
from components.render import acceptance as render

from .conftest import PROJECT
from .fleet.stubs import acceptance_objects as ao

STUBS = Path(__file__).parent / "fleet" / "stubs"
NS = "mlcluster-acceptance"
IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"
NCCL_IMAGE = "ghcr.io/coreweave/nccl-tests:12.8.1-devel-ubuntu22.04-nccl2.26.2-1-0708d2e"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
QUARANTINE_TOLERATION = {"key": "mlcluster.io/acceptance", "operator": "Exists", "effect": "NoSchedule"}
MODEL_LABEL = "mlcluster.io/gpu-model"
NOW = 1_800_000_000.0


def make_cluster() -> dict[str, Any]:
    """A control plane with kubeadm's default taint (taints: None) and two 8-GPU workers with the GPU taint."""
    worker = {"controlPlane": False, "unschedulable": False, "taints": [GPU_TAINT], "kubeletVersion": "1.34.2"}
    return {
        "version": "1.34.2",
        "nodes": {
            "cp-1": {"controlPlane": True, "unschedulable": False, "taints": None, "labels": {}},
            "gpu-1": {**copy.deepcopy(worker), "labels": {MODEL_LABEL: "H100-SXM-80GB"}},
            "gpu-2": {**copy.deepcopy(worker), "labels": {MODEL_LABEL: "H100-SXM-80GB"}},
        },
        "acceptance": {
            "nodes": {
                "gpu-1": {"gpus": 8, "diag": "pass", "busbw": 360.0},
                "gpu-2": {"gpus": 8, "diag": "fail", "busbw": 300.0},
            }
        },
    }


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}


def kueue_objects(gpus: int = 16) -> list[dict[str, Any]]:
    flavor = {
        "apiVersion": ao.KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": "h100-sxm-80gb"},
        "spec": {"nodeLabels": {MODEL_LABEL: "H100-SXM-80GB"}, "tolerations": [GPU_TOLERATION]},
    }
    cluster_queue = {
        "apiVersion": ao.KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": "acceptance"},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {"name": "h100-sxm-80gb", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}
                    ],
                }
            ],
        },
    }
    local_queue = {
        "apiVersion": ao.KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": "acceptance", "namespace": NS},
        "spec": {"clusterQueue": "acceptance"},
    }
    return [flavor, cluster_queue, local_queue]


def job(name: str = "acceptance-gpu-1", node: str = "gpu-1", gpus: int = 8, **changes: Any) -> dict[str, Any]:
    """The shape components/render/acceptance.py renders: dcgm-diag as init container, the loopback test after it."""
    dcgm = {
        "name": "dcgm-diag",
        "image": IMAGE,
        "command": ["/bin/sh", "-c", "nv-hostengine >/dev/null 2>&1 || exit 1\ndcgmi diag -r 2 -j || true\n"],
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
    }
    nccl = {
        "name": "nccl-loopback",
        "image": NCCL_IMAGE,
        "command": ["all_reduce_perf"],
        "args": ["-b", "8", "-e", "8G", "-f", "2", "-g", str(gpus), "-c", "1"],
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
    }
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                }
            }
        },
        "tolerations": [GPU_TOLERATION, QUARANTINE_TOLERATION],
        "initContainers": [dcgm],
        "containers": [nccl],
    }
    pod.update(changes.pop("pod", {}))
    obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": changes.pop("labels", {})},
        "spec": {"backoffLimit": 0, "activeDeadlineSeconds": 1800, "template": {"spec": pod}},
    }
    assert not changes, changes
    return obj


def runtime() -> dict[str, Any]:
    tolerations = [GPU_TOLERATION, QUARANTINE_TOLERATION]
    node = {"name": "node", "image": NCCL_IMAGE, "command": ["/bin/sh", "-c", "exec /usr/sbin/sshd -De -p 2222"]}
    return {
        "apiVersion": ao.TRAINER_API,
        "kind": "TrainingRuntime",
        "metadata": {"name": "nccl", "namespace": NS},
        "spec": {
            "mlPolicy": {"numNodes": 2, "mpi": {"numProcPerNode": 1}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {"template": {"spec": {"tolerations": tolerations, "containers": [node]}}}
                            },
                        },
                        {
                            "name": "launcher",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "tolerations": tolerations,
                                            "containers": [{"name": "node", "image": NCCL_IMAGE}],
                                        }
                                    }
                                }
                            },
                        },
                    ]
                }
            },
        },
    }


def train_job(
    nodes: tuple[str, ...] = ("gpu-1", "gpu-2"), name: str = "all-reduce-h100", **changes: Any
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": ao.TRAINER_API,
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {ao.QUEUE_LABEL: "acceptance"},
            "annotations": {ao.NODES_ANNOTATION: ",".join(nodes)},
        },
        "spec": {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": "nccl"},
            "trainer": {
                "numNodes": len(nodes),
                "command": ["mpirun", "-np", "16", "all_reduce_perf_mpi", "-b", "8", "-e", "8G", "-f", "2", "-g", "1"],
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}},
            },
        },
    }
    obj.update(changes)
    return obj


def apply(cluster: dict[str, Any], *documents: dict[str, Any], now: float = NOW) -> ao.ApplyResult:
    return ao.apply_documents(cluster, [copy.deepcopy(d) for d in documents], "objects.yaml", None, now)


def ready(with_kueue: bool = False) -> dict[str, Any]:
    cluster = make_cluster()
    result = apply(cluster, namespace(), *(kueue_objects() if with_kueue else []), runtime())
    assert not result.errors, result.errors
    return cluster


def conditions(cluster: dict[str, Any], kind: str, name: str) -> str:
    obj = cluster["objects"][ao.object_key(kind, NS, name)]
    return ao.jsonpath(obj, '{.status.conditions[?(@.status=="True")].type}')


# ---- apply ----------------------------------------------------------------------------------------------------


def test_apply_prints_each_object_like_kubectl_then_unchanged_then_configured() -> None:
    cluster = make_cluster()
    first = apply(cluster, namespace(), *kueue_objects(), runtime())
    assert first.errors == []
    assert first.lines == [
        f"namespace/{NS} created",
        "resourceflavor.kueue.x-k8s.io/h100-sxm-80gb created",
        "clusterqueue.kueue.x-k8s.io/acceptance created",
        "localqueue.kueue.x-k8s.io/acceptance created",
        "trainingruntime.trainer.kubeflow.org/nccl created",
    ]
    assert set(cluster["objects"]) >= {f"Namespace//{NS}", "ClusterQueue//acceptance", f"LocalQueue/{NS}/acceptance"}
    again = apply(cluster, namespace(), *kueue_objects(), runtime())
    assert all(line.endswith(" unchanged") for line in again.lines), again.lines
    changed = apply(cluster, *kueue_objects(gpus=8))
    assert changed.lines[1] == "clusterqueue.kueue.x-k8s.io/acceptance configured"


def test_a_kind_the_cluster_does_not_serve_is_kubectls_mapping_error_and_the_rest_still_applies() -> None:
    cluster = make_cluster()
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NS}}
    old_queue = {**kueue_objects()[2], "apiVersion": "kueue.x-k8s.io/v1alpha1"}
    result = apply(cluster, namespace(), deployment, old_queue)
    assert result.lines == [f"namespace/{NS} created"]
    assert result.errors[0].startswith(
        'error: resource mapping not found for name: "web" namespace: "mlcluster-acceptance" from "objects.yaml":'
        ' no matches for kind "Deployment" in version "apps/v1"'
    )
    assert 'no matches for kind "LocalQueue" in version "kueue.x-k8s.io/v1alpha1"' in result.errors[1]


def test_a_namespaced_object_needs_its_namespace_first_in_the_file_or_before() -> None:
    cluster = make_cluster()
    result = apply(cluster, runtime(), namespace())
    assert result.errors == [
        'Error from server (NotFound): error when creating "objects.yaml": namespaces "mlcluster-acceptance" not found'
    ]
    assert result.lines == [f"namespace/{NS} created"]
    assert apply(cluster, runtime()).lines == ["trainingruntime.trainer.kubeflow.org/nccl created"]
    default = runtime()
    del default["metadata"]["namespace"]
    assert apply(cluster, default).errors == []  # "default" always exists
    assert "TrainingRuntime/default/nccl" in cluster["objects"]


@pytest.mark.parametrize(
    ("policy", "error"),
    [
        (None, 'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'),
        ("Always", 'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'),
        ("Sometimes", 'spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values:'),
    ],
)
def test_the_api_server_refuses_a_job_that_restarts_always(policy: str | None, error: str) -> None:
    cluster = ready()
    bad = job()
    if policy is None:
        del bad["spec"]["template"]["spec"]["restartPolicy"]
    else:
        bad["spec"]["template"]["spec"]["restartPolicy"] = policy
    (message,) = apply(cluster, bad).errors
    assert message.startswith(f'The Job "acceptance-gpu-1" is invalid: {error}')
    assert ao.object_key("Job", NS, "acceptance-gpu-1") not in cluster["objects"]


def test_a_job_template_is_immutable_the_same_template_is_unchanged() -> None:
    cluster = ready()
    assert apply(cluster, job()).lines == ["job.batch/acceptance-gpu-1 created"]
    assert apply(cluster, job()).lines == ["job.batch/acceptance-gpu-1 unchanged"]
    other = job(gpus=4)
    (message,) = apply(cluster, other).errors
    assert message.startswith('The Job "acceptance-gpu-1" is invalid: spec.template: Invalid value: ')
    assert message.endswith(": field is immutable")
    deadline = job()
    deadline["spec"]["activeDeadlineSeconds"] = 60
    assert apply(cluster, deadline).lines == ["job.batch/acceptance-gpu-1 configured"]


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        ("nccl-tests", False),
        ("nccl-tests:latest", False),
        ("registry.local:5000/nccl-tests", False),
        ("registry.local:5000/nccl-tests:2.26", True),
        ("nccl-tests@sha256:abc", False),
        ("nccl-tests@sha256:" + "a" * 64, True),
        ("nccl-tests:latest@sha256:" + "0" * 64, True),
    ],
)
def test_images_must_be_pinned_by_tag_or_digest(image: str, pinned: bool) -> None:
    assert ao.image_pinned(image) is pinned
    cluster = ready()
    unpinned = job()
    unpinned["spec"]["template"]["spec"]["initContainers"][0]["image"] = image
    errors = apply(cluster, unpinned).errors
    if pinned:
        assert errors == []
    else:
        assert errors == [
            f"error: stub policy: image {image} is not pinned (spec.template.spec.initContainers[0]): give it a tag"
            " other than latest or an @sha256: digest"
        ]


def test_the_api_server_checks_gpu_requests_tolerations_and_node_field_selectors() -> None:
    cluster = ready()
    bad = job(
        pod={
            "tolerations": [{"operator": "Equal", "value": "x"}, {"key": "k", "operator": "Exists", "value": "v"}],
        }
    )
    bad["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "8"}}
    bad["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchFields"][0]["values"] = ["gpu-1", "gpu-2"]
    (message,) = apply(cluster, bad).errors
    assert message.startswith('The Job "acceptance-gpu-1" is invalid: [')
    assert (
        "containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources" in message
    )
    assert 'tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty' in message
    assert "tolerations[1].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'" in message
    assert "matchFields[0].values: Required value: must be only one value when `operator` is 'In' or 'NotIn'" in message


# ---- scheduling -------------------------------------------------------------------------------------------------


def test_a_pinned_tolerated_job_with_gpus_to_spare_runs_and_completes() -> None:
    cluster = ready()
    apply(cluster, job(), now=NOW + 5)
    assert cluster["acceptance"]["runs"] == [
        {"kind": "Job", "name": "acceptance-gpu-1", "namespace": NS, "node": "gpu-1", "at": NOW + 5}
    ]
    # Kubernetes >= 1.31 ends a Job in two steps: SuccessCriteriaMet, then Complete (both stay True).
    assert conditions(cluster, "Job", "acceptance-gpu-1") == "SuccessCriteriaMet Complete"
    assert cluster["acceptance"]["unschedulable"] == {}
    cluster["version"] = "1.30.4"
    ao.reconcile(cluster, NOW)
    # (status is rewritten on each reconcile: a 1.30 cluster writes Complete alone)
    assert conditions(cluster, "Job", "acceptance-gpu-1") == "Complete"


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "value": "present"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"operator": "Exists"}, True),
        ({"operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_toleration_matching_is_kubernetes(toleration: dict[str, str], tolerated: bool) -> None:
    assert ao.tolerates(toleration, GPU_TAINT) is tolerated
    cluster = ready()
    apply(cluster, job(pod={"tolerations": [toleration]}))
    if tolerated:
        assert conditions(cluster, "Job", "acceptance-gpu-1") == "SuccessCriteriaMet Complete"
    else:
        assert conditions(cluster, "Job", "acceptance-gpu-1") == ""
        assert cluster["acceptance"]["unschedulable"]["acceptance-gpu-1"] == (
            "node gpu-1 had untolerated taint(s) nvidia.com/gpu=present:NoSchedule"
        )
        assert cluster["acceptance"]["runs"] == []


def test_prefer_no_schedule_only_steers_and_the_quarantine_taint_is_tolerated() -> None:
    cluster = ready()
    cluster["nodes"]["gpu-1"]["taints"] += [
        {"key": "soft", "effect": "PreferNoSchedule"},
        {"key": "mlcluster.io/acceptance", "value": "failed", "effect": "NoSchedule"},
    ]
    apply(cluster, job())
    assert conditions(cluster, "Job", "acceptance-gpu-1") == "SuccessCriteriaMet Complete"


def test_a_cordoned_or_notready_node_takes_no_new_pods() -> None:
    cluster = ready()
    cluster["nodes"]["gpu-1"]["unschedulable"] = True
    cluster["nodes"]["gpu-2"]["ready"] = False
    apply(cluster, job(), job("acceptance-gpu-2", "gpu-2"))
    unschedulable = cluster["acceptance"]["unschedulable"]
    assert "node.kubernetes.io/unschedulable:NoSchedule" in unschedulable["acceptance-gpu-1"]
    assert "node.kubernetes.io/not-ready:NoSchedule" in unschedulable["acceptance-gpu-2"]
    # Uncordoned: the pending pod is scheduled at the next reconcile (any later kubectl call).
    cluster["nodes"]["gpu-1"]["unschedulable"] = False
    ao.reconcile(cluster, NOW + 60)
    assert conditions(cluster, "Job", "acceptance-gpu-1") == "SuccessCriteriaMet Complete"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("two-app-containers", "Insufficient nvidia.com/gpu: node gpu-1 has 8 allocatable"),
        ("big-init", "Insufficient nvidia.com/gpu: node gpu-1 has 8 allocatable"),
        ("node-without-gpus", "Insufficient nvidia.com/gpu: node cp-1 has 0 allocatable"),
        ("unknown-node", "node gpu-9 does not exist"),
        ("not-pinned", "stub policy: the pod is not pinned to exactly one node"),
    ],
)
def test_what_the_scheduler_cannot_place_never_completes(change: str, why: str) -> None:
    cluster = ready()
    candidate = job()
    pod = candidate["spec"]["template"]["spec"]
    if change == "two-app-containers":
        second = {**copy.deepcopy(pod["containers"][0]), "name": "second"}
        pod["containers"].append(second)  # 8 + 8 app GPUs on an 8-GPU node
    elif change == "big-init":
        pod["initContainers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "9"
    elif change == "node-without-gpus":
        candidate = job(node="cp-1", pod={"tolerations": [{"operator": "Exists"}]})
    elif change == "unknown-node":
        candidate = job(node="gpu-9")
    else:
        del pod["affinity"]
    assert apply(cluster, candidate).errors == []
    assert cluster["acceptance"]["unschedulable"]["acceptance-gpu-1"].startswith(why)
    assert conditions(cluster, "Job", "acceptance-gpu-1") == ""
    assert cluster["objects"][ao.object_key("Job", NS, "acceptance-gpu-1")]["status"] == {"active": 1}


def test_a_hanging_node_keeps_its_job_running_and_its_gpus_until_the_deadline() -> None:
    cluster = ready()
    cluster["acceptance"]["nodes"]["gpu-1"]["hang"] = True
    apply(cluster, job())
    assert conditions(cluster, "Job", "acceptance-gpu-1") == ""
    assert cluster["acceptance"]["runs"][0]["node"] == "gpu-1"  # it started
    with pytest.raises(ao.ApiError, match=r'container "dcgm-diag" in pod "acceptance-gpu-1-\w{5}" is waiting to start'):
        ao.job_logs(cluster, NS, "acceptance-gpu-1", "dcgm-diag", tail=-1, now=NOW)
    # Its GPUs are held: a second test on the same node waits.
    apply(cluster, job("second", "gpu-1"), now=NOW + 100)  # its own deadline runs from here, pending or not
    assert cluster["acceptance"]["unschedulable"]["second"].startswith("Insufficient nvidia.com/gpu")
    # Past activeDeadlineSeconds the Job fails (FailureTarget, then Failed) and the second one gets the GPUs.
    cluster["acceptance"]["nodes"]["gpu-1"]["hang"] = False
    ao.reconcile(cluster, NOW + 1800)
    assert conditions(cluster, "Job", "acceptance-gpu-1") == "FailureTarget Failed"
    assert conditions(cluster, "Job", "second") == "SuccessCriteriaMet Complete"
    with pytest.raises(ao.ApiError, match="timed out waiting for the condition"):
        ao.job_logs(cluster, NS, "acceptance-gpu-1", "dcgm-diag", tail=-1, now=NOW + 1800)


# ---- Kueue ------------------------------------------------------------------------------------------------------


def test_a_queue_name_without_its_local_queue_leaves_the_job_suspended() -> None:
    cluster = ready()
    apply(cluster, job(labels={ao.QUEUE_LABEL: "acceptance"}))
    assert cluster["acceptance"]["unschedulable"]["acceptance-gpu-1"] == "no LocalQueue acceptance"
    # The Job controller reports the suspension: the step's "any True condition" is not "finished".
    assert conditions(cluster, "Job", "acceptance-gpu-1") == "Suspended"
    with pytest.raises(ao.ApiError, match="timed out waiting for the condition"):
        ao.job_logs(cluster, NS, "acceptance-gpu-1", "dcgm-diag", tail=-1, now=NOW)
    # The queue created later: Kueue admits it.
    apply(cluster, *kueue_objects())
    assert conditions(cluster, "Job", "acceptance-gpu-1") == "SuccessCriteriaMet Complete"
    assert cluster["acceptance"]["workloads"][f"Job/{NS}/acceptance-gpu-1"]["admission"]["flavors"] == {
        "nvidia.com/gpu": "h100-sxm-80gb"
    }


def test_kueue_admits_within_quota_and_a_hanging_test_holds_it() -> None:
    cluster = make_cluster()
    apply(cluster, namespace(), *kueue_objects(gpus=8))
    cluster["acceptance"]["nodes"]["gpu-1"]["hang"] = True
    label = {ao.QUEUE_LABEL: "acceptance"}
    apply(cluster, job(labels=label), job("acceptance-gpu-2", "gpu-2", labels=label))
    assert conditions(cluster, "Job", "acceptance-gpu-1") == ""  # admitted (Suspended False), running
    assert cluster["acceptance"]["unschedulable"]["acceptance-gpu-2"] == (
        "couldn't assign flavors in ClusterQueue acceptance: insufficient unused quota for nvidia.com/gpu in flavor"
        " h100-sxm-80gb: needs 8, 0 of 8 available"
    )
    assert ao.delete_object(cluster, ao.BY_KIND["Job"], NS, "acceptance-gpu-1", ignore_not_found=False, now=NOW) == (
        'job.batch "acceptance-gpu-1" deleted'
    )
    assert conditions(cluster, "Job", "acceptance-gpu-2") == "SuccessCriteriaMet Complete"


def test_kueue_refuses_a_namespace_its_cluster_queue_does_not_select_and_uncovered_resources() -> None:
    cluster = make_cluster()
    objects = kueue_objects()
    objects[1]["spec"]["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": "elsewhere"}}
    apply(cluster, namespace(), *objects)
    apply(cluster, job(labels={ao.QUEUE_LABEL: "acceptance"}))
    assert (
        "doesn't match ClusterQueue acceptance's namespaceSelector"
        in (cluster["acceptance"]["unschedulable"]["acceptance-gpu-1"])
    )
    cluster = make_cluster()
    apply(cluster, namespace(), *kueue_objects())
    hungry = job(labels={ao.QUEUE_LABEL: "acceptance"})
    hungry["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "2", "nvidia.com/gpu": "8"}
    apply(cluster, hungry)
    assert cluster["acceptance"]["unschedulable"]["acceptance-gpu-1"] == (
        "resource cpu unavailable in ClusterQueue acceptance"
    )


def test_the_flavor_kueue_picks_is_injected_a_node_of_another_model_does_not_match() -> None:
    cluster = ready(with_kueue=True)
    cluster["nodes"]["gpu-2"]["labels"][MODEL_LABEL] = "A100-SXM4-80GB"
    apply(cluster, job("acceptance-gpu-2", "gpu-2", labels={ao.QUEUE_LABEL: "acceptance"}))
    assert cluster["acceptance"]["unschedulable"]["acceptance-gpu-2"] == (
        f"node gpu-2 does not match the pod's nodeSelector {MODEL_LABEL}=H100-SXM-80GB (node(s) didn't match Pod's"
        " node affinity/selector)"
    )


# ---- logs -------------------------------------------------------------------------------------------------------


def test_dcgm_diag_logs_are_the_nodes_sample_and_record_the_level() -> None:
    cluster = ready()
    apply(cluster, job(), job("acceptance-gpu-2", "gpu-2"))
    passed = ao.job_logs(cluster, NS, "acceptance-gpu-1", "dcgm-diag", tail=-1, now=NOW)
    failed = ao.job_logs(cluster, NS, "acceptance-gpu-2", "dcgm-diag", tail=-1, now=NOW)
    assert passed == ao.DIAG_SAMPLES["pass"].read_text()
    assert failed == ao.DIAG_SAMPLES["fail"].read_text()
    assert [run.get("dcgmLevel") for run in cluster["acceptance"]["runs"]] == [2, 2]
    with pytest.raises(ao.ApiError, match=r"container nvidia-smi is not valid for pod acceptance-gpu-1-\w{5}$"):
        ao.job_logs(cluster, NS, "acceptance-gpu-1", "nvidia-smi", tail=-1, now=NOW)
    with pytest.raises(ao.ApiError, match=r'^Error from server \(NotFound\): jobs.batch "gone" not found$'):
        ao.job_logs(cluster, NS, "gone", "dcgm-diag", tail=-1, now=NOW)


@pytest.mark.parametrize(
    ("script", "level"),
    [
        ("dcgmi diag -r 2 -j || true", 2),
        ("dcgmi diag -j -r 3", 3),
        ("dcgmi diag --run 1 --json", 1),
        ("dcgmi diag -r 2", None),  # text output: the program cannot read it
        ("dcgmi diag -r 4 -j", None),  # hours long: not what acceptance runs
        ("nvidia-smi -q", None),
    ],
)
def test_the_dcgm_command_must_be_a_json_diag_at_level_1_to_3(script: str, level: int | None) -> None:
    assert ao.dcgm_level({"command": ["/bin/sh", "-c", script]}) == level


def test_nccl_loopback_logs_parse_and_read_the_nodes_bandwidth() -> None:
    cluster = ready()
    apply(cluster, job())
    text = ao.job_logs(cluster, NS, "acceptance-gpu-1", "nccl-loopback", tail=-1, now=NOW)
    result = parse_all_reduce(text)
    assert result.largest_size_busbw_gbps == pytest.approx(360.0, abs=0.01)
    assert result.failures() == []
    sample = parse_all_reduce(ao.ALL_REDUCE_SAMPLE.read_text())
    factor = 360.0 / sample.largest_size_busbw_gbps
    assert result.avg_busbw_gbps == pytest.approx(sample.avg_busbw_gbps * factor, abs=0.001)
    assert len(result.rows) == len(sample.rows)
    for scaled, original in zip(result.rows, sample.rows, strict=True):
        assert scaled.size_bytes == original.size_bytes and scaled.out_of_place.wrong == 0
        assert scaled.in_place.algbw_gbps == pytest.approx(original.in_place.algbw_gbps * factor, abs=0.006)


def _column_ends(line: str) -> list[int]:
    return [i for i, c in enumerate(line) if c != " " and (i + 1 == len(line) or line[i + 1] == " ")]


@pytest.mark.parametrize("target", [1.0, 150.0, 337.35, 900.0, 2000.0])
def test_the_scaled_sample_keeps_nccl_tests_columns(target: float) -> None:
    original = ao.ALL_REDUCE_SAMPLE.read_text()
    scaled = ao.scaled_all_reduce(original, target)
    assert parse_all_reduce(scaled).largest_size_busbw_gbps == pytest.approx(target, abs=0.01)
    for before, after in zip(original.splitlines(), scaled.splitlines(), strict=True):
        if before.startswith("#"):
            assert before == after or "Avg bus bandwidth" in before
            continue
        # Right-aligned as nccl-tests prints: every column ends where it did.
        assert _column_ends(after) == _column_ends(before)


def test_an_unchecked_run_prints_na_for_wrong_and_the_verdict_sees_it() -> None:
    cluster = ready()
    unchecked = job()
    unchecked["spec"]["template"]["spec"]["containers"][0]["args"][-1] = "0"
    apply(cluster, unchecked)
    result = parse_all_reduce(ao.job_logs(cluster, NS, "acceptance-gpu-1", "nccl-loopback", tail=-1, now=NOW))
    assert result.rows[0].out_of_place.wrong is None and result.failures()


def test_all_reduce_asking_for_more_gpus_than_the_container_has_is_an_error() -> None:
    cluster = ready()
    greedy = job()
    greedy["spec"]["template"]["spec"]["containers"][0]["args"][7] = "16"
    apply(cluster, greedy)
    with pytest.raises(ao.ApiError, match="all_reduce_perf -g 16 in container nccl-loopback, which has 8 GPU"):
        ao.job_logs(cluster, NS, "acceptance-gpu-1", "nccl-loopback", tail=-1, now=NOW)


# ---- TrainJob ---------------------------------------------------------------------------------------------------

JOBSET_KEYS = Path(__file__).parent / "fixtures" / "upstream-excerpts" / "jobset-v0.12.0-jobset_types.go.txt"
LAUNCHER = f"{ao.JOBSET_NAME_LABEL}=all-reduce-h100,{ao.REPLICATED_JOB_LABEL}=launcher"


def test_a_train_job_across_two_nodes_completes_and_its_launcher_reports_the_slower_node() -> None:
    cluster = ready(with_kueue=True)
    assert apply(cluster, train_job()).lines == ["trainjob.trainer.kubeflow.org/all-reduce-h100 created"]
    assert conditions(cluster, "TrainJob", "all-reduce-h100") == "Complete"
    assert cluster["acceptance"]["runs"] == [
        {"kind": "TrainJob", "name": "all-reduce-h100", "namespace": NS, "nodes": ["gpu-1", "gpu-2"], "at": NOW}
    ]
    out, err = ao.launcher_logs(cluster, NS, LAUNCHER, "node", tail=-1, now=NOW)
    assert err == ""
    assert parse_all_reduce(out).largest_size_busbw_gbps == pytest.approx(0.9 * 300.0, abs=0.01)
    # kubectl logs -l prints the last 10 lines unless --tail says otherwise.
    tail, _ = ao.launcher_logs(cluster, NS, LAUNCHER, "node", tail=10, now=NOW)
    assert tail.splitlines() == out.splitlines()[-10:]


@pytest.mark.parametrize(
    "selector",
    [
        # Trainer v2.3.0 sets no such pod label (issue 47): the script's old selector, which read nothing.
        "trainer.kubeflow.org/trainjob-name=all-reduce-h100,jobset.sigs.k8s.io/replicatedjob-name=launcher",
        f"{ao.JOBSET_NAME_LABEL}=all-reduce-other,{ao.REPLICATED_JOB_LABEL}=launcher",
        f"{ao.JOBSET_NAME_LABEL}=all-reduce-h100,{ao.REPLICATED_JOB_LABEL}=worker",
    ],
)
def test_a_selector_with_labels_no_controller_sets_finds_no_pod_and_exits_zero(selector: str) -> None:
    cluster = ready(with_kueue=True)
    apply(cluster, train_job())
    assert conditions(cluster, "TrainJob", "all-reduce-h100") == "Complete"
    assert ao.launcher_logs(cluster, NS, selector, "node", tail=-1, now=NOW) == (
        "",
        f"No resources found in {NS} namespace.\n",
    )


def test_the_stubs_pod_labels_are_the_ones_jobset_sets() -> None:
    """Held to kubernetes-sigs/jobset v0.12.0 api/jobset/v1alpha2/jobset_types.go (the keys) and Trainer v2.3.0
    (the JobSet carries the TrainJob's name): the stub never labels a pod with a key the controllers lack."""
    labels = ao._pod_labels("all-reduce-h100", "launcher")
    assert labels == {
        "jobset.sigs.k8s.io/jobset-name": "all-reduce-h100",
        "jobset.sigs.k8s.io/replicatedjob-name": "launcher",
        "jobset.sigs.k8s.io/job-index": "0",
    }
    assert not [key for key in labels if key.startswith("trainer.kubeflow.org/")]
    upstream = set(re.findall(r'string = "([^"]+)"', JOBSET_KEYS.read_text()))
    assert set(labels) <= upstream, set(labels) - upstream
    # And the acceptance step selects the launcher's pod by those keys only.
    script = (PROJECT / "components" / "scripts" / "acceptance.sh").read_text()
    selectors = re.findall(r'logs \\\n\s*-l "([^"]+)"', script)
    assert selectors, "the acceptance step reads no launcher log by label"
    for selector in selectors:
        keys = {pair.split("=", 1)[0] for pair in selector.split(",")}
        assert keys <= upstream, keys - upstream


def test_a_train_job_whose_nodes_are_pending_has_no_launcher_pod() -> None:
    cluster = ready(with_kueue=True)
    cluster["nodes"]["gpu-2"]["taints"].append({"key": "mlcluster.io/other", "effect": "NoExecute"})
    apply(cluster, train_job())
    assert conditions(cluster, "TrainJob", "all-reduce-h100") == ""
    assert cluster["acceptance"]["unschedulable"]["all-reduce-h100"] == (
        "node pod for gpu-2: node gpu-2 had untolerated taint(s) mlcluster.io/other:NoExecute"
    )
    assert ao.launcher_logs(cluster, NS, LAUNCHER, "node", tail=-1, now=NOW) == (
        "",
        f"No resources found in {NS} namespace.\n",
    )


def test_runtime_patches_replace_the_node_pods_tolerations() -> None:
    cluster = ready(with_kueue=True)
    patched = train_job(nodes=("gpu-1", "cp-1"))
    patch = {"name": "node", "template": {"spec": {"template": {"spec": {"tolerations": [{"operator": "Exists"}]}}}}}
    patched["spec"]["runtimePatches"] = [
        {
            "manager": "mlcluster.io/acceptance",
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [patch]}}},
        }
    ]
    cluster["acceptance"]["nodes"]["cp-1"] = {"gpus": 8}
    cluster["nodes"]["cp-1"]["labels"][MODEL_LABEL] = "H100-SXM-80GB"
    apply(cluster, patched)
    assert conditions(cluster, "TrainJob", "all-reduce-h100") == "Complete"


def test_a_runtime_patch_of_a_container_merges_into_the_runtimes_container_of_that_name() -> None:
    cluster = ready(with_kueue=True)
    patched = train_job()
    container = {"name": "node", "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
    patch = {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [container]}}}}}
    patched["spec"]["runtimePatches"] = [
        {
            "manager": "mlcluster.io/acceptance",
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [patch]}}},
        }
    ]
    apply(cluster, patched)
    assert conditions(cluster, "TrainJob", "all-reduce-h100") == "Complete"
    runtime = ao._runtime_of(cluster, patched)[1]
    pod = ao._patched_pod(patched, runtime, "node")
    assert pod is not None
    [node] = [c for c in pod["containers"] if c["name"] == "node"]
    assert node["securityContext"] == container["securityContext"] and node.get("image"), node
    out, _ = ao.launcher_logs(cluster, NS, LAUNCHER, "node", tail=-1, now=NOW)
    assert parse_all_reduce(out).largest_size_busbw_gbps > 0, out[:200]


def test_pinning_a_train_jobs_pods_with_several_field_values_is_refused_by_the_api_server() -> None:
    cluster = ready(with_kueue=True)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1", "gpu-2"]}]}
                ]
            }
        }
    }
    patch = {"name": "node", "template": {"spec": {"template": {"spec": {"affinity": affinity}}}}}
    pinned = train_job()
    pinned["spec"]["runtimePatches"] = [
        {
            "manager": "mlcluster.io/acceptance",
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [patch]}}},
        }
    ]
    apply(cluster, pinned)
    assert conditions(cluster, "TrainJob", "all-reduce-h100") == ""
    assert (
        "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
        in (cluster["acceptance"]["unschedulable"]["all-reduce-h100"])
    )
    # One term per node (terms are ORed) is how a pod may go to any of several named nodes.
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]} for n in ("gpu-1", "gpu-2")]
    affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = terms
    ao.delete_object(cluster, ao.BY_KIND["TrainJob"], NS, "all-reduce-h100", ignore_not_found=False, now=NOW)
    apply(cluster, pinned)
    assert conditions(cluster, "TrainJob", "all-reduce-h100") == "Complete"


def test_a_train_job_without_a_queue_name_stays_suspended_where_the_namespace_has_queues() -> None:
    cluster = ready(with_kueue=True)
    unqueued = train_job()
    del unqueued["metadata"]["labels"][ao.QUEUE_LABEL]
    apply(cluster, unqueued)
    assert conditions(cluster, "TrainJob", "all-reduce-h100") == "Suspended"
    assert cluster["acceptance"]["unschedulable"]["all-reduce-h100"].startswith(
        f"no {ao.QUEUE_LABEL} label while namespace {NS} has LocalQueues"
    )


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"kind": None}, "ClusterTrainingRuntime.trainer.kubeflow.org 'nccl' not found"),
        ({"name": "other"}, "TrainingRuntime.trainer.kubeflow.org 'other' not found"),
        ({"numNodes": 1}, "stub policy: TrainJob all-reduce-h100: spec.trainer.numNodes must be an integer >= 2"),
        ({"gpus": None}, "stub policy: TrainJob all-reduce-h100: spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]"),
        ({"nodes": "gpu-1"}, f"stub policy: TrainJob all-reduce-h100: annotation {ao.NODES_ANNOTATION} must name 2"),
    ],
)
def test_what_a_train_job_must_name(change: dict[str, Any], error: str) -> None:
    cluster = ready(with_kueue=True)
    bad = train_job()
    spec = bad["spec"]
    if "kind" in change:
        del spec["runtimeRef"]["kind"]  # the CRD's default: ClusterTrainingRuntime
    if "name" in change:
        spec["runtimeRef"]["name"] = change["name"]
    if "numNodes" in change:
        spec["trainer"]["numNodes"] = change["numNodes"]
    if "gpus" in change:
        del spec["trainer"]["resourcesPerNode"]
    if "nodes" in change:
        bad["metadata"]["annotations"][ao.NODES_ANNOTATION] = change["nodes"]
    (message,) = apply(cluster, bad).errors
    assert error in message


def test_a_train_job_on_a_node_with_too_few_gpus_never_runs() -> None:
    cluster = ready(with_kueue=True)
    cluster["acceptance"]["nodes"]["gpu-2"]["gpus"] = 4
    apply(cluster, train_job())
    assert cluster["acceptance"]["unschedulable"]["all-reduce-h100"].startswith(
        "node pod for gpu-2: Insufficient nvidia.com/gpu"
    )


# ---- get, delete, jsonpath --------------------------------------------------------------------------------------


def test_delete_and_get_of_a_missing_object_say_not_found() -> None:
    cluster = ready()
    kind = ao.BY_KIND["Job"]
    assert ao.delete_object(cluster, kind, NS, "nope", ignore_not_found=True, now=NOW) is None
    with pytest.raises(ao.ApiError, match=r'^Error from server \(NotFound\): jobs.batch "nope" not found$'):
        ao.delete_object(cluster, kind, NS, "nope", ignore_not_found=False, now=NOW)
    with pytest.raises(ao.ApiError, match=r'^Error from server \(NotFound\): trainjobs.trainer.kubeflow.org "x" not'):
        ao.get_object(cluster, ao.BY_KIND["TrainJob"], NS, "x")
    assert ao.kind_for_resource("jobs.batch") is kind and ao.kind_for_resource("trainjob") is ao.BY_KIND["TrainJob"]
    assert ao.kind_for_resource("deployment") is None


def test_jsonpath_subset() -> None:
    obj = {"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "False"}]}, "n": [1, 2]}
    assert ao.jsonpath(obj, '{.status.conditions[?(@.status=="True")].type}') == "A"
    assert ao.jsonpath(obj, "{.status.conditions[?(@.type=='B')].status}") == "False"
    assert ao.jsonpath(obj, "{.status.conditions[*].type}") == "A B"
    assert ao.jsonpath(obj, "{.n[-1]}") == "2"
    assert ao.jsonpath(obj, "{.missing.field}") == ""
    assert ao.jsonpath(obj, "{.n}") == "[1,2]"


# ---- taints -----------------------------------------------------------------------------------------------------


def test_taint_adds_overwrites_and_removes_as_kubectl_does() -> None:
    cluster = make_cluster()
    assert ao.taint_node(cluster, "gpu-1", ["mlcluster.io/acceptance=failed:NoSchedule"], False) == "node/gpu-1 tainted"
    with pytest.raises(ao.ApiError) as refused:
        ao.taint_node(cluster, "gpu-1", ["mlcluster.io/acceptance=again:NoSchedule"], False)
    assert refused.value.message == (
        "error: node gpu-1 already has mlcluster.io/acceptance taint(s) with same effect(s) and --overwrite is false"
    )
    # --overwrite: kubectl reports the update as "modified".
    assert ao.taint_node(cluster, "gpu-1", ["mlcluster.io/acceptance=again:NoSchedule"], True) == "node/gpu-1 modified"
    assert ao.taints_jsonpath(cluster["nodes"]["gpu-1"]) == (
        '[{"effect":"NoSchedule","key":"mlcluster.io/acceptance","value":"again"},'
        '{"effect":"NoSchedule","key":"nvidia.com/gpu","value":"present"}]'
    )
    assert ao.taint_node(cluster, "gpu-1", ["mlcluster.io/acceptance:NoSchedule-"], False) == "node/gpu-1 untainted"
    with pytest.raises(ao.ApiError, match=r'^error: taint "mlcluster.io/acceptance:NoSchedule" not found$'):
        ao.taint_node(cluster, "gpu-1", ["mlcluster.io/acceptance:NoSchedule-"], False)
    with pytest.raises(ao.ApiError, match=r'^Error from server \(NotFound\): nodes "gpu-9" not found$'):
        ao.taint_node(cluster, "gpu-9", ["a=b:NoSchedule"], True)
    with pytest.raises(ao.ApiError, match="invalid taint effect: Sometimes"):
        ao.taint_node(cluster, "gpu-1", ["a=b:Sometimes"], True)
    assert ao.taint_node(cluster, "gpu-1", ["nvidia.com/gpu-"], False) == "node/gpu-1 untainted"
    assert ao.taints_jsonpath(cluster["nodes"]["gpu-1"]) == ""


def test_the_taints_on_a_nodes_spec_include_kubeadms_default_and_the_controllers() -> None:
    cluster = make_cluster()
    assert ao.taints_jsonpath(cluster["nodes"]["cp-1"]) == (
        '[{"effect":"NoSchedule","key":"node-role.kubernetes.io/control-plane"}]'
    )
    cluster["nodes"]["cp-1"]["taints"] = []
    cluster["nodes"]["cp-1"]["unschedulable"] = True
    assert ao.taints_jsonpath(cluster["nodes"]["cp-1"]) == (
        '[{"effect":"NoSchedule","key":"node.kubernetes.io/unschedulable"}]'
    )
    # Removing kubeadm's default taint makes it explicit first.
    cluster["nodes"]["cp-2"] = {"controlPlane": True, "taints": None, "unschedulable": False}
    assert ao.taint_node(cluster, "cp-2", ["node-role.kubernetes.io/control-plane:NoSchedule-"], False) == (
        "node/cp-2 untainted"
    )
    assert cluster["nodes"]["cp-2"]["taints"] == []


def test_quantities() -> None:
    assert ao.quantity("8") == 8 and ao.quantity(8) == 8 and ao.quantity("4Ti") == 4 * 2**40
    assert ao.quantity("500m") * 2 == 1 and ao.quantity("1e3") == 1000
    with pytest.raises(ValueError):
        ao.quantity("eight")


# ---- the command line, in-process -------------------------------------------------------------------------------

ENDPOINT = "10.0.0.10:6443"


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Any:
    """kubectl.py imported as the stubs import each other (their directory on sys.path), removed afterwards."""
    names = ("_stub", "kubectl", "acceptance_objects")
    monkeypatch.syspath_prepend(str(STUBS))
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    module = importlib.import_module("kubectl")
    yield module
    for name in names:
        sys.modules.pop(name, None)
    sys.modules.update(saved)


class Cli:
    def __init__(self, stub: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.stub, self.capsys = stub, capsys
        _stub = sys.modules["_stub"]
        self.exit = _stub.StubExit
        host = _stub.Host.__new__(_stub.Host)
        host.name, host.state_dir, host.cluster_root = "cp-1", tmp_path / "state", tmp_path / "clusters"
        host.settings, host.record_extra, host.line = {}, {}, ""
        self.host = host
        self.cluster_file = host.cluster_root / _stub._safe(ENDPOINT) / "cluster.json"
        self.cluster_file.parent.mkdir(parents=True)
        cluster = make_cluster()
        cluster.update(adminKey="KEY", clientCertificates={"CERT": time.time() + 3600})
        self.cluster_file.write_text(json.dumps(cluster))
        self.kubeconfig = tmp_path / "admin.conf"
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "clusters": [{"cluster": {"server": f"https://{ENDPOINT}"}}],
                    "users": [{"user": {"client-key-data": "KEY", "client-certificate-data": "CERT"}}],
                }
            )
        )
        self.dir = tmp_path

    def __call__(self, *argv: str, stdin: str = "") -> tuple[int, str, str]:
        self.capsys.readouterr()
        sys.stdin = io.StringIO(stdin)
        try:
            rc = self.stub.kubectl(self.host, ["--kubeconfig", str(self.kubeconfig), *argv])
            message = ""
        except self.exit as exit_:
            rc, message = exit_.code, exit_.message
        finally:
            sys.stdin = sys.__stdin__
        out, err = self.capsys.readouterr()
        return rc, out, err + message

    def cluster(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.cluster_file.read_text())
        return data

    def write(self, name: str, *documents: dict[str, Any]) -> str:
        path = self.dir / name
        path.write_text(yaml.safe_dump_all(documents))
        return str(path)


@pytest.fixture
def cli(stub: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(stub, tmp_path, capsys)


def test_the_acceptance_steps_commands_end_to_end(cli: Cli) -> None:
    objects = cli.write("objects.yaml", namespace(), *kueue_objects(), runtime())
    rc, out, err = cli("apply", "-f", objects)
    assert (rc, err) == (0, "")
    assert out.splitlines()[0] == f"namespace/{NS} created"
    rc, out, _ = cli("apply", "-f", objects)
    assert rc == 0 and all(line.endswith(" unchanged") for line in out.splitlines())

    job_file = cli.write("job.yaml", job(labels={ao.QUEUE_LABEL: "acceptance"}))
    assert cli("-n", NS, "delete", "job", "acceptance-gpu-1", "--ignore-not-found") == (0, "", "")
    assert cli("apply", "-f", job_file) == (0, "job.batch/acceptance-gpu-1 created\n", "")
    state = '-o=jsonpath={.status.conditions[?(@.status=="True")].type}'
    jsonpath = 'jsonpath={.status.conditions[?(@.status=="True")].type}'
    assert cli("-n", NS, "get", "job", "acceptance-gpu-1", "-o", jsonpath) == (0, "SuccessCriteriaMet Complete", "")
    assert cli("get", "job", "acceptance-gpu-1", "-n", NS, "-o", jsonpath)[1] == "SuccessCriteriaMet Complete"
    assert cli("get", "job", "acceptance-gpu-1", "-n", NS, state)[1] == "SuccessCriteriaMet Complete"
    rc, out, _ = cli("-n", NS, "logs", "job/acceptance-gpu-1", "-c", "dcgm-diag")
    assert rc == 0 and json.loads(out)["DCGM Diagnostic"]
    rc, out, _ = cli("-n", NS, "logs", "job/acceptance-gpu-1", "-c", "nccl-loopback")
    assert parse_all_reduce(out).largest_size_busbw_gbps == pytest.approx(360.0, abs=0.01)
    assert cli("-n", NS, "delete", "job", "acceptance-gpu-1") == (0, 'job.batch "acceptance-gpu-1" deleted\n', "")
    assert cli("-n", NS, "get", "job", "acceptance-gpu-1", "-o", jsonpath) == (
        1,
        "",
        'Error from server (NotFound): jobs.batch "acceptance-gpu-1" not found',
    )
    assert cli("-n", NS, "delete", "job", "acceptance-gpu-1")[2] == (
        'Error from server (NotFound): jobs.batch "acceptance-gpu-1" not found'
    )

    assert cli("apply", "-f", "-", stdin=yaml.safe_dump(train_job()))[1] == (
        "trainjob.trainer.kubeflow.org/all-reduce-h100 created\n"
    )
    assert cli("-n", NS, "get", "trainjob", "all-reduce-h100", "-o", jsonpath) == (0, "Complete", "")
    rc, out, _ = cli("-n", NS, "logs", "-l", LAUNCHER, "-c", "node", "--tail=-1")
    assert rc == 0 and parse_all_reduce(out).largest_size_busbw_gbps == pytest.approx(270.0, abs=0.01)
    assert cli("-n", NS, "delete", "trainjob", "all-reduce-h100", "--ignore-not-found")[1] == (
        'trainjob.trainer.kubeflow.org "all-reduce-h100" deleted\n'
    )
    assert cli("-n", NS, "logs", "-l", LAUNCHER, "-c", "node", "--tail=-1") == (
        0,
        "",
        f"No resources found in {NS} namespace.\n",
    )
    runs = cli.cluster()["acceptance"]["runs"]
    assert [(r["kind"], r.get("node"), r.get("nodes"), r.get("dcgmLevel")) for r in runs] == [
        ("Job", "gpu-1", None, 2),
        ("TrainJob", None, ["gpu-1", "gpu-2"], None),
    ]


def test_taint_commands_and_the_taints_jsonpath(cli: Cli) -> None:
    taint = "mlcluster.io/acceptance=failed:NoSchedule"
    assert cli("taint", "nodes", "gpu-1", taint, "--overwrite") == (0, "node/gpu-1 modified\n", "")
    assert cli("taint", "nodes", "gpu-1", taint) == (
        1,
        "",
        "error: node gpu-1 already has mlcluster.io/acceptance taint(s) with same effect(s) and --overwrite is false",
    )
    rc, out, _ = cli("get", "node", "gpu-1", "-o", "jsonpath={.spec.taints}")
    assert rc == 0 and json.loads(out)[0] == {
        "effect": "NoSchedule",
        "key": "mlcluster.io/acceptance",
        "value": "failed",
    }
    assert cli("taint", "nodes", "gpu-1", "mlcluster.io/acceptance:NoSchedule-") == (0, "node/gpu-1 untainted\n", "")
    assert cli("taint", "nodes", "gpu-1", "mlcluster.io/acceptance:NoSchedule-")[2] == (
        'error: taint "mlcluster.io/acceptance:NoSchedule" not found'
    )
    assert (
        cli("taint", "nodes", "nope", taint, "--overwrite")[2] == 'Error from server (NotFound): nodes "nope" not found'
    )
    # What the stub did before stays: nodes by name, labels, cordon.
    assert cli("get", "node", "gpu-1", "-o", "jsonpath={.spec.unschedulable}") == (0, "", "")
    assert cli("cordon", "gpu-1") == (0, "node/gpu-1 cordoned\n", "")
    assert cli("get", "nodes", "-o", "name")[1] == "node/cp-1\nnode/gpu-1\nnode/gpu-2\n"


def test_logs_of_a_job_that_never_started(cli: Cli) -> None:
    cli("apply", "-f", cli.write("objects.yaml", namespace()))
    cli("apply", "-f", cli.write("job.yaml", job(node="gpu-9")))
    rc, _, err = cli("-n", NS, "logs", "job/acceptance-gpu-1", "-c", "nccl-loopback")
    assert rc == 1
    assert err.startswith('Error from server (BadRequest): container "nccl-loopback" in pod "acceptance-gpu-1-')
    assert err.endswith(" is waiting to start: PodInitializing")
    rc, _, err = cli(
        "apply",
        "-f",
        cli.write("deploy.yaml", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}),
    )
    assert rc == 1 and 'no matches for kind "Deployment" in version "apps/v1"' in err


NGC_PYTORCH = "nvcr.io/nvidia/pytorch:26.01-py3"


@pytest.mark.parametrize(
    ("command", "completes"),
    [
        ("exec /usr/sbin/sshd -De -p 2222", False),  # the image has no sshd (NVIDIA/cloudai#720): crash-loop
        (render.SSHD_COMMAND, True),  # installs openssh-server first, as NVIDIA's CRE and cloudai do
    ],
)
def test_the_ngc_pytorch_image_runs_sshd_only_once_a_node_pod_installs_it(command: str, completes: bool) -> None:
    cluster = ready(with_kueue=True)
    patched = runtime()
    for rjob in patched["spec"]["template"]["spec"]["replicatedJobs"]:
        for container in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            container["image"] = NGC_PYTORCH
            if rjob["name"] == "node":
                container["command"] = ["/bin/sh", "-c", command]
    apply(cluster, patched)
    apply(cluster, train_job())
    assert (conditions(cluster, "TrainJob", "all-reduce-h100") == "Complete") == completes


def test_the_rendered_mpi_test_uses_only_what_the_ngc_pytorch_image_ships_or_installs() -> None:
    from components.config.load import spec_from_values

    from .rendered_stack import stack_values

    values, secret = stack_values("onprem")
    spec = spec_from_values(values, lambda key: key in secret)
    rendered = render.training_runtime(spec.acceptance, spec.nodes)
    group = render.node_groups(spec.nodes, spec.kueue, spec.acceptance.nodes)[0]
    job = render.train_job(spec.acceptance, spec.kueue, spec.network, group, 1200)
    for rjob_name in ("node", "launcher"):
        pod = ao._patched_pod(job, rendered, rjob_name)
        assert pod is not None and pod["containers"][0]["image"] == NGC_PYTORCH
        assert ao._image_problem(pod, "node") is None, rjob_name
    launcher = ao._patched_pod(job, rendered, "launcher")
    assert launcher is not None
    node = dict(launcher["containers"][0], command=job["spec"]["trainer"]["command"])
    assert ao._image_problem({"containers": [node]}, "node") is None
    assert {render.MPIRUN, render.ALL_REDUCE} <= ao.NGC_PYTORCH_BINARIES


# ---- drain: kubectl waits for the evicted pods to go (kubernetes/kubectl pkg/drain/drain.go, v0.35.0) ------------


def _with_pods(cli: Cli, pods: dict[str, dict[str, Any]], ready: bool = True) -> None:
    cluster = cli.cluster()
    cluster["pods"] = pods
    cluster["nodes"]["gpu-1"]["ready"] = ready
    cli.cluster_file.write_text(json.dumps(cluster))


@pytest.mark.parametrize(
    ("pods", "waits"),
    [
        ({}, 0.0),
        ({"quick": {"node": "gpu-1"}}, 0.0),
        # Seen gone at kubectl's next once-a-second check; the slowest pod sets the wait (evictions run together).
        ({"slow": {"node": "gpu-1", "stopSeconds": 1.2}, "quick": {"node": "gpu-1"}}, 2.0),
        # The kubelet kills what still runs at the end of the grace period.
        ({"stubborn": {"node": "gpu-1", "stopSeconds": 600, "terminationGracePeriodSeconds": 1}}, 1.0),
        # A pod on another node is not waited for.
        ({"elsewhere": {"node": "gpu-2", "stopSeconds": 600}}, 0.0),
    ],
)
def test_drain_waits_until_the_evicted_pods_have_stopped(
    cli: Cli, pods: dict[str, dict[str, Any]], waits: float
) -> None:
    _with_pods(cli, pods)
    started = time.monotonic()
    rc, out, err = cli("drain", "gpu-1", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=10m")
    took = time.monotonic() - started
    assert (rc, err) == (0, ""), err
    assert waits <= took < waits + 0.5, took
    on_node = sorted(n for n, p in pods.items() if p["node"] == "gpu-1")
    assert [line for line in out.splitlines() if line.startswith("evicting")] == [
        f"evicting pod default/{n}" for n in on_node
    ]
    assert out.splitlines()[-1] == "node/gpu-1 drained"
    assert sorted(cli.cluster()["pods"]) == sorted(n for n in pods if n not in on_node)


def test_drain_gives_up_at_its_timeout_as_kubectl_reports_it(cli: Cli) -> None:
    _with_pods(cli, {"slow": {"node": "gpu-1", "stopSeconds": 5}})
    started = time.monotonic()
    rc, _, err = cli("drain", "gpu-1", "--ignore-daemonsets", "--timeout=1s")
    assert rc == 1 and 1.0 <= time.monotonic() - started < 1.5
    waited = 'error when waiting for pod "slow" in namespace "default" to terminate: context deadline exceeded'
    assert err.splitlines() == [
        f'error: unable to drain node "gpu-1" due to error: {waited}, continuing command...',
        "There are pending nodes to be drained:",
        " gpu-1",
        f"error: {waited}",
    ]
    assert "slow" in cli.cluster()["pods"], "a pod that did not stop was taken off the node"


def test_a_not_ready_nodes_drain_never_sees_its_pods_go(cli: Cli) -> None:
    _with_pods(cli, {"work": {"node": "gpu-1"}}, ready=False)
    rc, _, err = cli("drain", "gpu-1", "--ignore-daemonsets", "--timeout=1m")
    assert rc == 1 and err.endswith(
        'error: error when waiting for pod "work" in namespace "default" to terminate: context deadline exceeded'
    )
    for no_limit in ([], ["--timeout=0s"]):
        rc, _, err = cli("drain", "gpu-1", "--ignore-daemonsets", *no_limit)
        assert rc == 1 and "without --timeout never ends" in err


def test_a_zero_timeout_is_no_limit(cli: Cli) -> None:
    _with_pods(cli, {"slow": {"node": "gpu-1", "stopSeconds": 1}})
    rc, out, err = cli("drain", "gpu-1", "--ignore-daemonsets", "--timeout=0s")
    assert (rc, err) == (0, "") and out.endswith("node/gpu-1 drained\n")


@pytest.mark.parametrize(
    ("text", "seconds"), [("10m", 600.0), ("1h30m", 5400.0), ("90s", 90.0), ("500ms", 0.5), ("1.5s", 1.5)]
)
def test_drain_timeouts_read_as_go_durations(stub: Any, text: str, seconds: float) -> None:
    assert stub._go_duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["10", "ten minutes", "10x", "5m junk"])
def test_a_timeout_go_would_refuse_is_refused(stub: Any, text: str) -> None:
    with pytest.raises(sys.modules["_stub"].StubExit, match="invalid duration"):
        stub._go_duration_seconds(text)
