"""Every warning the program knows reaches every place the review is read: the offline plan's output, plan.json and
the plan diff (which the PR comment prints), once each, with its key path (issue: warnings vanish).

Each case changes the lab example (stacks/Pulumi.lab.yaml) as little as triggers one warning. While the cases
run, every call of the warning channels records where in components/ it came from; the sites the cases reached,
plus those only a deployed cluster can trigger (listed with the test that covers them), must be every warning
site in components/ — a new site without a case fails here.
"""

from __future__ import annotations

import ast
import base64
import copy
import importlib
import json
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import warnings as channel
from components.config.schema import Problems
from components.plan.__main__ import main as plan_main

from .conftest import PROJECT
from .python_source import parse_python_files

pytestmark = pytest.mark.xdist_group("warnings")  # the cases once: the site check reads what they reached

COMPONENTS = PROJECT / "components"
LAB = PROJECT / "stacks" / "Pulumi.lab.yaml"


def _worker(index: int) -> dict[str, Any]:
    """A worker of its own address and (well-formed) host key."""
    blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + index.to_bytes(32, "big")
    return {
        "name": f"w-{index}",
        "host": f"192.168.2.{index + 1}",
        "roles": ["worker"],
        "hostKey": f"ssh-ed25519 {base64.b64encode(blob).decode()}",
    }


CASES: dict[str, tuple[dict[str, Any], str]] = {
    # name: (config keys merged into the lab stack, None to leave one out; the warning's start)
    "a second default StorageClass on a managed cluster": (
        {
            "cluster": {
                "mode": "existing",
                "provider": "aks",
                "kubeconfig": {"secure": "v1:PLACEHOLDER-kubeconfig"},
            },
            "ssh": None,
            "nodes": None,
        },
        "mlcluster:storage.enabled: cluster.provider aks brings a default StorageClass",
    ),
    "prefill/decode without RDMA": (
        {
            "kserve": {
                "enabled": True,
                "llm": {"endpoints": [{"name": "chat", "model": "hf://Qwen/Qwen2.5-0.5B", "prefill": {}}]},
            }
        },
        "mlcluster:kserve.llm.endpoints[0].prefill: moves each request's KV cache",
    ),
    "knative costs": (
        {"kserve": {"enabled": True, "deploymentMode": "Knative"}},
        "mlcluster:kserve.deploymentMode: ",
    ),
    "an HPA on a custom metric with no adapter": (
        {
            "kserve": {
                "enabled": True,
                "deployments": [
                    {
                        "name": "llm",
                        "image": "registry.example/llm:1",
                        "gpus": 1,
                        "autoscaling": {"metric": "pods", "metricName": "queue_length", "target": 4},
                    }
                ],
            },
            "monitoring": {"enabled": False},
        },
        "mlcluster:kserve.deployments[0].autoscaling.metric: ",
    ),
    "no metrics-server for a cpu HPA": (
        {
            "kserve": {
                "enabled": True,
                "metricsServer": False,
                "deployments": [
                    {"name": "web", "image": "registry.example/web:1", "autoscaling": {"metric": "cpu", "target": 70}}
                ],
            }
        },
        "mlcluster:kserve.metricsServer: ",
    ),
    "MIG partitions offered whole": (
        {"nodes": [{"gpu": {"count": 1, "model": "A100-SXM4-80GB", "migConfig": "all-1g.10gb"}}]},
        "mlcluster:nodes[0].gpu.migConfig: all-1g.10gb partitions lab-1's GPUs",
    ),
    "a MIG layout Kueue cannot check": (
        {
            "nodes": [{"gpu": {"count": 1, "model": "A100-SXM4-80GB", "migConfig": "all-balanced"}}],
            "gpuOperator": {"enabled": True, "migStrategy": "mixed"},
            "kueue": {"enabled": True},
        },
        'mlcluster:nodes[0].gpu.migConfig: "all-balanced" is not a single-profile',
    ),
    "GPUs in no team's quota": (
        {
            "kueue": {
                "enabled": True,
                "teams": [{"name": "research", "quotas": [{"flavor": "l4-24gb", "nominal": {"cpu": "4"}}]}],
            }
        },
        "mlcluster:kueue.teams: 1 of the 1",
    ),
    "a fair-sharing weight without fair sharing": (
        {
            "kueue": {
                "enabled": True,
                "teams": [
                    {
                        "name": "research",
                        "fairSharingWeight": "2",
                        "quotas": [{"flavor": "l4-24gb", "nominal": {"nvidia.com/gpu": "1"}}],
                    }
                ],
            }
        },
        "mlcluster:kueue.teams[0].fairSharingWeight: ",
    ),
    "Prometheus with no StorageClass": (
        {"monitoring": {"enabled": True}, "storage": {"enabled": False}},
        "mlcluster:monitoring.storageSize: ",
    ),
    "GPU dashboards without DCGM": (
        {"monitoring": {"enabled": True}, "gpuOperator": {"enabled": True, "dcgmExporter": False}},
        "mlcluster:gpuOperator.dcgmExporter: is false",
    ),
    "a gang scheduler that never evicts a gang (an AI-conformance MUST given up)": (
        {"kueue": {"enabled": True, "waitForPodsReady": {"enabled": False}}},
        "mlcluster:kueue.waitForPodsReady.enabled: gives up the Kubernetes AI Conformance MUST gang_scheduling",
    ),
    "a pull deadline containerd 1.6 cannot keep": (
        {"kubelet": {"containerdVersion": "1.6"}},
        "mlcluster:kubelet.imagePullProgressDeadline: (30m) cannot be honoured",
    ),
    "GPUs held outside Kueue beside a full quota": (
        {
            "kueue": {
                "enabled": True,
                "teams": [{"name": "research", "quotas": [{"flavor": "l4-24gb", "nominal": {"nvidia.com/gpu": "1"}}]}],
            },
            "kserve": {
                "enabled": True,
                "deployments": [{"name": "tgi", "image": "registry.example/tgi:1", "gpus": 1}],
            },
        },
        "mlcluster:kueue.teams: nominal nvidia.com/gpu quotas promise 1 of the 1 GPUs, but 1 are held outside",
    ),
    "a cohort over-committed": (
        {
            "kueue": {
                "enabled": True,
                "cohort": "lab",
                "teams": [{"name": "research", "quotas": [{"flavor": "l4-24gb", "nominal": {"nvidia.com/gpu": "2"}}]}],
            }
        },
        "mlcluster:kueue.teams: nominal nvidia.com/gpu quotas of flavor l4-24gb add up to 2",
    ),
    "a GPU on a control-plane-only node": (
        {
            "nodes": [
                {"roles": ["control-plane"]},
                {
                    "name": "lab-2",
                    "host": "192.168.1.51",
                    "roles": ["worker"],
                    "hostKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHJlcGxhY2UtYnktc3NoLWtleXNjYW4tb3V0cHV0LWxi",
                },
            ],
            "kueue": {"enabled": True},
        },
        "mlcluster:nodes[0].gpu: is on a control-plane-only node",
    ),
    "GPUDirect RDMA left to a host GPU driver": (
        {
            "network": {"rdma": {"enabled": True, "nics": {"ifNames": ["ibp24s0"]}}},
            "gpuOperator": {"enabled": True, "driver": "preinstalled"},
        },
        "mlcluster:gpuOperator.driver: leaves GPUDirect RDMA to the hosts",
    ),
    "worker batches of one on 101 workers": (
        {
            "nodes": [{}, *(_worker(i) for i in range(101))],
            "kubelet": {"restart": {"maxUnavailableWorkers": "1"}},
        },
        'mlcluster:kubelet.restart.maxUnavailableWorkers: "1" makes 101 worker batches: the first control plane'
        " (lab-1) runs",
    ),
    "more nodes behind a bastion than its lanes": (
        {
            "ssh": {"bastion": {"host": "192.168.9.1", "hostKey": _worker(99)["hostKey"]}},
            "cluster": {"apiAddress": "127.0.0.1:6443"},
            "nodes": [{}, *(_worker(i) for i in range(9))],
        },
        "mlcluster:ssh.bastion.maxStartups: 10 nodes are reached through the bastion and at most 9 steps run through"
        " it at once",
    ),
    "a Kubernetes minor the pinned Calico is not tested against": (
        # 1.36's newest known patch, so that only the support calendar's Calico row speaks.
        {"kubernetesVersion": "1.36.4"},
        "mlcluster:cluster.cni: 1.36 is not among the Kubernetes versions Calico (tigera-operator) 3.30, which"
        " mlcluster installs, is tested against (1.31-1.35; tigera/docs _system-requirements.mdx): it may work,"
        " untested; Calico (tigera-operator) 3.32 is documented for 1.36",
    ),
    "a component version the support calendar has no range for": (
        {"gpuOperator": {"version": "v26.3.2"}},
        "mlcluster:gpuOperator.version: is v26.3.2: mlcluster's support calendar knows the Kubernetes range of NVIDIA"
        " GPU Operator 26.7 only",
    ),
    "a patch behind the newest one the calendar knows": (
        {"kubernetesVersion": "1.35.2"},
        "mlcluster:kubernetesVersion: 1.35.2 is behind 1.35.8, the newest 1.35 patch mlcluster's calendar knows",
    ),
}

AT_UP_ONLY = {
    # Sites only a deployed cluster can trigger, and the test that shows their warning.
    "components/cluster/kubeadm_cluster.py": "tests/test_support_calendar.py (an upgrade from a deployed 1.34.11)",
    "components/cluster/gpu_preflight.py": "tests/test_gpu_operator.py (preflight outputs of a previous up)",
    "components/cluster/certificates.py": "tests/fleet/test_certificates.py (the certificates' dates of a deployment)",
    "components/cluster/acceptance.py": "tests/test_acceptance_render.py (nodes the last up's acceptance failed)",
}


def _sites() -> set[tuple[str, int]]:
    """Every call of a warning channel in components/: `problems.warn(…)`, `warn(…)`, `given(…)`."""
    found = set()
    paths = [p for p in COMPONENTS.rglob("*.py") if p != COMPONENTS / "warnings.py"]
    for path, tree in parse_python_files(paths).items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                owner = getattr(func, "value", None)
                if (name == "warn" and isinstance(owner, ast.Name) and owner.id == "problems") or (
                    isinstance(func, ast.Name) and name in ("warn", "given")
                ):
                    found.add((str(path.relative_to(PROJECT)), node.lineno))
    return found


def _stack_file(tmp_path: Path, change: dict[str, Any]) -> Path:
    document = yaml.safe_load(LAB.read_text())
    config = document["config"]
    for key, value in change.items():
        full = f"mlcluster:{key}"
        if value is None:
            config.pop(full, None)  # the setting left out (a cloud stack has no nodes and no SSH)
        elif key == "nodes":
            nodes = copy.deepcopy(config[full])
            for i, update in enumerate(value):
                if i < len(nodes):
                    nodes[i].update(update)
                else:
                    nodes.append(update)
            config[full] = nodes
        elif isinstance(value, dict) and isinstance(config.get(full), dict):
            config[full] = {**config[full], **value}
        else:
            config[full] = value
    path = tmp_path / "Pulumi.warned.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


AT = ("--at", "2026-12-03T23:59:59Z")
"""Every plan of this module at one moment: compared across midnight, the lab's mint window would differ."""


@pytest.fixture(scope="module")
def lab_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lab") / "plan"
    assert plan_main(["--stack-file", str(LAB), "--out", str(out), *AT]) == 0
    return out


@pytest.fixture(scope="module")
def reached() -> Iterator[set[tuple[str, int]]]:
    """Where in components/ the warnings of this module's cases came from."""
    sites: set[tuple[str, int]] = set()

    def record() -> None:
        # sys._getframe, not inspect.stack(): that reads the source of every frame of the program's deep stacks
        frame = sys._getframe(2)
        sites.add((str(Path(frame.f_code.co_filename).resolve().relative_to(PROJECT)), frame.f_lineno))

    original_warn, original_given, original_channel_warn = Problems.warn, channel.given, channel.warn

    def problems_warn(self: Problems, *args: Any, **kwargs: Any) -> None:
        record()
        original_warn(self, *args, **kwargs)

    def given(text: str, resource: Any = None) -> None:
        # warn() calls given(): count warn's caller once
        if Path(sys._getframe(1).f_code.co_filename).name != "warnings.py":
            record()
        original_given(text, resource)

    def warn(path: str, message: str, resource: Any = None) -> None:
        record()
        original_given(f"mlcluster:{path}: {message}", resource)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Problems, "warn", problems_warn)
        patch.setattr(channel, "given", given)
        patch.setattr(channel, "warn", warn)
        # Every module of components/ that imported the channel's functions by name (`from ..warnings import warn`).
        for info in pkgutil.walk_packages([str(COMPONENTS)], "components."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)
        for name, module in list(sys.modules.items()):
            if not name.startswith("components."):
                continue
            if getattr(module, "given", None) is original_given:
                patch.setattr(module, "given", given)
            if getattr(module, "warn", None) is original_channel_warn:
                patch.setattr(module, "warn", warn)
        yield sites


RAN: set[str] = set()
"""The cases this process ran (the site check runs the others itself, if pytest put them on another worker)."""


def check_case(case: str, tmp_path: Path, lab_plan: Path, capsys: pytest.CaptureFixture[str]) -> None:
    change, start = CASES[case]
    out = tmp_path / "plan"
    capsys.readouterr()
    stack = _stack_file(tmp_path, change)
    assert plan_main(["--stack-file", str(stack), "--out", str(out), "--compare", str(lab_plan), *AT]) == 0
    printed = capsys.readouterr()
    shown = [line.removeprefix("warning: ") for line in printed.err.splitlines() if line.startswith("warning: ")]
    matching = [w for w in shown if w.startswith(start)]
    assert len(matching) == 1, f"{case}: {start!r} not printed once among {shown}"
    warning = matching[0]
    assert len(shown) == len(set(shown)), f"a warning printed twice: {shown}"
    assert warning in json.loads((out / "plan.json").read_text())["warnings"]
    # The diff against the lab example shows it as new (the PR comment prints this diff).
    assert f"  + {warning}" in printed.out.splitlines(), printed.out[-3000:]
    RAN.add(case)


@pytest.mark.parametrize("case", list(CASES))
def test_each_warning_reaches_the_plan_output_plan_json_and_the_diff(
    case: str, tmp_path: Path, lab_plan: Path, reached: set[tuple[str, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    check_case(case, tmp_path, lab_plan, capsys)


def test_every_warning_site_has_a_case(
    reached: set[tuple[str, int]],
    lab_plan: Path,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What the cases reached, plus the sites only an `up` reaches, are every warning site in components/."""
    for case in sorted(set(CASES) - RAN):
        check_case(case, tmp_path_factory.mktemp("case"), lab_plan, capsys)
    expected = {site for site in _sites() if site[0] not in AT_UP_ONLY}
    assert sorted(expected - reached) == [], "warning sites no case reaches: add a case to CASES"


def test_no_component_warns_around_the_channel() -> None:
    offenders = [
        f"{path.relative_to(PROJECT)}:{n}"
        for path in COMPONENTS.rglob("*.py")
        if path != COMPONENTS / "warnings.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "log.warn(" in line
    ]
    assert offenders == [], "warn through components/warnings.py (the plan keeps only what passes there)"
