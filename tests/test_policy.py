"""The policy pack, without the CLI: each policy passes on the example stacks and has a violating case.

Stacks run on the mock engine and each policy's validate gets the arguments the engine would pass
(tests/policy_harness.py). Where config validation already refuses the bad input (a chart version range),
the violating case is a resource as another program or a future layer could register it.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from components.plan.policies import Outcome, Resource, evaluate, pack_policies, program_resources, synthetic

from .conftest import PROJECT, as_config, stack_values

COMMAND = "command:remote:Command"
PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


def program(stack: str, change: Callable[[dict[str, Any]], None] | None = None) -> list[Resource]:
    values, secret = stack_values(stack)
    if "ssh" in values:
        values["ssh"]["privateKey"] = PRIVATE_KEY  # a real-looking key, so a leak would be seen
    if change is not None:
        change(values)
    return program_resources(as_config(values), [f"mlcluster:{k}" for k in secret], stack=stack)


POLICIES = pack_policies()


def check(name: str, resources: list[Resource], config: dict[str, Any] | None = None) -> Outcome:
    return evaluate(POLICIES[name], resources, config)


@functools.cache
def onprem() -> tuple[Resource, ...]:
    return tuple(program("onprem"))


def with_resources(*extra: Resource) -> Callable[[], list[Resource]]:
    return lambda: [*onprem(), *extra]


def changed(change: Callable[[dict[str, Any]], None]) -> Callable[[], list[Resource]]:
    return lambda: program("onprem", change)


def setting(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(values: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = values
        for part in parents:
            target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
        target[last] = value

    return apply


def no_host_keys(values: dict[str, Any]) -> None:
    values["ssh"]["insecureIgnoreHostKeys"] = True
    values["nodes"][3].pop("hostKey")


def release(version: str, chart: str = "kueue") -> Resource:
    props = {"name": chart, "chart": chart, "version": version, "namespace": chart, "values": {}}
    return synthetic("kubernetes:helm.sh/v3:Release", chart, props)


def workload(kind: str, pod: dict[str, Any]) -> Resource:
    spec = pod if kind == "Pod" else {"template": {"spec": pod}}
    return synthetic(f"kubernetes:apps/v1:{kind}", kind.lower(), {"apiVersion": "apps/v1", "kind": kind, "spec": spec})


def container(**resources: Any) -> dict[str, Any]:
    return {"name": "train", "image": "registry.example/trainer:1", "resources": resources}


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def init_step(protect: bool) -> Resource:
    props = {"create": "# mlcluster step: kubeadm-init\nkubeadm init --config /etc/kubernetes/kubeadm.yaml"}
    return synthetic(COMMAND, "lab-1-kubeadm-init", props, protect=protect)


def kueue(kind: str, name: str, spec: dict[str, Any]) -> Resource:
    props = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": {"name": name}, "spec": spec}
    return synthetic(f"kubernetes:kueue.x-k8s.io/v1beta2:{kind}", name, props)


H100 = kueue("ResourceFlavor", "h100", {"nodeLabels": {"mlcluster.io/gpu-model": "H100-SXM-80GB"}})


def cluster_queue(name: str, gpus: int | str, flavor: str = "h100") -> Resource:
    resources = [{"name": "cpu", "nominalQuota": 64}, {"name": "nvidia.com/gpu", "nominalQuota": gpus}]
    group = {"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": flavor, "resources": resources}]}
    return kueue("ClusterQueue", name, {"resourceGroups": [group]})


# (policy, case, resources, expected violation substring or None for "passes")
CASES: list[tuple[str, str, Callable[[], list[Resource]], str | None]] = [
    ("ssh-host-keys-pinned", "on-prem example", onprem, None),
    (
        "ssh-host-keys-pinned",
        "insecureIgnoreHostKeys",
        changed(no_host_keys),
        "cpu-1-prepare: SSH to 10.20.0.21 accepts any host key",
    ),
    ("chart-versions-pinned", "on-prem example", onprem, None),
    ("chart-versions-pinned", "a range", with_resources(release("~0.19")), "kueue: chart kueue has version '~0.19'"),
    ("chart-versions-pinned", "no version", with_resources(release("")), "chart kueue has version ''"),
    ("gpu-workloads-have-gpu-limits", "on-prem example", onprem, None),
    (
        "gpu-workloads-have-gpu-limits",
        "limited GPU job, tolerating DaemonSet",
        with_resources(
            workload(
                "Deployment", {"tolerations": [GPU_TOLERATION], "containers": [container(limits={"nvidia.com/gpu": 8})]}
            ),
            workload("DaemonSet", {"tolerations": [GPU_TOLERATION], "containers": [container()]}),
        ),
        None,
    ),
    (
        "gpu-workloads-have-gpu-limits",
        "TrainJob: pods patched onto GPU nodes, GPUs per node on the trainer; 1 == 1.0 == '1'",
        with_resources(
            synthetic(
                "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
                "train",
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "spec": {
                        "runtimePatches": [
                            {
                                "trainingRuntimeSpec": {
                                    "template": {
                                        "spec": {"tolerations": [GPU_TOLERATION], "containers": [{"name": "node"}]}
                                    }
                                }
                            }
                        ],
                        "trainer": {
                            "resourcesPerNode": {"requests": {"nvidia.com/gpu": 1.0}, "limits": {"nvidia.com/gpu": "1"}}
                        },
                    },
                },
            )
        ),
        None,
    ),
    (
        "gpu-workloads-have-gpu-limits",
        "TrainJob asking GPUs per node as requests only",
        with_resources(
            synthetic(
                "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
                "train",
                {"kind": "TrainJob", "spec": {"trainer": {"resourcesPerNode": {"requests": {"nvidia.com/gpu": 2}}}}},
            )
        ),
        "train: spec.trainer.resourcesPerNode: requests nvidia.com/gpu: 2 without the same limit",
    ),
    (
        "gpu-workloads-have-gpu-limits",
        "request without limit",
        with_resources(workload("Deployment", {"containers": [container(requests={"nvidia.com/gpu": 1})]})),
        "requests nvidia.com/gpu: 1 without the same limit",
    ),
    (
        "gpu-workloads-have-gpu-limits",
        "on GPU nodes without a GPU",
        with_resources(
            workload(
                "StatefulSet",
                {"nodeSelector": {"mlcluster.io/gpu-model": "H100-SXM-80GB"}, "containers": [container()]},
            )
        ),
        "runs on GPU nodes but no container has an nvidia.com/gpu limit",
    ),
    (
        "gpu-workloads-have-gpu-limits",
        "LLMInferenceService: the template tolerates the GPU taint but asks no GPU",
        with_resources(
            synthetic(
                "kubernetes:serving.kserve.io/v1alpha2:LLMInferenceService",
                "llm",
                {
                    "kind": "LLMInferenceService",
                    "spec": {
                        "template": {"tolerations": [GPU_TOLERATION], "containers": [{"name": "main"}]},
                        "router": {"scheduler": {"template": {"tolerations": [GPU_TOLERATION]}}},
                    },
                },
            )
        ),
        "spec.template: runs on GPU nodes but no container has an nvidia.com/gpu limit",
    ),
    ("kubelet-thresholds-sane", "on-prem example", onprem, None),
    (
        "kubelet-thresholds-sane",
        "high above 95",
        changed(setting("kubelet.imageGCHighThresholdPercent", 97)),
        "image GC high threshold 97%",
    ),
    (
        "kubelet-thresholds-sane",
        "flags: low not below high",
        with_resources(
            synthetic(
                COMMAND,
                "w-1-kubelet",
                {"create": 'KUBELET_EXTRA_ARGS="--image-gc-low-threshold 85 --image-gc-high-threshold=80"'},
            )
        ),
        "w-1-kubelet: image GC low threshold 85% is not below the high threshold 80%",
    ),
    ("no-secret-in-plain-input", "on-prem example with a real-looking key", onprem, None),
    (
        "no-secret-in-plain-input",
        "bootstrap token in a node label",
        changed(setting("nodes.4.labels", {"join-token": "abcdef.0123456789abcdef"})),
        "cpu-2-kubeadm-join: input create holds what looks like a kubeadm bootstrap token",
    ),
    (
        "no-secret-in-plain-input",
        "private key in Helm values",
        with_resources(
            synthetic("kubernetes:helm.sh/v3:Release", "leaky", {"values": {"git": {"sshKey": PRIVATE_KEY}}})
        ),
        "leaky: input values.git.sshKey holds what looks like a private key",
    ),
    ("first-control-plane-protected", "on-prem example", onprem, None),
    (
        "first-control-plane-protected",
        "unprotected init",
        lambda: [init_step(protect=False)],
        "lab-1-kubeadm-init is not protected",
    ),
    ("first-control-plane-protected", "two inits", with_resources(init_step(protect=True)), "2 kubeadm init steps"),
    ("kueue-quotas-within-inventory", "no ClusterQueue", onprem, None),
    (
        "kueue-quotas-within-inventory",
        "32 of 32 H100",
        with_resources(H100, cluster_queue("team-a", 24), cluster_queue("team-b", "8")),
        None,
    ),
    (
        "kueue-quotas-within-inventory",
        "40 of 32 H100",
        with_resources(H100, cluster_queue("team-a", 24), cluster_queue("team-b", 16)),
        "ClusterQueues give flavor h100 40 nvidia.com/gpu of nominal quota, but its nodes have 32",
    ),
    (
        "kueue-quotas-within-inventory",
        "flavor selecting no node",
        with_resources(
            kueue("ResourceFlavor", "a100", {"nodeLabels": {"mlcluster.io/gpu-model": "A100"}}),
            cluster_queue("team-a", 1, "a100"),
        ),
        "flavor a100 1 nvidia.com/gpu of nominal quota, but its nodes have 0",
    ),
]


@pytest.mark.parametrize(("policy", "case", "resources", "expected"), CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_policy_case(policy: str, case: str, resources: Callable[[], list[Resource]], expected: str | None) -> None:
    outcome = check(policy, resources())
    assert outcome.not_applicable is None, outcome.not_applicable
    if expected is None:
        assert outcome.violations == [], outcome.violations
    else:
        assert any(expected in v for v in outcome.violations), outcome.violations


def test_every_policy_has_a_passing_and_a_violating_case() -> None:
    passing = {c[0] for c in CASES if c[3] is None}
    violating = {c[0] for c in CASES if c[3] is not None}
    assert passing == violating == set(POLICIES), (set(POLICIES) - passing, set(POLICIES) - violating)


def test_policies_see_what_the_engine_sends() -> None:
    """Secrets reach policies revealed (as the analyzer deserializes them); options come from the request."""
    resources = {r.name: r for r in onprem()}
    init = resources["cp-1-kubeadm-init"]
    assert init.protect
    from components.plan.policies import resource_args

    args = resource_args(resources["gpu-1-prepare"])
    assert args.props["connection"]["privateKey"] == PRIVATE_KEY
    assert args.props["connection"]["hostKey"].startswith("ssh-ed25519 ")
    assert args.provider is None and args.opts.parent is not None


def test_cloud_stack_passes_and_node_policies_do_not_apply() -> None:
    resources = program("cloud")
    for name in POLICIES:
        outcome = check(name, resources)
        assert outcome.violations == [], (name, outcome.violations)
    assert check("first-control-plane-protected", resources).not_applicable
    # Without a declared GPU inventory (the example declares its L4 pool) the quota check needs the policy config.
    queues = [*program("cloud", undeclared_inventory), H100, cluster_queue("team-a", 8)]
    assert "gpuInventory" in str(check("kueue-quotas-within-inventory", queues).not_applicable)
    configured = check("kueue-quotas-within-inventory", queues, {"gpuInventory": {"h100": 4}})
    assert configured.violations == [
        "stack: ClusterQueues give flavor h100 8 nvidia.com/gpu of nominal quota, but its nodes have 4"
    ]


def undeclared_inventory(values: dict[str, Any]) -> None:
    values.pop("workloads")  # they need a team queue
    values["kueue"] = {"enabled": True}


def declare_h100s(values: dict[str, Any]) -> None:
    values.pop("workloads")  # they would need a team queue of their own
    values["kueue"] = {
        "enabled": True,
        "inventory": [{"model": "H100-80GB", "count": 16}],
        "teams": [{"name": "llm", "quotas": [{"flavor": "h100-80gb", "nominal": {"nvidia.com/gpu": 16}}]}],
    }


def test_a_declared_kueue_inventory_is_what_the_policy_checks_quotas_against() -> None:
    resources = program("cloud", declare_h100s)
    assert check("kueue-quotas-within-inventory", resources) == Outcome([], None)
    # A quota the stack did not declare GPUs for (added beside the program's) is over its declared 16.
    over = check("kueue-quotas-within-inventory", [*resources, cluster_queue("extra", 8, "h100-80gb")])
    assert over.violations == [
        "stack: ClusterQueues give flavor h100-80gb 24 nvidia.com/gpu of nominal quota, but its nodes have 16"
    ]
    # The policy config is the operator's word on the cluster and wins over the declaration.
    assert check("kueue-quotas-within-inventory", resources, {"gpuInventory": {"h100-80gb": 8}}).violations
    # Without the flavor's annotation the policy has no inventory to read.
    stripped = [r for r in resources if not r.type.endswith(":ResourceFlavor")]
    stripped += [kueue("ResourceFlavor", "h100-80gb", {"nodeLabels": {"mlcluster.io/gpu-model": "H100-80GB"}})]
    assert "kueue.inventory" in str(check("kueue-quotas-within-inventory", stripped).not_applicable)


def test_policy_pack_files() -> None:
    pack = yaml.safe_load((PROJECT / "policy" / "PulumiPolicy.yaml").read_text())
    assert pack["runtime"]["name"] == "python" and pack["version"]
    pinned = (PROJECT / "policy" / "requirements.txt").read_text().split()
    dev = (PROJECT / "requirements-dev.txt").read_text().split()
    assert [p for p in pinned if p.startswith("pulumi-policy==")] == [p for p in dev if p.startswith("pulumi-policy==")]
    assert "PolicyPack(" in (PROJECT / "policy" / "__main__.py").read_text()
    assert sorted(POLICIES) == sorted(p.name for p in __import__("mlcluster_policies").POLICIES)


def test_review_docs_list_every_policy() -> None:
    page = (PROJECT / "docs" / "review.md").read_text()
    table = page[page.index("| policy | kind | checks |") :].split("\n\n")[0]
    documented = {line.split("`")[1] for line in table.splitlines()[2:]}
    assert documented == set(POLICIES)


def test_preview_workflow_template() -> None:
    template = PROJECT / "docs" / "ci" / "preview.yml"
    workflow = yaml.safe_load(template.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert set(triggers) == {"pull_request"}, "the template reviews pull requests only"
    assert workflow["permissions"]["pull-requests"] == "write"
    steps = workflow["jobs"]["preview"]["steps"]
    scripts = "\n".join(step.get("run", "") for step in steps)
    assert "pulumi preview --diff --policy-pack policy --save-plan plan.json" in scripts
    assert "python -m components.plan --stack" in scripts and "--compare" in scripts
    assert "gh pr comment" in scripts and "--body-file comment.md" in scripts
    assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in steps)
    # The ecosystem's CLI install; a runner that reaches the API server; the deployed stack's outputs for the
    # offline plan (the previous deployment it reads); the moment the saved plan stops applying, in the comment.
    assert any(step.get("uses", "").startswith("pulumi/actions@") for step in steps)
    assert "self-hosted" in workflow["jobs"]["preview"]["runs-on"]
    assert 'pulumi stack output --stack "$STACK" --json' in scripts and "--stack-outputs" in scripts
    assert "applies until" in scripts
    # A template for users: it must not run in this repository's CI.
    assert not (PROJECT / ".github" / "workflows" / "preview.yml").exists()


def policy_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "components.plan.policies", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_offline_policy_cli(tmp_path) -> None:
    clean = policy_cli("--stack", "onprem")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert all(f"ok   {name}" in clean.stdout for name in POLICIES if name != "kueue-quotas-within-inventory")
    stack = yaml.safe_load((PROJECT / "stacks" / "Pulumi.onprem.yaml").read_text())
    stack["config"]["mlcluster:kubelet"]["imageGCHighThresholdPercent"] = 97
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump(stack))
    failing = policy_cli("--stack-file", str(bad))
    assert failing.returncode == 1
    assert "FAIL kubelet-thresholds-sane: " in failing.stdout
    assert "cp-1-kubeadm-init: image GC high threshold 97%" in failing.stdout
    assert "ok   ssh-host-keys-pinned" in failing.stdout
    advisory = tmp_path / "policy-config.json"
    advisory.write_text(
        '{"kubelet-thresholds-sane": "advisory", "chart-versions-pinned": {"enforcementLevel": "disabled"}}'
    )
    reported = policy_cli("--stack-file", str(bad), "--config", str(advisory))
    assert reported.returncode == 0 and "FAIL kubelet-thresholds-sane: " in reported.stdout
    assert "chart-versions-pinned" not in reported.stdout


def declare_h100s_in_racks(values: dict[str, Any]) -> None:
    declare_h100s(values)
    values["kueue"]["topology"] = {
        "levels": ["block"],
        "nodeLabels": {"block": "cloud.google.com/gce-topology-block"},
        "trainingLevel": "block",
    }


def test_the_policy_configs_inventory_names_a_topology_flavor_by_the_quotas_name() -> None:
    """With a topology the flavor's object is `<model>-<digest>` (components/render/kueue.py, named_after); the
    operator's gpuInventory names it as the quotas do, by its mlcluster.io/flavor label."""
    resources = program("cloud", declare_h100s_in_racks)
    flavor = next(r for r in resources if r.type.endswith(":ResourceFlavor") and "h100" in r.name)
    assert str(flavor.wire["metadata"]["name"]).startswith("h100-80gb-")
    assert check("kueue-quotas-within-inventory", resources) == Outcome([], None)
    refused = check("kueue-quotas-within-inventory", resources, {"gpuInventory": {"h100-80gb": 8}})
    assert refused.violations and "16 nvidia.com/gpu of nominal quota, but its nodes have 8" in refused.violations[0]
