"""The pinned kustomize targets build offline from the shared fixture trees, and every object validates.

Pipelines names Argo Workflows by remote URL; the test builds a copy (in tmp_path) whose URLs point at the
fixture copy of Argo, which is what the provider fetches over the network at preview.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config.spec import DEFAULT_KUBERNETES_VERSION
from components.render.training import (
    KustomizeTarget,
    legacy_training_operator_targets,
    notebooks_targets,
    pipelines_targets,
)

from .conftest import load_spec, stack_values
from .markers import slow_work
from .test_rendered_charts import fixture_crds, object_errors
from .upstream import ManifestLoader, require_upstream

FIXTURE_TREES = {
    "kubeflow/trainer": "kubeflow-training-operator",
    "kubeflow/pipelines": "kubeflow-pipelines",
    "kubeflow/notebooks": "kubeflow-notebooks",
}
ARGO_URL = re.compile(r"https://github\.com/argoproj/argo-workflows/(?P<path>[^?\s]+)\?ref=(?P<ref>v[\d.]+)")
# Objects each target builds to (charts/RENDER-CHECK.md): a build that silently drops a base fails here.
MINOR = DEFAULT_KUBERNETES_VERSION  # the version the stacks pin; validation uses its minor
EXPECTED_OBJECTS = {"training-operator": 14, "notebook-controller": 13, "pipelines-cluster-scoped": 15, "pipelines": 66}


def targets() -> list[KustomizeTarget]:
    spec = load_spec(*stack_values("onprem"))
    return [
        *legacy_training_operator_targets(spec.kubeflow),
        *pipelines_targets(spec.kubeflow),
        *notebooks_targets(spec.kubeflow),
    ]


def offline_tree(target: KustomizeTarget, scratch: Path) -> Path:
    """A copy of the target's fixture tree whose remote Argo bases point at the fixture copy of Argo."""
    upstream = require_upstream() / "kustomize"
    tree = scratch / FIXTURE_TREES[target.repository] / target.ref
    shutil.copytree(upstream / FIXTURE_TREES[target.repository] / target.ref, tree, dirs_exist_ok=True)
    for kustomization in tree.rglob("kustomization.yaml"):
        text = kustomization.read_text()

        def local(match: re.Match[str], here: Path = kustomization.parent) -> str:
            argo = upstream / "argo-workflows" / match["ref"] / match["path"]
            assert argo.is_dir(), f"{match[0]} has no fixture copy at {argo}"
            return os.path.relpath(argo, here)

        kustomization.write_text(ARGO_URL.sub(local, text))
    return tree / target.path


def build(directory: Path) -> list[dict[str, Any]]:
    slow_work("render")
    result = subprocess.run(
        ["kubectl", "kustomize", str(directory)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.load_all(result.stdout, Loader=ManifestLoader) if d]


@pytest.mark.render
@pytest.mark.parametrize("target", targets(), ids=lambda t: t.name)
def test_target_builds_offline_and_validates(target: KustomizeTarget, tmp_path: Path) -> None:
    objects = build(offline_tree(target, tmp_path))
    assert len(objects) == EXPECTED_OBJECTS[target.name]
    crds = {
        **fixture_crds(),
        **{
            (d["spec"]["group"], d["spec"]["names"]["kind"]): d
            for d in objects
            if d["kind"] == "CustomResourceDefinition"
        },
    }
    problems = [f"{o['kind']}/{o['metadata'].get('name')}: {e}" for o in objects for e in object_errors(o, crds, MINOR)]
    assert problems == []


def test_pipelines_names_argo_by_remote_url() -> None:
    """Why preview needs network (docs/training.md): the fixture keeps the upstream remote bases verbatim."""
    tree = require_upstream() / "kustomize" / "kubeflow-pipelines"
    remote = [p for p in tree.rglob("kustomization.yaml") if ARGO_URL.search(p.read_text())]
    assert len(remote) == 3
