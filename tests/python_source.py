"""Parsing the project's own Python in a test process that has run Pulumi programs before."""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterable
from pathlib import Path


def parse_python(path: Path) -> ast.Module:
    """`ast.parse` of one file, with no garbage collection while it builds the tree.

    A failed Pulumi program leaves asyncio futures whose finalizers log their exceptions. On Python 3.11 a
    collection that runs such a finalizer in the middle of `ast.parse` formats a traceback, whose carets call
    `ast.parse` again and reset the AST constructor's shared recursion counter: the outer parse then fails with
    "SystemError: AST constructor recursion depth mismatch". Collecting first and pausing the collector for the
    parse leaves no finalizer to run inside it.
    """
    return parse_python_files([path])[path]


def parse_python_files(paths: Iterable[Path]) -> dict[Path, ast.Module]:
    """`parse_python` of many files under one collection: a collection of a heap that has run Pulumi programs
    takes tens of milliseconds, which once per file of components/ was seconds."""
    texts = {path: path.read_text() for path in paths}
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        return {path: ast.parse(text, filename=str(path)) for path, text in texts.items()}
    finally:
        if was_enabled:
            gc.enable()
