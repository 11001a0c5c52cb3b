"""The shape of components/: imports run one way between layers and never in a circle, config's section modules
stay apart from the Spec, and the functions that render and apply name the sections they read.

The import graph is read from the source (every `import`, `TYPE_CHECKING` ones included), so a circle that only a
type checker follows counts as one.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pytest

from .conftest import PROJECT
from .python_source import parse_python_files

COMPONENTS = PROJECT / "components"

LAYERS = {
    "acceptance": 0,  # the acceptance core: parsers, verdicts, waves; reads no config
    "config": 1,
    "warnings": 2,
    "render": 3,
    "cluster": 4,
    "conformance": 4,
    "platform": 5,
    "plan": 6,
    "airgap": 7,  # the bundle's lockfile: runs the program (plan.engine) and renders its releases
}
"""Each part of components/ and its floor: a module imports only from its own part or a lower floor."""

CONFIG_WHOLE_STACK = {"spec", "rules", "derived", "load", "reference", "stack_cli"}
"""The config modules that read the whole Spec: the Spec itself, the cross-section rules, the derived facts, the
loader, the generated reference and the stack-file helpers. A section module never imports the Spec."""

WHOLE_SPEC_CEILING = {"render": 67, "cluster": 19, "platform": 16}
"""Functions taking the whole Spec, per part (157 in render/, 26 in cluster/, 17 in platform/ before they were
narrowed to the sections they read). Those left pass it on to a derived fact or read four sections or more; a new
function takes its sections, so the count only goes down."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PROJECT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _trees() -> dict[str, tuple[Path, ast.Module]]:
    trees = parse_python_files(sorted(COMPONENTS.rglob("*.py")))
    return {_module_name(path): (path, tree) for path, tree in trees.items()}


def import_graph(trees: Mapping[str, tuple[Path, ast.Module]]) -> dict[str, set[str]]:
    """Module -> the modules of components/ it imports (a `from package import module` names the module)."""
    graph: dict[str, set[str]] = {name: set() for name in trees}
    for name, (path, tree) in trees.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in trees else base
                    if target in trees and target != name:
                        graph[name].add(target)
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names if alias.name in trees and alias.name != name)
    return graph


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if _part(source) in LAYERS and _part(target) in LAYERS and LAYERS[_part(target)] > LAYERS[_part(source)]
    )


def whole_spec_functions(trees: Mapping[str, tuple[Path, ast.Module]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for name, (_, tree) in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                if any(
                    a.annotation is not None and ast.unparse(a.annotation).strip("'\"") == "Spec" for a in arguments
                ):
                    counts[_part(name)] += 1
    return counts


@pytest.fixture(scope="module")
def trees() -> dict[str, tuple[Path, ast.Module]]:
    return _trees()


def test_every_part_of_components_has_a_floor(trees: Mapping[str, tuple[Path, ast.Module]]) -> None:
    parts = {_part(name) for name in trees if name != "components"}
    assert parts - set(LAYERS) == set(), "a new part of components/: give it a floor in LAYERS"


def test_imports_run_one_way_between_layers(trees: Mapping[str, tuple[Path, ast.Module]]) -> None:
    assert upward_imports(import_graph(trees)) == []


def test_no_module_imports_itself_back_through_others(trees: Mapping[str, tuple[Path, ast.Module]]) -> None:
    assert circles(import_graph(trees)) == []


@pytest.mark.parametrize(
    ("graph", "expected_circles", "expected_upward"),
    [
        ({"components.config.a": {"components.config.b"}, "components.config.b": {"components.config.a"}},
         [["components.config.a", "components.config.b"]], []),
        ({"components.config.a": {"components.render.b"}, "components.render.b": set()},
         [], ["components.config.a -> components.render.b"]),
        ({"components.render.a": {"components.config.b"}, "components.config.b": set()}, [], []),
    ],
    ids=["a circle inside config", "config importing render", "render importing config"],
)  # fmt: skip
def test_the_checks_see_a_circle_and_an_upward_import(
    graph: dict[str, set[str]], expected_circles: list[list[str]], expected_upward: list[str]
) -> None:
    assert circles(graph) == expected_circles
    assert upward_imports(graph) == expected_upward


def test_config_section_modules_never_import_the_spec(trees: Mapping[str, tuple[Path, ast.Module]]) -> None:
    graph = import_graph(trees)
    offenders = [
        name
        for name in graph
        if _part(name) == "config" and name.rsplit(".", 1)[-1] not in CONFIG_WHOLE_STACK
        if graph[name] & {f"components.config.{m}" for m in CONFIG_WHOLE_STACK}
    ]
    assert offenders == [], "a section's checks read its section; a rule over several goes to config/rules.py"


def test_whole_spec_signatures_do_not_grow(trees: Mapping[str, tuple[Path, ast.Module]]) -> None:
    counts = whole_spec_functions(trees)
    grown = {part: counts[part] for part, ceiling in WHOLE_SPEC_CEILING.items() if counts[part] > ceiling}
    assert grown == {}, f"take the sections the function reads, not the Spec (ceilings: {WHOLE_SPEC_CEILING})"
