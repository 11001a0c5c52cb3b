"""Day-2 labels and taints (components/render/node_metadata.py): what the step is told, the one template it reads the
cluster with (run through the real kubectl, and the fleet stub held to the same output), the stub's label and
annotate rules, and where the program puts the step. The step itself runs on the fleet (tests/fleet/test_day2.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.render.node_metadata import NODE_TEMPLATE, NODES_TEMPLATE, declared_metadata, taint_text

from .test_control_planes import onprem
from .test_kubectl_stub_acceptance import Cli, cli, stub  # noqa: F401 (fixtures)

COMMAND = "command:remote:Command"


def facts(spec: Any, node: str) -> list[str]:
    return [line for line in declared_metadata(spec.nodes, spec.kueue).splitlines() if line.split()[0] == node]


def test_every_node_in_the_stack_is_declared_with_its_labels_and_taints() -> None:
    spec = onprem()
    lines = declared_metadata(spec.nodes, spec.kueue).splitlines()
    assert [line.split()[0] for line in lines if line.endswith(" node")] == [n.name for n in spec.nodes]
    gpu = facts(spec, "gpu-2")
    assert gpu[0] == "gpu-2 node"
    assert "gpu-2 label mlcluster.io/gpu-model=H100-SXM-80GB" in gpu and "gpu-2 label mlcluster.io/gpu-count=8" in gpu
    assert "gpu-2 taint nvidia.com/gpu=present:NoSchedule" in gpu
    # kubeadm's default for a dedicated control plane is declared too: it is a taint the stack decides.
    assert "cp-1 taint node-role.kubernetes.io/control-plane:NoSchedule" in facts(spec, "cp-1")
    # One fact per line, keys sorted: a plan's diff names the node and the one label that changed.
    labels = [line for line in gpu if " label " in line]
    assert labels == sorted(labels)


def test_a_gone_node_is_left_out_and_taints_are_written_as_kubectl_prints_them() -> None:
    def change(nodes: list[dict[str, Any]]) -> None:
        nodes[6]["taints"] = ["team=vision:NoSchedule", "maintenance:PreferNoSchedule"]
        nodes[7]["gone"] = True

    spec = onprem(change)
    assert facts(spec, "gpu-3") == []
    assert {"gpu-2 taint team=vision:NoSchedule", "gpu-2 taint maintenance:PreferNoSchedule"} <= set(
        facts(spec, "gpu-2")
    )
    assert taint_text("k=:NoExecute") == "k:NoExecute"


# ---- the template: real kubectl and the stub ----------------------------------------------------------------------

NODES: dict[str, dict[str, Any]] = {
    "plain": {"controlPlane": False, "unschedulable": False, "taints": [], "labels": {}},
    "labelled": {
        "controlPlane": False,
        "unschedulable": False,
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "labels": {"mlcluster.io/pool": "gpu", "a": "", "topology.kubernetes.io/zone": "rack-1", "Z": "1"},
        "annotations": {"mlcluster.io/managed-labels": "a,mlcluster.io/pool", "other": "x"},
    },
    "control-plane-cordoned": {
        "controlPlane": True,
        "unschedulable": True,
        "taints": None,
        "labels": {"node-role.kubernetes.io/control-plane": ""},
        "annotations": {"mlcluster.io/managed-labels": "", "mlcluster.io/managed-taints": "k:NoExecute"},
    },
    "not-ready": {
        "controlPlane": False,
        "unschedulable": False,
        "ready": False,
        "taints": [{"key": "k", "effect": "NoExecute"}],
        "labels": {"b": "2"},
        "annotations": {},
    },
}


def node_object(name: str, node: dict[str, Any], stub_module: Any) -> dict[str, Any]:
    """The Node the API server would serve for a stub node (taints as the stub's node controllers leave them)."""
    objects = __import__("acceptance_objects")
    metadata: dict[str, Any] = {"name": name, "labels": node["labels"]}
    if node.get("annotations") is not None:
        metadata["annotations"] = node["annotations"]
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": {"taints": objects.node_taints(node)}}


def test_the_stub_knows_the_template_the_step_sends(stub: Any) -> None:  # noqa: F811
    assert stub.NODES_TEMPLATE == NODES_TEMPLATE
    assert NODES_TEMPLATE == "{{range .items}}" + NODE_TEMPLATE + "{{end}}"


@pytest.mark.parametrize("name", sorted(NODES))
def test_the_real_kubectl_prints_what_the_stub_prints(stub: Any, tmp_path: Path, name: str) -> None:  # noqa: F811
    node = NODES[name]
    path = tmp_path / "node.json"
    path.write_text(json.dumps(node_object(name, node, stub)))
    # --local: kubectl prints the object it read through the template, with no API server (a label removal that
    # finds nothing to remove changes nothing).
    real = subprocess.run(
        ["kubectl", "label", "--local", "-f", str(path), "mlcluster-probe-", "-o", f"go-template={NODE_TEMPLATE}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert real.returncode == 0, real.stderr
    assert real.stdout == stub.node_lines(name, node)
    assert real.stdout.startswith(f"node {name}\n")


def test_get_nodes_with_another_template_is_refused(cli: Cli) -> None:  # noqa: F811
    rc, out, err = cli("get", "nodes", "-o", "go-template={{range .items}}{{.metadata.name}}{{end}}")
    assert rc == 1 and "knows one go-template" in err
    rc, out, err = cli("get", "nodes", "-o", f"go-template={NODES_TEMPLATE}")
    assert (
        rc == 0
        and out.splitlines()[0] == "node cp-1"
        and "taint node-role.kubernetes.io/control-plane:NoSchedule" in out
    )


def test_label_sets_overwrites_and_removes_like_kubectl(cli: Cli) -> None:  # noqa: F811
    assert cli("label", "node", "gpu-1", "team=vision") == (0, "node/gpu-1 labeled\n", "")
    rc, _, err = cli("label", "node", "gpu-1", "team=nlp")
    assert rc == 1 and "'team' already has a value (vision), and --overwrite is false" in err
    assert cli("label", "node", "gpu-1", "--overwrite", "team=vision")[:2] == (0, "node/gpu-1 not labeled\n")
    assert cli("label", "node", "gpu-1", "--overwrite", "team-", "pool=gpu")[:2] == (0, "node/gpu-1 labeled\n")
    rc, out, err = cli("label", "node", "gpu-1", "gone-")
    assert (rc, out) == (0, "node/gpu-1 not labeled\n") and "not found" in err
    assert cli.cluster()["nodes"]["gpu-1"]["labels"] == {"mlcluster.io/gpu-model": "H100-SXM-80GB", "pool": "gpu"}
    rc, _, err = cli("label", "node", "gpu-1", "bad key=1")
    assert rc == 1 and "invalid label spec" in err
    rc, _, err = cli("label", "node", "gpu-1", "--overwrite", "pool=" + "x" * 64)
    assert rc == 1 and "Invalid value" in err


def test_annotate_sets_and_keeps_the_overwrite_rule(cli: Cli) -> None:  # noqa: F811
    key = "mlcluster.io/managed-labels"
    assert cli("annotate", "node", "gpu-1", f"{key}=a,b")[:2] == (0, "node/gpu-1 annotated\n")
    rc, _, err = cli("annotate", "node", "gpu-1", f"{key}=a")
    assert rc == 1 and "--overwrite is false" in err
    assert cli("annotate", "node", "gpu-1", "--overwrite", f"{key}=")[:2] == (0, "node/gpu-1 annotated\n")
    assert cli.cluster()["nodes"]["gpu-1"]["annotations"] == {key: ""}


# ---- the program ----------------------------------------------------------------------------------------------------


def test_the_step_runs_on_the_first_control_plane_after_every_join_and_joins_ignore_their_script(run_stack) -> None:
    run = run_stack("onprem")
    step = run.named("cp-1-node-metadata")
    spec = onprem()
    # After every join: through the Kubernetes provider, which waits for them all (one edge, not one per node).
    provider = run.named("kubernetes")
    assert run.urn_of("cp-1-kubeadm-init") in step.depends_on and provider.urn in step.depends_on
    assert {run.urn_of(f"{n.name}-kubeadm-join") for n in spec.nodes[1:]} <= set(provider.depends_on)
    assert step.options.get("ignoreChanges") in (None, [])
    # One step for the cluster: no per-node command on the control plane for labels and taints.
    assert not [r for r in run.of_type(COMMAND) if r.name.endswith("-node-metadata") and r is not step]
    for node in spec.nodes[1:]:
        assert run.named(f"{node.name}-kubeadm-join").options["ignoreChanges"] == ["stdin", "create"]
