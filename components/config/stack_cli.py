"""A stack file named on a command line (`--stack NAME` or `--stack-file PATH`), read into its Spec, or the reason
it cannot be read printed: what every command that reads one stack shares (the plan, the evidence pack, the
policy check)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .load import StackFile, StackFileError, read_stack_document, spec_from_values
from .schema import NAMESPACE, ConfigError
from .spec import Spec

PROJECT_ROOT = Path(__file__).resolve().parents[2]
"""The checkout: Pulumi.yaml, stacks/, build/."""


def config_values(config: dict[str, str]) -> dict[str, object]:
    """The `mlcluster:` keys of a stack file's config, as the program reads them (structured values from JSON)."""
    out: dict[str, object] = {}
    for full_key, raw in config.items():
        if not full_key.startswith(f"{NAMESPACE}:"):
            continue
        key = full_key.split(":", 1)[1]
        try:
            out[key] = raw if key == "kubernetesVersion" else json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    """--stack NAME or --stack-file PATH, as every command that reads one stack takes them."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="stack name: reads stacks/Pulumi.<stack>.yaml")
    source.add_argument("--stack-file", type=Path, help="any stack file")


def stack_path_and_name(args: argparse.Namespace) -> tuple[Path, str]:
    """The stack file those arguments name, and the stack's name (from the file name for --stack-file)."""
    path: Path = args.stack_file or PROJECT_ROOT / "stacks" / f"Pulumi.{args.stack}.yaml"
    return path, args.stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")


def spec_or_report(path: Path) -> tuple[StackFile, Spec] | None:
    """The stack file and its Spec, or None after printing why the file or its config is invalid to stderr."""
    if not path.is_file():
        print(f"error: stack file {path} not found", file=sys.stderr)
        return None
    try:
        stack = read_stack_document(path)
        spec = spec_from_values(
            config_values(stack.config), lambda key: f"{NAMESPACE}:{key}" in stack.secret_keys, stack.is_secret_path
        )
    except StackFileError as error:
        print(error.report(), file=sys.stderr)
        return None
    except ConfigError as error:
        print(f"{path}: {error.report()}", file=sys.stderr)
        return None
    return stack, spec
