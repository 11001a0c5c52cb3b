"""Write a recorded program run as review files: plan.json, node scripts, configs, values, manifests."""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
import os
import re
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from ..config.derived import acceptance_wanted
from ..config.spec import Spec
from ..render import kubeadm, yaml_text
from ..render.acceptance import OUTPUT as ACCEPTANCE_OUTPUT
from ..render.containerd import containerd_config_toml
from ..render.kubelet import kubelet_configuration
from ..render.kubelet_placement import parse_minor
from ..render.llm import llm_routing
from ..render.shell import script_of_command, split_parts, store_catalog, stored_files_of
from .bundle import air_gap_section
from .diff import diff_plans
from .engine import ProgramRun, RecordedResource
from .review import acceptance_review, review

COMMAND = "command:remote:Command"
SCRIPT_COPY = "command:remote:CopyToRemote"
RELEASE = "kubernetes:helm.sh/v3:Release"
KUSTOMIZE_DIRECTORY = "kubernetes:kustomize/v2:Directory"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def command_host(resource: RecordedResource) -> str | None:
    connection = resource.raw_inputs.get("connection") or {}
    host = connection.get("host") if isinstance(connection, dict) else None
    return host if isinstance(host, str) else None


KEY_TYPES = ("ssh-", "ecdsa-", "sk-")


def host_key_fingerprint(host_key: Any) -> str | None:
    """`SHA256:…` as `ssh-keygen -lf` and ssh's first-connection prompt print it; None when nothing is pinned."""
    if not isinstance(host_key, str) or not host_key.strip():
        return None
    words = host_key.split()
    blobs = [b for kind, b in itertools.pairwise(words) if kind.startswith(KEY_TYPES)]
    try:
        blob = base64.b64decode(blobs[0], validate=True) if blobs else b""
    except (binascii.Error, ValueError):
        blob = b""
    if not blob:
        return "(not a public key)"
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _endpoint(connection: dict[str, Any]) -> dict[str, Any]:
    port = connection.get("port")
    return {
        "host": connection.get("host"),
        "port": int(port) if isinstance(port, float | int) else port,
        "user": connection.get("user"),
        "hostKey": host_key_fingerprint(connection.get("hostKey")) or "not pinned (insecureIgnoreHostKeys)",
        # How the step authenticates, never with what: the key itself is a secret.
        "auth": "privateKey" if connection.get("privateKey") else "agent (SSH_AUTH_SOCK)",
    }


def connection_facts(resource: RecordedResource) -> dict[str, Any] | None:
    """Where a step runs, without its secrets: host, port, user, host-key fingerprint, how it authenticates, and
    the bastion's.

    The engine receives the connection as one secret (it holds the private key), so the plan would otherwise
    show neither the address a step runs on nor a change of it.
    """
    connection = resource.raw_inputs.get("connection")
    if not isinstance(connection, dict):
        return None
    proxy = connection.get("proxy")
    return {**_endpoint(connection), **({"bastion": _endpoint(proxy)} if isinstance(proxy, dict) else {})}


def run_order(resources: list[RecordedResource]) -> list[RecordedResource]:
    """Registration order is decided by a thread pool; plans need an order that is the same every run:
    dependency depth first (a step after the ones it waits for), then name."""
    by_urn = {r.urn: r for r in resources}
    depth: dict[str, int] = {}
    for start in by_urn:
        # Iterative depth-first walk: a recursive one overflows Python's stack on a long batch chain, and
        # copying a "seen" set per call made it quadratic.
        pending: list[tuple[str, bool]] = [(start, False)]
        on_path: set[str] = set()
        while pending:
            urn, children_done = pending.pop()
            if urn in depth:
                continue
            resource = by_urn[urn]
            parents = [p for p in (*resource.depends_on, resource.parent) if p in by_urn]
            if children_done:
                on_path.discard(urn)
                # A cycle (the SDK refuses those) counts the edge back as depth 0.
                depth[urn] = 1 + max((depth.get(p, 0) for p in parents), default=0)
                continue
            on_path.add(urn)
            pending.append((urn, True))
            pending.extend((p, False) for p in parents if p not in depth and p not in on_path)
    return sorted(resources, key=lambda r: (depth[r.urn], r.urn))


def plan_document(
    run: ProgramRun,
    *,
    project: str,
    stack: str,
    spec: Spec | None,
    ordered: list[RecordedResource] | None = None,
    at: datetime | None = None,
    previous: Mapping[str, Any] | None = None,
    secrets: Mapping[str, str] | None = None,
    bundle: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """ordered: run_order(run.resources), when the caller has it already (it is a large plan's second cost).
    previous: the last deployment's outputs (--stack-outputs), which acceptance's review reads. secrets: per secret
    key path, a digest of its encrypted text (StackFile.secret_digests), so a rotated secret shows."""
    host_to_node = {n.host: n.name for n in spec.nodes} if spec else {}
    resources = []
    placement: dict[str, Any] = {}
    for r in ordered if ordered is not None else run_order(run.resources):
        entry: dict[str, Any] = {
            "type": r.type,
            "name": r.name,
            "urn": r.urn,
            "parent": r.parent or None,
            "dependsOn": r.depends_on,
            "inputs": r.inputs,
            "options": r.options,
        }
        if r.type in (COMMAND, SCRIPT_COPY):
            host = command_host(r)
            entry["runsOn"] = host_to_node.get(host or "", host)
            entry["connection"] = connection_facts(r)
            placement.setdefault(entry["runsOn"], entry["connection"])
        resources.append(entry)
    return {
        "project": project,
        "stack": stack,
        # The moment the program's clock read (certificates' days left, the join credentials' mint window).
        "at": at.isoformat() if at is not None else None,
        "warnings": list(run.warnings),
        "placement": dict(sorted(placement.items())),
        "resources": resources,
        "outputs": {k: v.for_plan() for k, v in run.outputs.items()},
        "scripts": sourced_scripts(resources),
        "acceptance": _acceptance(spec, previous),
        # What a client calls and what serves it, per LLM endpoint (render/llm.py).
        "llmRouting": llm_routing(spec.kserve) if spec is not None else [],
        # The air-gap lockfile, the stack's own (airGap) or given with --bundle-lock: every item and its digest
        # (plan/bundle.py).
        "bundle": dict(bundle) if bundle is not None else _air_gap(spec),
        "secrets": dict(sorted((secrets or {}).items())),
    }


def _air_gap(spec: Spec | None) -> dict[str, Any] | None:
    if spec is None or spec.cluster.mode != "kubeadm" or not spec.air_gap.enabled:
        return None
    return air_gap_section(spec.air_gap, spec.nodes, spegel=spec.images.spegel.enabled)


def _acceptance(spec: Spec | None, previous: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if spec is None or spec.cluster.mode != "kubeadm" or not acceptance_wanted(spec):
        return None
    recorded = (previous or {}).get(ACCEPTANCE_OUTPUT)
    return acceptance_review(spec, recorded if isinstance(recorded, Mapping) else None)


def sourced_scripts(resources: Iterable[dict[str, Any]]) -> dict[str, str]:
    """The node copy's files the plan's commands source, by stored name: what each command runs, for the plan's
    files and for a diff against a later plan (whose commands name other versions)."""
    catalog = store_catalog()
    names: set[str] = set()
    seen: set[str] = set()
    for r in resources:
        if r["type"] == COMMAND:
            for key in ("create", "delete"):
                text = r["inputs"].get(key)
                # Most nodes' commands are the same few texts.
                if isinstance(text, str) and text not in seen:
                    seen.add(text)
                    names.update(stored_files_of(text))
    return {name: catalog[name] for name in sorted(names) if name in catalog}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


class _ContentFiles:
    """Node scripts by content: a 1,000-node plan holds ~15,000 step files, mostly the same few texts. Each
    distinct text is written once (under nodes/.by-content/) and every node's file is a hard link to it, so
    the files read as before while the plan writes a fraction of the bytes."""

    def __init__(self, root: Path) -> None:
        self.store = str(root / ".by-content")
        self.folders: set[str] = set()
        self.written: set[str] = set()

    def write(self, path: Path, text: str) -> None:
        digest = hashlib.sha256(text.encode()).hexdigest()[:32]
        stored = f"{self.store}/{digest}.sh"
        target = str(path)
        for folder in (self.store, os.path.dirname(target)):
            if folder not in self.folders:
                os.makedirs(folder, exist_ok=True)
                self.folders.add(folder)
        if digest not in self.written:
            with open(stored, "w", encoding="utf-8") as file:
                file.write(text)
            self.written.add(digest)
        try:
            os.link(stored, target)
        except OSError:  # a file system without hard links
            with open(target, "w", encoding="utf-8") as file:
                file.write(text)


def _node_scripts(
    ordered: list[RecordedResource], spec: Spec | None, out: Path, catalog: dict[str, str]
) -> dict[str, list[str]]:
    """nodes/<node>/NN-<resource>.sh in run order (registration order within a host), each as the node gets it: its
    settings and the shared files it sources, which are written once under scripts/ (the library and every step's
    body), so a 1,000-node plan is read in the time a 9-node one is: each distinct text once."""
    host_to_node = {n.host: n.name for n in spec.nodes} if spec else {}
    per_node: dict[str, list[str]] = defaultdict(list)
    files = _ContentFiles(out / "nodes")
    used: set[str] = set()

    def as_sent(text: str, header: str) -> str:
        sourced = stored_files_of(text)
        used.update(sourced)
        shared = ", ".join(f"scripts/{name}" for name in sourced)
        return header + (f"# sources, from this plan folder: {shared}\n" if shared else "") + text

    for r in ordered:
        if r.type != COMMAND:
            continue
        host = command_host(r) or "unknown"
        node = host_to_node.get(host, host)
        index = len(per_node[node]) + 1
        base = out / "nodes" / _safe(node) / f"{index:02d}-{_safe(r.name)}"
        create = r.inputs.get("create")
        script = script_of_command(create) if isinstance(create, str) else None
        parts = split_parts(script) if script else []
        # A merged command's steps each get their own file, as when they were one command each; the
        # library it sources first is components/scripts/lib.sh.
        # The node's name is in the file's path, not its text: equal steps are equal files (one stored copy).
        command_step = r.name.removeprefix(f"{node}-")
        for step, text in parts:
            index = len(per_node[node]) + 1
            name = f"{node}-{step}" if r.name.startswith(f"{node}-") else f"{r.name}-{step}"
            header = (
                f"#!/usr/bin/env bash\n# step {step}: one part of the node's {command_step} command"
                " (lib.sh sourced before it)\n"
            )
            files.write(out / "nodes" / _safe(node) / f"{index:02d}-{_safe(name)}.sh", as_sent(text, header))
            per_node[node].append(name)
        if parts:
            continue
        files.write(base.with_suffix(".sh"), as_sent(script, "") if script else f"{create}\n")
        delete = r.inputs.get("delete")
        if isinstance(delete, str):
            on_delete = script_of_command(delete)
            files.write(
                base.parent / f"{base.name}.on-delete.sh", as_sent(on_delete, "") if on_delete else f"{delete}\n"
            )
        per_node[node].append(r.name)
    for name in sorted(used):
        if name in catalog:
            _write(out / "scripts" / name, catalog[name])
    return per_node


def _configs(spec: Spec, out: Path) -> None:
    configs = out / "configs"
    minor = parse_minor(spec.kubernetes_version)
    _write(configs / "kubelet-config.v1beta1.yaml", yaml_text.dump(kubelet_configuration(spec.kubelet, minor)))
    _write(configs / "containerd-config.v2.toml", containerd_config_toml(spec.kubelet, spec.images, "1.7"))
    _write(configs / "containerd-config.v3.toml", containerd_config_toml(spec.kubelet, spec.images, "2"))
    if spec.cluster.mode == "kubeadm" and spec.control_planes:
        first = spec.control_planes[0]
        _write(configs / f"kubeadm-init.v1beta4.{first.name}.yaml", kubeadm.init_config(spec, first))
        for node in spec.nodes:
            if node is not first:
                _write(configs / f"kubeadm-join.v1beta4.{node.name}.yaml", kubeadm.join_config(spec, node))


def _releases(ordered: Iterable[RecordedResource], out: Path) -> list[tuple[str, str, str, str]]:
    rows = []
    for r in ordered:
        if r.type != RELEASE:
            continue
        values = r.inputs.get("values") or {}
        name = str(r.inputs.get("name") or r.name)
        _write(out / "releases" / f"{_safe(name)}.values.yaml", yaml_text.dump(values) if values else "{}\n")
        rows.append((name, str(r.inputs.get("chart")), str(r.inputs.get("version")), str(r.inputs.get("namespace"))))
    return rows


def _manifests(resources: Iterable[RecordedResource], out: Path) -> int:
    count = 0
    for r in resources:
        if not r.custom or not r.type.startswith("kubernetes:") or r.type == RELEASE:
            continue
        kind = r.inputs.get("kind") or r.type.rsplit(":", 1)[-1]
        _write(out / "manifests" / f"{_safe(str(kind))}-{_safe(r.name)}.yaml", yaml_text.dump(r.inputs))
        count += 1
    return count


def write_plan(
    run: ProgramRun,
    out: Path,
    *,
    project: str,
    stack: str,
    spec: Spec | None,
    at: datetime | None = None,
    previous: Mapping[str, Any] | None = None,
    earlier: Mapping[str, Any] | None = None,
    compared_with: str | None = None,
    secrets: Mapping[str, str] | None = None,
    bundle: Mapping[str, Any] | None = None,
) -> str:
    """Write every plan file under `out` (replacing what was there) and return the terminal text: the review's
    first screen (REVIEW.md; against `earlier`, an earlier plan, when given), then everything planned."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    ordered = run_order(run.resources)
    document = plan_document(
        run,
        project=project,
        stack=stack,
        spec=spec,
        ordered=ordered,
        at=at,
        previous=previous,
        secrets=secrets,
        bundle=bundle,
    )
    per_node = _node_scripts(ordered, spec, out, document["scripts"])
    if spec is not None:
        _configs(spec, out)
    releases = _releases(ordered, out)
    manifests = _manifests(run.resources, out)
    # The diff reads both plans as plan.json holds them.
    diff = diff_plans(earlier, json.loads(json.dumps(document))) if earlier is not None else None
    first_screen = review(
        stack=stack,
        at=document["at"],
        per_node=per_node,
        releases=releases,
        acceptance=document["acceptance"],
        llm_routing=document["llmRouting"],
        bundle=document["bundle"],
        warnings=document["warnings"],
        deployed=bool(previous),
        diff=diff,
        compared_with=compared_with,
    )
    document["review"] = first_screen
    _write(out / "plan.json", json.dumps(document, indent=2, sort_keys=False) + "\n")
    _write(out / "REVIEW.md", "\n".join(["```text", *first_screen, "```"]) + "\n")
    everything = summary(ordered, per_node, releases, manifests, stack)
    return "\n".join([*first_screen, "", "everything planned (run order)", "", everything])


def summary(
    ordered: list[RecordedResource],
    per_node: dict[str, list[str]],
    releases: list[tuple[str, str, str, str]],
    manifests: int,
    stack: str,
) -> str:
    lines = [f"Plan for stack {stack}: {len(ordered)} resources"]
    if per_node:
        lines.append("")
        lines.append(f"{'node':<14} {'steps':>5}  run order")
        for node, steps in per_node.items():
            short = [s.removeprefix(f"{node}-") for s in steps]
            lines.append(f"{node:<14} {len(steps):>5}  {' > '.join(short)}")
    if releases:
        lines.append("")
        lines.append(f"{'release':<32} {'version':<10} {'namespace':<18} chart")
        for name, chart, version, namespace in releases:
            lines.append(f"{name:<32} {version:<10} {namespace:<18} {chart}")
    # Rendered by the provider at preview/up (remote targets), so the plan shows what is pinned, not the objects.
    directories = [r for r in ordered if r.type == KUSTOMIZE_DIRECTORY]
    if directories:
        lines.append("")
        lines.append(f"{'kustomize target':<32} directory")
        lines += [f"{r.name:<32} {r.inputs.get('directory')}" for r in directories]
    counts = Counter(r.type for r in ordered)
    lines.append("")
    lines.append("resources by type: " + ", ".join(f"{t} {n}" for t, n in sorted(counts.items())))
    if manifests:
        lines.append(f"manifests: {manifests}")
    return "\n".join(lines)
