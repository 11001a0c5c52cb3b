"""Kueue day 2 against the API server's rules: what Kueue 0.19's CRDs make immutable is replaced, in an order the
API accepts, and the preview says so.

The stack is the cloud example (mode existing, so no node is reached) with Topology-Aware Scheduling on. Each
`up` goes through the engine's Kubernetes API model (kubernetes_api.py): the pinned CRDs' CEL rules, transition
rules included, and Kueue's resource-in-use finalizers. The model's own contract is held by the first tests.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

from components.render import kueue as kueue_render
from tests.conftest import stack_values
from tests.upstream import kueue_crds

from .engine import FleetEngine, RemoteCommandError
from .kubernetes_api import KubernetesApi, KubernetesApiError

KUEUE = "kueue.x-k8s.io/v1beta2"
FLAVOR = "l4-24gb"
TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _flavor(name: str, tolerations: list[dict[str, Any]], topology: str | None = "dc") -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": {"gpu": "l4"}, "tolerations": tolerations}
    if topology:
        spec["topologyName"] = topology
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def _queue(flavors: list[str]) -> dict[str, Any]:
    groups = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]} for f in flavors],
        }
    ]
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": "team"},
        "spec": {"resourceGroups": groups},
    }


def _topology(name: str, labels: list[str]) -> dict[str, Any]:
    levels = [{"nodeLabel": label} for label in labels]
    return {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": name}, "spec": {"levels": levels}}


# --- the model's contract: each refusal is the upstream's, and each test fails if the model lets it through --------


def test_a_flavor_with_a_topology_keeps_its_tolerations_as_the_crd_says() -> None:
    api = KubernetesApi(kueue_crds())
    api.create(_topology("dc", ["rack", "kubernetes.io/hostname"]))
    api.create(_flavor("gpu", []))
    with pytest.raises(KubernetesApiError, match="tolerations are immutable when topologyName is set"):
        api.update(_flavor("gpu", [TAINT]))
    assert api.objects[("kueue.x-k8s.io", "ResourceFlavor", "", "gpu")]["spec"]["tolerations"] == []
    # Without a topology the same change is an update the CRD allows.
    api.create(_flavor("plain", [], topology=None))
    api.update(_flavor("plain", [TAINT], topology=None))
    with pytest.raises(KubernetesApiError, match="topologyName is immutable when topologyName is set"):
        api.update(_flavor("gpu", [], topology="other"))


def test_a_topologys_levels_never_change() -> None:
    api = KubernetesApi(kueue_crds())
    api.create(_topology("dc", ["rack", "kubernetes.io/hostname"]))
    with pytest.raises(KubernetesApiError, match=r"spec.levels: Invalid value: field is immutable"):
        api.update(_topology("dc", ["block", "rack", "kubernetes.io/hostname"]))
    with pytest.raises(KubernetesApiError, match="must be unique"):
        api.create(_topology("twice", ["rack", "rack"]))


def test_kueues_finalizers_hold_what_is_in_use_until_the_last_user_goes() -> None:
    api = KubernetesApi(kueue_crds())
    api.create(_topology("dc", ["rack", "kubernetes.io/hostname"]))
    api.create(_flavor("gpu", []))
    api.create(_queue(["gpu"]))
    with pytest.raises(KubernetesApiError, match=r"resource-in-use is held while ClusterQueue/team"):
        api.delete(_flavor("gpu", []))
    with pytest.raises(KubernetesApiError, match="is being deleted"):
        api.create(_flavor("gpu", []))
    with pytest.raises(KubernetesApiError, match=r"held while ResourceFlavor/gpu"):
        api.delete(_topology("dc", []))
    api.update(_queue([]))  # the queue lets go: the flavor goes, and with it the topology's last user
    assert not api.terminating and not api.objects.keys() - {("kueue.x-k8s.io", "ClusterQueue", "", "team")}
    assert [verb for verb, _ in api.writes[-2:]] == ["delete", "delete"]


def test_a_name_taken_is_refused() -> None:
    api = KubernetesApi(kueue_crds())
    api.create(_topology("dc", ["kubernetes.io/hostname"]))
    with pytest.raises(KubernetesApiError, match="AlreadyExists"):
        api.create(_topology("dc", ["kubernetes.io/hostname"]))


# --- the program on the engine --------------------------------------------------------------------------------------


def _cloud_with_topology() -> tuple[dict[str, Any], list[str]]:
    values, secret = stack_values("cloud")
    values = copy.deepcopy(values)
    values["kueue"]["topology"] = {
        "levels": ["block", "subblock"],
        "nodeLabels": {
            "block": "cloud.google.com/gce-topology-block",
            "subblock": "cloud.google.com/gce-topology-subblock",
        },
        "trainingLevel": "subblock",
    }
    return values, secret


@pytest.fixture
def engine() -> Iterator[FleetEngine]:
    fleet_engine = FleetEngine()
    yield fleet_engine
    fleet_engine.close()


def _kueue_objects(api: KubernetesApi, kind: str) -> dict[str, dict[str, Any]]:
    return {key[3]: o for key, o in api.objects.items() if key[:2] == ("kueue.x-k8s.io", kind)}


def _day_two(values: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(values)
    changed["kueue"]["topology"]["levels"] = ["block"]  # a level dropped: the Topology's levels change
    del changed["kueue"]["topology"]["nodeLabels"]["subblock"]
    changed["kueue"]["topology"]["trainingLevel"] = "block"
    # The node pool's label corrected: the flavor's nodeLabels change, immutable with a topology.
    changed["kueue"]["inventory"][0]["nodeLabels"] = {"cloud.google.com/gke-accelerator": "nvidia-l4-vws"}
    return changed


def test_changing_levels_and_a_flavors_fields_replaces_them_in_an_order_the_api_accepts(engine) -> None:
    values, secret = _cloud_with_topology()
    first = engine.up(values, secret)
    first.raise_error()
    before = _kueue_objects(engine.kubernetes, "ResourceFlavor")
    (old_topology,) = _kueue_objects(engine.kubernetes, "Topology")

    changed = _day_two(values)
    preview = engine.preview(changed, secret)
    preview.raise_error()
    operations = preview.operations
    assert operations["datacenter"] == "replace"
    assert operations[FLAVOR] == "replace"
    assert operations["cpu"] == "same", "the CPU flavor has no topology: nothing of it is immutable"
    assert operations["ml"] == "update", "the team's ClusterQueue moves to the new flavor in place"

    day2 = engine.up(changed, secret)
    day2.raise_error()
    after = _kueue_objects(engine.kubernetes, "ResourceFlavor")
    (new_topology,) = _kueue_objects(engine.kubernetes, "Topology")
    assert new_topology != old_topology
    (old_gpu,) = [name for name in before if name.startswith(FLAVOR)]
    (new_gpu,) = [name for name in after if name.startswith(FLAVOR)]
    assert old_gpu != new_gpu and old_gpu not in after
    assert after[new_gpu]["spec"]["topologyName"] == new_topology
    queue = _kueue_objects(engine.kubernetes, "ClusterQueue")["ml"]
    assert new_gpu in {f["name"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]}
    assert not engine.kubernetes.terminating
    # The order: new Topology and flavor first, the queue moved, the old flavor and then its Topology deleted.
    writes = [(verb, key[1], key[3]) for verb, key in engine.kubernetes.writes]
    day2_writes = writes[writes.index(("create", "Topology", new_topology)) :]
    assert day2_writes.index(("create", "ResourceFlavor", new_gpu)) < day2_writes.index(
        ("update", "ClusterQueue", "ml")
    )
    assert day2_writes.index(("update", "ClusterQueue", "ml")) < day2_writes.index(
        ("delete", "ResourceFlavor", old_gpu)
    )
    assert day2_writes.index(("delete", "ResourceFlavor", old_gpu)) < day2_writes.index(
        ("delete", "Topology", old_topology)
    )
    assert engine.up(changed, secret).operations.get(FLAVOR) == "same", "a second up changes nothing"


def test_the_same_change_in_place_is_refused_by_the_crds_rules() -> None:
    """Without the objects' names following their immutable fields (what the program did before), the update is
    the one the API server refuses: the model is as strict as the CRDs."""
    values, secret = _cloud_with_topology()
    with mock.patch.object(kueue_render, "named_after", lambda base, immutable: base):
        in_place = FleetEngine()
        try:
            in_place.up(values, secret).raise_error()
            run = in_place.up(_day_two(values), secret)
        finally:
            in_place.close()
    assert isinstance(run.error, RemoteCommandError)
    assert "field is immutable" in str(run.error) or "immutable when topologyName is set" in str(run.error)
