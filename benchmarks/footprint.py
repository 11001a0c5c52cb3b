"""What a stack costs the engine: plan time, resources, stored state, dependency edges, checkpoint writes.

Measured from the offline plan (the recording monitor's record of every RegisterResource, `plan.json`), each
plan in a fresh process as a user runs it. The state model is what the engine stores per resource:
its URN, type, parent and dependencies, its inputs, and its outputs — which for `remote.Command` and the
Kubernetes resources repeat every input (pulumi-command's outputs embed its inputs; stdout/stderr are not
known before `up` and are left out, so real states are larger by what the steps print). The checkpoint
model is a first `up` on a DIY backend, which rewrites the whole state file after every step: the sum over
steps (in run order) of the state size at that step. Secrets, which a plan shows as "[secret]", are counted at
the size the engine stores them encrypted (`SECRET_PLAINTEXT_BYTES`): the connection of every command (and of
each node's copy of the scripts) holds the SSH private key, and a join holds its credentials on stdin.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.plan.engine import SECRET

from .stacks import generated_values, scaled_onprem_config

PROJECT = Path(__file__).resolve().parents[1]


SSH_RESOURCES = ("command:remote:Command", "command:remote:CopyToRemote")


@dataclass(frozen=True)
class Connections:
    """SSH connections a first `up` leaves open until it ends: pulumi-command dials one client per resource and
    never closes it (provider/pkg/provider/remote/commandOutputs.go), so each node holds one connection (and an
    sshd) per SSH resource that ran on it, and a bastion one per resource of every node behind it."""

    per_node: dict[str, int]

    @property
    def busiest(self) -> tuple[str, int]:
        return max(self.per_node.items(), key=lambda item: (item[1], item[0]))

    @property
    def total(self) -> int:
        return sum(self.per_node.values())

    def typical(self) -> int:
        """What most nodes hold (the mode): a worker's figure in a large fleet."""
        counts = Counter(self.per_node.values())
        return max(counts, key=lambda count: (counts[count], count))


def ssh_connections(document: Mapping[str, Any]) -> Connections:
    """From a plan document (plan.json): by node, the SSH resources whose create dials it (a copy, or a command
    with a create: one with only a delete, such as a node's drain on removal, dials at its removal only)."""
    return Connections(
        dict(
            Counter(
                str(e.get("runsOn") or "unknown")
                for e in document["resources"]
                if e["type"] == SSH_RESOURCES[1] or (e["type"] == SSH_RESOURCES[0] and e["inputs"].get("create"))
            )
        )
    )


@dataclass(frozen=True)
class Footprint:
    nodes: int
    resources: int
    custom_resources: int
    state_bytes: int
    dependency_edges: int
    checkpoint_bytes: int
    """Bytes a first `up` on a DIY backend writes: one whole-state rewrite per step."""
    connections: Connections

    def per_node(self, value: int) -> float:
        return value / self.nodes


@dataclass(frozen=True)
class PlanMeasure:
    footprint: Footprint
    wall_seconds: float
    cpu_seconds: float


SECRET_PLAINTEXT_BYTES = {"connection": 650, "connection (agent)": 200, "stdin": 161}
"""What a plan shows as "[secret]" holds, in bytes, for the state model: a command's `connection` (host, port,
user, the pinned host key and an ed25519 private key of ~410 bytes; an RSA key is ~3.2 KB more) and a join's
`stdin` (the join credentials: a 23-character bootstrap token and the 71-character CA hash, and for a control
plane a 64-character certificate key, a line each). With `ssh.agent` the connection holds no key (~200 bytes:
pulumi-command marks it secret all the same). Any other secret counts as the connection's size."""
_SECRET_ENVELOPE = '{"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270","ciphertext":"v1::"}'


def secret_bytes(plaintext: int) -> int:
    """A secret as the engine stores it: the secret signature, and the value's JSON encrypted (a 12-byte
    nonce and a 16-byte tag around it, each base64 encoded) — about 4/3 of the plaintext plus ~110 bytes."""
    return len(_SECRET_ENVELOPE) + 4 * -(-12 // 3) + 4 * -(-(plaintext + 16) // 3)


def _modelled(inputs: Mapping[str, Any], agent: bool = False) -> tuple[dict[str, Any], int]:
    """The inputs without their "[secret]" markers, and the bytes those secrets take encrypted. `agent`: the
    connection authenticates with the SSH agent (the plan's connection facts say so), so it holds no key."""
    plain = {k: v for k, v in inputs.items() if v != SECRET}
    sizes = {
        **SECRET_PLAINTEXT_BYTES,
        **({"connection": SECRET_PLAINTEXT_BYTES["connection (agent)"]} if agent else {}),
    }
    hidden = sum(secret_bytes(sizes.get(k, sizes["connection"])) for k in inputs if k not in plain)
    return plain, hidden


def stored_state(entry: Mapping[str, Any]) -> int:
    """Bytes one plan.json resource takes in a checkpoint (compact JSON, as the engine writes it)."""
    custom = entry["type"].split(":")[0] not in {"mlcluster", "pulumi"}
    agent = str((entry.get("connection") or {}).get("auth", "")).startswith("agent")
    inputs, secrets = _modelled(entry["inputs"], agent)
    record = {
        "urn": entry["urn"],
        "type": entry["type"],
        "parent": entry["parent"],
        "dependencies": entry["dependsOn"],
        "inputs": inputs,
        # Components record only what they register as outputs; custom resources echo their inputs.
        "outputs": inputs if custom else {},
    }
    return len(json.dumps(record, separators=(",", ":")).encode()) + secrets * (2 if custom else 1)


def footprint(document: Mapping[str, Any], nodes: int) -> Footprint:
    entries = document["resources"]
    sizes = [stored_state(e) for e in entries]
    checkpoint, state = 0, 0
    for size in sizes:
        state += size
        checkpoint += state
    return Footprint(
        nodes=nodes,
        resources=len(entries),
        custom_resources=sum(1 for e in entries if e["type"].split(":")[0] not in {"mlcluster", "pulumi"}),
        state_bytes=state,
        dependency_edges=sum(len(e["dependsOn"]) for e in entries),
        checkpoint_bytes=checkpoint,
        connections=ssh_connections(document),
    )


def write_stack_file(config: Mapping[str, Any], folder: Path, name: str) -> Path:
    path = folder / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({"config": dict(config)}, sort_keys=False))
    return path


def generated_config(nodes: int) -> dict[str, Any]:
    config = {f"mlcluster:{k}": v for k, v in generated_values(nodes).items()}
    # The key is a placeholder, but plans refuse plaintext keys: mark it as an encrypted value.
    config["mlcluster:ssh"]["privateKey"] = {"secure": "v1:benchmark-placeholder"}
    return config


def generated_agent_config(nodes: int) -> dict[str, Any]:
    """The generated stack authenticating with the SSH agent (`ssh.agent`): no key in any connection."""
    config = generated_config(nodes)
    config["mlcluster:ssh"] = {"user": "root", "agent": True}
    return config


STACKS: dict[str, Callable[[int], dict[str, Any]]] = {
    "generated": generated_config,
    "generated-agent": generated_agent_config,
    "onprem": scaled_onprem_config,
}


def measure(stack: str, nodes: int, project: Path = PROJECT) -> PlanMeasure:
    """Plan `stack` scaled to `nodes` in a fresh process of the project at `project`; wall and CPU seconds."""
    with tempfile.TemporaryDirectory() as folder:
        stack_file = write_stack_file(STACKS[stack](nodes), Path(folder), f"{stack}{nodes}")
        out = Path(folder) / "plan"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "components.plan", "--stack-file", str(stack_file), "--out", str(out)],
            cwd=project,
            check=True,
            capture_output=True,
            timeout=1800,
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        document = json.loads((out / "plan.json").read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return PlanMeasure(footprint(document, nodes), wall, cpu)


def table(rows: list[tuple[str, PlanMeasure]]) -> str:
    lines = [
        "| stack | nodes | plan wall s | plan CPU s | resources (per node) | custom (per node) |"
        " state KB (per node) | dependency edges (per node) | DIY checkpoint writes, first up |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for stack, m in rows:
        f = m.footprint
        lines.append(
            f"| {stack} | {f.nodes} | {m.wall_seconds:.1f} | {m.cpu_seconds:.1f} |"
            f" {f.resources} ({f.per_node(f.resources):.2f}) |"
            f" {f.custom_resources} ({f.per_node(f.custom_resources):.2f}) |"
            f" {f.state_bytes / 1e3:,.0f} ({f.per_node(f.state_bytes) / 1e3:.1f}) |"
            f" {f.dependency_edges} ({f.per_node(f.dependency_edges):.1f}) | {human_bytes(f.checkpoint_bytes)} |"
        )
    return "\n".join(lines)


def connections_table(rows: list[tuple[str, PlanMeasure]]) -> str:
    """SSH connections open at the end of a first `up` (pulumi-command keeps each resource's until it ends)."""
    lines = [
        "| stack | nodes | per worker (typical) | busiest node | on a bastion (all nodes behind it) |",
        "|---|---:|---:|---|---:|",
    ]
    for stack, measured in rows:
        held = measured.footprint.connections
        name, count = held.busiest
        lines.append(
            f"| {stack} | {measured.footprint.nodes:,} | {held.typical()} | {name}: {count} | {held.total:,} |"
        )
    return "\n".join(lines)


def human_bytes(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if count < 1000:
            return f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} PB"


# Typical durations of the bootstrap's commands on a real node (seconds): the preparation (package index,
# containerd and Kubernetes packages, tuning), kubeadm init and join.
PREPARE_SECONDS = 60
INIT_SECONDS = 60
JOIN_SECONDS = 30


def bootstrap_seconds(nodes: int, parallel: int, control_planes: int = 3) -> int:
    """A first `up` with `--parallel` steps at a time: every node prepares (parallel at a time), the first
    control plane inits, the other control planes join one by one, the workers `parallel` at a time."""
    waves = -(-nodes // parallel)
    workers = max(0, nodes - control_planes)
    return (
        waves * PREPARE_SECONDS
        + INIT_SECONDS
        + (min(control_planes, nodes) - 1) * JOIN_SECONDS
        + -(-workers // parallel) * JOIN_SECONDS
    )


def parallel_table(sizes: list[int], parallels: tuple[int, ...] = (8, 64, 256)) -> str:
    lines = [
        "| nodes | " + " | ".join(f"--parallel {p}" for p in parallels) + " |",
        "|---:|" + "---:|" * len(parallels),
    ]
    for nodes in sizes:
        cells = [f"{bootstrap_seconds(nodes, p) / 60:.0f} min" for p in parallels]
        lines.append(f"| {nodes} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
