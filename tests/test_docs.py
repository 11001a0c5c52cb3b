"""The README's config reference is generated from the spec; Pulumi.yaml's declarations match it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import yaml

from components.config.reference import END, START, reference_markdown
from components.config.spec import DEFAULT_KUBERNETES_VERSION

from . import docs_facts
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


# --- facts the docs state about the code (tests/docs_facts.py) ------------------------------------


def test_every_fact_the_docs_state_is_current() -> None:
    stated = [name for page in docs_facts.pages() for name, _ in docs_facts.stated(page.read_text())]
    assert set(stated) == set(docs_facts.FACTS), "a fact is generated but stated nowhere, or the reverse"
    assert [p for page in docs_facts.pages() for p in docs_facts.problems(page)] == [], "run `make docs`"


def test_a_stated_number_that_no_longer_holds_fails_and_make_docs_fixes_it(tmp_path: Path) -> None:
    facts = {"suite-tests": lambda: "504", "gpu-taint-providers": lambda: "GKE"}
    page = tmp_path / "page.md"
    page.write_text(
        "| fleet | <!-- fact:suite-tests -->399<!-- /fact --> tests |\n"
        "taints from <!-- fact:gpu-taint-providers -->GKE, EKS and AKS<!-- /fact --> pools; "
        "<!-- fact:sessions -->1<!-- /fact -->\n"
    )
    assert docs_facts.problems(page, facts) == [
        "page.md: fact suite-tests says '399', the code says '504'",
        "page.md: fact gpu-taint-providers says 'GKE, EKS and AKS', the code says 'GKE'",
        "page.md: unknown fact 'sessions' (known: gpu-taint-providers, suite-tests)",
    ]
    page.write_text(docs_facts.rewrite(page.read_text(), facts))
    assert docs_facts.problems(page, facts) == [
        "page.md: unknown fact 'sessions' (known: gpu-taint-providers, suite-tests)"
    ]
    assert "<!-- fact:suite-tests -->504<!-- /fact --> tests" in page.read_text()


def test_generated_facts_follow_the_code(monkeypatch) -> None:
    from components.config import providers

    assert docs_facts.gpu_taint_providers() == "GKE"
    eks = providers._MANAGED["eks"]
    monkeypatch.setitem(providers._MANAGED, "eks", dataclasses.replace(eks, gpu_taint=True))
    assert docs_facts.gpu_taint_providers() == "GKE and EKS"
    sessions = docs_facts.benchmark_table_column("peak sessions per host")
    assert sessions and docs_facts.peak_sessions_per_host() == str(max(int(s.split()[0]) for s in sessions))
    assert docs_facts.leading_number("26.3 (26.1)") == 26.3 and docs_facts.leading_number("**0**") == 0


# --- structure: tables stay tables, references resolve -------------------------------------------

SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def broken_tables(text: str) -> list[str]:
    """Table rows not under a header and separator: a paragraph inside a table cuts it, and Markdown then shows
    the rows after it as text."""
    found, block, fenced = [], [], False
    for line in [*text.splitlines(), ""]:
        fenced ^= line.startswith("```")
        if line.startswith("|") and not fenced:
            block.append(line)
            continue
        if block and (len(block) < 2 or not SEPARATOR.match(block[1])):
            found.append(block[0])
        block = []
    return found


def test_every_table_in_the_docs_is_whole() -> None:
    assert {page.name: broken_tables(page.read_text()) for page in docs_facts.pages()} == {
        page.name: [] for page in docs_facts.pages()
    }


def test_a_paragraph_inside_a_table_is_found() -> None:
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert broken_tables(table) == [] and broken_tables(table + "a paragraph\n| 3 | 4 |\n") == ["| 3 | 4 |"]
    assert broken_tables("```\n| not | a table |\n```\n") == []


# A path under ../shared/ is checked there (the shared folder lies beside the project, in CI too).
DOC_PATH = re.compile(
    r"((?:\.\./shared/)?(?<![\w/:-])(?:docs/[\w./-]+\.md|components/[\w./-]+\.(?:py|sh)|stacks/Pulumi\.[\w-]+\.yaml))\b"
)


def test_paths_the_docs_and_scripts_point_to_exist() -> None:
    sources = [*docs_facts.pages(), *sorted((PROJECT / "components" / "scripts").glob("*.sh"))]
    named = {(src.name, m) for src in sources for m in DOC_PATH.findall(src.read_text())}
    # What a walk-through tells the reader to create (`cp example yours`) is not expected to exist.
    created = {m for src in sources for m in re.findall(r"\bcp \S+ (\S+)", src.read_text())}
    assert named, "the pattern finds nothing: the check would check nothing"
    assert sorted((src, path) for src, path in named if not (PROJECT / path).exists() and path not in created) == []
