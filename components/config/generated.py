"""Generated blocks of the docs (the config reference, the version table, the kubelet placement): printed, or
written in place between their markers; tests fail when one is stale."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def replace_generated(document: str, start: str, end: str, body: str) -> str:
    """`document` with the text between the start and end markers replaced by `body`."""
    head, tail = document.index(start), document.index(end)
    return document[: head + len(start)] + "\n" + body + document[tail:]


def generated_main(argv: list[str] | None, description: str, start: str, end: str, render: Callable[[], str]) -> int:
    """CLI of a generated block: print it, or `--write FILE` to replace it between its markers in FILE."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--write", type=Path, help="file to update in place, between the markers")
    args = parser.parse_args(argv)
    if args.write:
        args.write.write_text(replace_generated(args.write.read_text(), start, end, render()))
    else:
        sys.stdout.write(render())
    return 0
