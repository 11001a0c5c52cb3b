"""The README's config reference is generated from the spec; Pulumi.yaml's declarations match it."""

from __future__ import annotations

import yaml

from components.config.reference import END, START, reference_markdown
from components.config.spec import DEFAULT_KUBERNETES_VERSION

from .conftest import PROJECT


def test_readme_reference_is_current() -> None:
    readme = (PROJECT / "README.md").read_text()
    assert START in readme and END in readme
    current = readme[readme.index(START) + len(START) : readme.index(END)].strip("\n")
    assert current == reference_markdown().strip("\n"), "README is stale: run `make docs`"


def test_pulumi_yaml_declarations_match_the_spec() -> None:
    project = yaml.safe_load((PROJECT / "Pulumi.yaml").read_text())
    assert project["name"] == "mlcluster" and project["stackConfigDir"] == "stacks"
    assert project["runtime"]["options"]["virtualenv"] == ".venv"
    declared = project["config"]["mlcluster:kubernetesVersion"]
    assert str(declared["default"]) == DEFAULT_KUBERNETES_VERSION
