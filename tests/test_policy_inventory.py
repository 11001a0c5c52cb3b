"""The policy pack's `kueue-quotas-within-inventory` and the stack's validation agree, over generated inventories.

Both read one number per flavor and resource: validation counts the devices (GPUs × MIG slices × time-slicing
replicas, components/config/derived.py) and the program writes them on the flavor; the policy reads them
there. Generated stacks mix GPU models, counts, MIG layouts (single-profile and custom), MIG strategies,
time-slicing, DRA and a cohort:
- a stack validation accepts passes the policy (on the flavors and ClusterQueues the program renders for it);
- a stack validation refuses only for over-committed quotas without a cohort fails the policy for exactly those
  flavors and resources (rendered with a cohort, which turns the refusal into a warning, then the cohort taken away).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from components.config.schema import ConfigError
from components.plan.policies import evaluate, pack_policies, synthetic
from components.render.kueue import cluster_queue, resource_flavors

from .conftest import load_spec, stack_values
from .markers import examples

POLICY = pack_policies()["kueue-quotas-within-inventory"]
MODELS = ("H100-SXM-80GB", "A100-SXM-80GB")
MIG = (None, "all-1g.10gb", "all-3g.40gb", "custom-layout")
OVER_COMMIT = re.compile(r"nominal (\S+) quotas of flavor (\S+) add up to .*over-committed by \d+ with no cohort")


@st.composite
def stacks(draw: st.DrawFn) -> dict[str, Any]:
    values, _ = stack_values("onprem")
    values = copy.deepcopy(values)
    for section in ("kserve", "workloads", "monitoring", "acceptance"):
        values.pop(section, None)
    control_planes = [n for n in values["nodes"] if "control-plane" in n["roles"]]
    workers = [n for n in values["nodes"] if "control-plane" not in n["roles"]]
    dra = draw(st.booleans())
    gpu_nodes = []
    for i in range(draw(st.integers(1, 4))):
        gpu: dict[str, Any] = {"model": draw(st.sampled_from(MODELS)), "count": draw(st.sampled_from((1, 2, 8)))}
        if (mig := draw(st.sampled_from(MIG))) is not None:
            gpu["migConfig"] = mig
        # Time-slicing is a device-plugin setting: with DRA it is refused (another check's refusal).
        if not dra and (replicas := draw(st.sampled_from((None, 2, 4)))) is not None:
            gpu["timeSlicingReplicas"] = replicas
        # The example's pinned host keys, on generated GPU sections.
        host = workers[(i + 1) % len(workers)]
        gpu_nodes.append(
            {"name": f"gpu-{i + 1}", "host": host["host"], "hostKey": host["hostKey"], "roles": ["worker"], "gpu": gpu}
        )
    values["nodes"] = [*control_planes, {k: v for k, v in workers[0].items() if k != "gpu"}, *gpu_nodes]
    values["gpuOperator"]["migStrategy"] = draw(st.sampled_from(("none", "single", "mixed")))
    values["gpuOperator"]["dra"] = dra
    flavors = sorted({"h100-sxm-80gb" if n["gpu"]["model"].startswith("H100") else "a100-sxm-80gb" for n in gpu_nodes})
    resources = ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb")
    teams = []
    for t in range(draw(st.integers(1, 3))):
        flavor = draw(st.sampled_from(flavors))
        resource = draw(st.sampled_from((resources[0], *resources)))
        quota = {"flavor": flavor, "nominal": {resource: draw(st.integers(0, 40))}}
        teams.append({"name": f"team-{t}", "quotas": [quota]})
    values["kueue"] = {"enabled": True, "teams": teams}
    if draw(st.booleans()):
        values["kueue"]["cohort"] = "shared"
    return values


def policy_violations(spec: Any, *, drop_cohort: bool = False) -> list[str]:
    resources = []
    for manifest in resource_flavors(spec):
        resources.append(
            synthetic(f"kubernetes:kueue.x-k8s.io/v1beta2:{manifest['kind']}", manifest["metadata"]["name"], manifest)
        )
    for team in spec.kueue.teams:
        manifest = cluster_queue(spec.kueue, team)
        if drop_cohort:
            manifest["spec"].pop("cohortName", None)
        resources.append(synthetic("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", team.name, manifest))
    outcome = evaluate(POLICY, resources, None)
    assert outcome.not_applicable is None, outcome.not_applicable
    return outcome.violations


def over_committed(problems: list[Any]) -> set[tuple[str, str]]:
    return {(m[2], m[1]) for p in problems if (m := OVER_COMMIT.search(p.message))}


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stacks())
def test_validation_and_the_policy_agree_on_quotas_against_inventory(values: dict[str, Any]) -> None:
    try:
        spec = load_spec(values, ["ssh"])
    except ConfigError as refused:
        errors = refused.problems.errors
        over = over_committed(errors)
        # Only refusals for over-commit without a cohort can be compared; anything else is another check's.
        assume(over and len(over) == len(errors))
        with_cohort = copy.deepcopy(values)
        with_cohort["kueue"]["cohort"] = "shared"
        spec = load_spec(with_cohort, ["ssh"])
        violations = policy_violations(spec, drop_cohort=True)
        flagged = {(m[1], m[2]) for v in violations if (m := re.search(r"give flavor (\S+) \d+ (\S+) of nominal", v))}
        assert flagged == over, (violations, [str(e) for e in errors])
        return
    assert policy_violations(spec) == [], "validation accepted a stack the policy refuses"


def test_a_time_sliced_lab_gpu_counts_as_its_replicas_in_both() -> None:
    """The issue's case: one GPU, 4 time-slicing replicas, a quota of 4: valid, and the policy agrees."""
    values, _ = stack_values("onprem")
    values = copy.deepcopy(values)
    for section in ("kserve", "workloads", "monitoring", "acceptance"):
        values.pop(section, None)
    first = values["nodes"][0]
    values["nodes"] = [
        {"name": "lab-1", "host": first["host"], "hostKey": first["hostKey"], "roles": ["control-plane", "worker"],
         "gpu": {"model": "L4", "count": 1, "timeSlicingReplicas": 4}},
    ]  # fmt: skip
    values["kueue"] = {
        "enabled": True,
        "teams": [{"name": "lab", "quotas": [{"flavor": "l4", "nominal": {"nvidia.com/gpu": 4}}]}],
    }
    spec = load_spec(values, ["ssh"])
    assert policy_violations(spec) == []
    values["kueue"]["teams"][0]["quotas"][0]["nominal"]["nvidia.com/gpu"] = 5
    try:
        load_spec(values, ["ssh"])
    except ConfigError as refused:
        assert over_committed(refused.problems.errors) == {("l4", "nvidia.com/gpu")}
    else:
        raise AssertionError("a quota of 5 on 4 time-sliced replicas was accepted")
