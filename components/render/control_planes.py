"""The control planes as the last successful `up` left them, and what the stack may not do to them.

The first control plane ran `kubeadm init`; every join and every removal runs through it, and its init is protected.
Pulumi checks `protect` only when it reaches that delete, after the deletes that depend on it (a reordered list
makes another node first: its join's delete, a `kubeadm reset`, would run before the engine stops). So the program
refuses, from the previous deployment's record, before the first control plane's step can be decided: a preview,
`pulumi up --skip-preview` and the Automation API all stop with the key to fix and no node touched.
"""

from __future__ import annotations

from ..config.nodes import NodeSpec
from ..config.spec import Spec

OUTPUT = "controlPlanes"
"""The stack output with the control planes' names, first first, as of the last successful `up`."""
WORKERS_OUTPUT = "workers"
"""The stack output with the workers' names as of the last successful `up` (every join done)."""


def recorded_names(control_planes: tuple[NodeSpec, ...]) -> list[str]:
    return [node.name for node in control_planes]


def recorded_workers(spec: Spec) -> list[str]:
    return [node.name for node in spec.workers]


def _names(recorded: object) -> list[str] | None:
    if not isinstance(recorded, list) or not all(isinstance(name, str) for name in recorded):
        return None
    return recorded


def promoted_worker_problem(recorded_workers: object, nodes: tuple[NodeSpec, ...]) -> str | None:
    """A node that joined as a worker cannot become a control plane in place: its join would find it joined and
    change nothing, so the plan's effect would be false."""
    for name in _names(recorded_workers) or []:
        found = [(index, node) for index, node in enumerate(nodes) if node.name == name]
        if found and found[0][1].is_control_plane:
            return (
                f"mlcluster:nodes[{found[0][0]}].roles: {name} joined as a worker at the last up: a role cannot change"
                " in place (its join finds it joined and would change nothing); remove the node in one up and add it"
                " back as a control plane in the next (docs/bootstrap.md#removing-a-node)"
            )
    return None


def control_plane_change_problem(
    recorded: object, control_planes: tuple[NodeSpec, ...], nodes: tuple[NodeSpec, ...]
) -> str | None:
    """Why this stack cannot follow the control planes of `recorded` (None before the first deployment), or None."""
    names = _names(recorded)
    if not names:
        return None
    recorded = names
    first = recorded[0]
    by_name = {node.name: (index, node) for index, node in enumerate(nodes)}
    guide = "docs/bootstrap.md#removing-a-node"
    if first not in by_name:
        return (
            f"mlcluster:nodes: {first}, the cluster's first control plane (it ran kubeadm init; every join and removal"
            f" runs through it), is no longer in the stack: removing it is refused; put its entry back ({guide})"
        )
    index, node = by_name[first]
    if not node.is_control_plane:
        return (
            f"mlcluster:nodes[{index}].roles: {first} is the cluster's first control plane (it ran kubeadm init):"
            " it cannot become a worker"
        )
    current_first = control_planes[0].name
    if current_first != first:
        return (
            f"mlcluster:nodes: {current_first} is now the first control plane, but {first} ran kubeadm init and"
            f" was first at the last up: list {first} before every other control plane again (reordering the"
            " control planes would run another kubeadm init and reset a member)"
        )
    for name in recorded[1:]:
        if name in by_name and not by_name[name][1].is_control_plane:
            return (
                f"mlcluster:nodes[{by_name[name][0]}].roles: {name} was a control plane (an etcd member) at the last"
                f" up: a role cannot change in place; remove the node in one up and add it back in the next"
                f" ({guide})"
            )
    return None
