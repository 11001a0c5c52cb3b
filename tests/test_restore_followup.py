"""After an etcd restore (`etcdSnapshots.restored`): every kubelet restarts in its batch, then the first control plane
rolls the controllers namespace by namespace (components/render/etcd_snapshots.py). The fleet runs it
(tests/fleet/test_day2.py); here, what the program builds and that the namespaces cover every release it installs."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from components.config.schema import ConfigError
from components.render.etcd_snapshots import RESTORE_ROLLOUT_STEP, restore_rollout_namespaces

from .conftest import load_spec, runs, stack_values
from .rendered_stack import RELEASE, variants

COMMAND = "command:remote:Command"
RESTORED = "etcd-scheduled-20261201T030000Z-v1.34.2"


def restored(values: dict[str, Any], name: str = RESTORED) -> dict[str, Any]:
    values = copy.deepcopy(values)
    values.setdefault("etcdSnapshots", {})["restored"] = name
    return values


def test_without_a_restore_no_step_changes_and_none_is_added(run_stack) -> None:
    run = run_stack("onprem")
    assert not [r for r in run.of_type(COMMAND) if r.name.endswith(RESTORE_ROLLOUT_STEP)]
    kubelets = [r for r in run.of_type(COMMAND) if r.name.endswith("-kubelet")]
    # The setting (RESTORED=<name>), not the script's own default (RESTORED=${RESTORED:-}).
    assert kubelets and not [r.name for r in kubelets if re.search(r"^RESTORED=[^$]", runs(r.inputs["create"]), re.M)]


def test_a_restore_name_restarts_every_kubelet_then_rolls_from_the_first_control_plane(run_stack) -> None:
    values, secret = stack_values("onprem")
    run = run_stack("onprem", values=restored(values), secret=secret)
    kubelets = [r for r in run.of_type(COMMAND) if r.name.endswith("-kubelet")]
    assert len(kubelets) == 9
    assert not [k.name for k in kubelets if f"\nRESTORED={RESTORED}\n" not in runs(k.inputs["create"])]
    rollout = run.named(f"cp-1-{RESTORE_ROLLOUT_STEP}")
    # After the last batch (its uncordon), so after every kubelet: the chain runs batch by batch before it.
    last = [r for r in run.of_type(COMMAND) if r.name.startswith("cp-1-upgrade-uncordon-")]
    assert last and {r.urn for r in last} & set(rollout.depends_on)
    script = runs(rollout.inputs["create"])
    assert "NAMESPACES='kube-system tigera-operator calico-system calico-apiserver" in script


def test_the_kubelet_commands_change_only_with_a_new_name(run_stack) -> None:
    values, secret = stack_values("onprem")
    first = run_stack("onprem", values=restored(values), secret=secret).named("gpu-1-kubelet").inputs["create"]
    again = run_stack("onprem", values=restored(values), secret=secret).named("gpu-1-kubelet").inputs["create"]
    other = (
        run_stack("onprem", values=restored(values, "second"), secret=secret).named("gpu-1-kubelet").inputs["create"]
    )
    assert first == again != other


@pytest.mark.parametrize("variant", ["onprem", "knative", "dra", "rdma", "spegel-off", "all-gpu-workers"])
def test_every_release_the_program_installs_is_in_a_namespace_the_rollout_covers(run_stack, variant: str) -> None:
    values, secret = variants()[variant]
    run = run_stack(variant, values=values, secret=secret)
    spec = load_spec(values, secret)
    namespaces = restore_rollout_namespaces(spec)
    installed = {str(r.inputs["namespace"]) for r in run.of_type(RELEASE)}
    assert installed, "no release to check"
    assert installed <= set(namespaces), installed - set(namespaces)
    assert namespaces[0] == "kube-system" and len(namespaces) == len(set(namespaces))


@pytest.mark.parametrize("name", ["", "-leading-dash", "has space", "x" * 129, "semi;colon"])
def test_a_restore_name_that_is_not_a_plain_word_is_refused_with_its_key(name: str) -> None:
    values, secret = stack_values("onprem")
    with pytest.raises(ConfigError) as error:
        load_spec(restored(values, name), secret)
    assert "mlcluster:etcdSnapshots.restored" in str(error.value)
