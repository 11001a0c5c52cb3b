"""The labels and taints mlcluster manages on each Node, and the first control plane's step that keeps them.

kubeadm hands a node's labels (`--node-labels`) and taints to its kubelet once, when the Node registers; a label or
taint changed in the stack after the join never reaches the Node that way, and `kubeadm join` on a joined node only
reports it joined. This step sets them through the API on every `up` that changes them, and removes what the stack
no longer declares: only keys this step recorded on the Node as its own (the two annotations below), never a label
or taint someone else set. One step on the first control plane for all nodes: no SSH session per node, and one
`kubectl get nodes` reads the whole cluster.
"""

from __future__ import annotations

from ..config import checks
from ..config.derived import node_taints
from ..config.kueue import KueueSpec
from ..config.nodes import NodeSpec
from .kubeadm import registered_labels
from .shell import NodeStep, rendered_step

STEP = "node-metadata"
MANAGED_LABELS_ANNOTATION = "mlcluster.io/managed-labels"
MANAGED_TAINTS_ANNOTATION = "mlcluster.io/managed-taints"
NODE_TEMPLATE = (
    'node {{.metadata.name}}{{"\\n"}}'
    '{{range $k, $v := .metadata.labels}}label {{$k}}={{$v}}{{"\\n"}}{{end}}'
    '{{range .spec.taints}}taint {{.key}}{{with .value}}={{.}}{{end}}:{{.effect}}{{"\\n"}}{{end}}'
    "{{with .metadata.annotations}}"
    f'{{{{with index . "{MANAGED_LABELS_ANNOTATION}"}}}}managed-labels {{{{.}}}}{{{{"\\n"}}}}{{{{end}}}}'
    f'{{{{with index . "{MANAGED_TAINTS_ANNOTATION}"}}}}managed-taints {{{{.}}}}{{{{"\\n"}}}}{{{{end}}}}'
    "{{end}}"
)
"""One Node as lines the step reads (kubectl's go-template; tests/test_node_metadata.py runs it through the real
kubectl): `node NAME`, `label KEY=VALUE` (kubectl ranges a map in key order), `taint KEY[=VALUE]:EFFECT`, and the
two annotations' values."""
NODES_TEMPLATE = f"{{{{range .items}}}}{NODE_TEMPLATE}{{{{end}}}}"


def taint_text(taint: str) -> str:
    """A taint as the step and kubectl's template write it: KEY=VALUE:EFFECT, or KEY:EFFECT without a value."""
    parsed = checks.parse_taint(taint)
    value = f"={parsed['value']}" if parsed.get("value") else ""
    return f"{parsed['key']}{value}:{parsed['effect']}"


def declared_metadata(nodes: tuple[NodeSpec, ...], kueue: KueueSpec) -> str:
    """What the stack declares for each node still in it, one fact per line, so that a plan's diff names the node
    and the label or taint that changed: `NODE node`, `NODE label KEY=VALUE`, `NODE taint KEY[=VALUE]:EFFECT`."""
    lines = []
    for node in nodes:
        if node.gone:
            continue
        lines.append(f"{node.name} node")
        lines.extend(
            f"{node.name} label {key}={value}" for key, value in sorted(registered_labels(kueue, node).items())
        )
        lines.extend(f"{node.name} taint {taint_text(taint)}" for taint in node_taints(nodes, node))
    return "\n".join(lines)


def node_metadata_step(nodes: tuple[NodeSpec, ...], kueue: KueueSpec) -> NodeStep:
    return rendered_step(
        STEP,
        "Keep each node's labels and taints as the stack declares them (through the API, from this control plane)",
        {
            "DECLARED": declared_metadata(nodes, kueue),
            "NODES_TEMPLATE": NODES_TEMPLATE,
            "MANAGED_LABELS_ANNOTATION": MANAGED_LABELS_ANNOTATION,
            "MANAGED_TAINTS_ANNOTATION": MANAGED_TAINTS_ANNOTATION,
        },
    )
