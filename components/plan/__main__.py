"""`python -m components.plan`: the offline plan of a stack, without the Pulumi CLI.

    python -m components.plan --stack onprem --out build/onprem
    python -m components.plan --stack-file path/to/Pulumi.mystack.yaml --out build/mystack
    python -m components.plan --stack onprem --out build/new --compare build/old   (what changes, per node/release)
    python -m components.plan --stack onprem --stack-outputs outputs.json   (`pulumi stack output --json`: what
        the last deployment recorded, such as the certificates' dates, as a preview of that stack reads it)
    python -m components.plan --stack onprem --at 2026-12-24T09:00Z   (the plan as the program would make it then)

Exit 0 with the plan written; exit 2 with the validation report when the config is invalid.
Secrets are never written: they appear as "[secret]", values known only after apply as "[computed]".
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pulumi

from .. import conformance
from ..cluster import clock
from ..config import checks
from ..config.stack_cli import PROJECT_ROOT, add_stack_arguments, spec_or_report, stack_path_and_name
from ..render.acceptance import OUTPUT as ACCEPTANCE_OUTPUT
from ..render.certificates import OUTPUT as CERTIFICATES_OUTPUT
from ..render.certificates import record_from_output as certificates_record
from ..render.control_planes import OUTPUT as CONTROL_PLANES_OUTPUT
from ..render.control_planes import WORKERS_OUTPUT
from ..render.join_credentials import OUTPUT as JOIN_CREDENTIALS_OUTPUT
from ..render.join_credentials import record_from_output as join_record
from ..render.upgrade import VERSION_OUTPUT
from .bundle import plan_section
from .diff import load_plan
from .engine import PreviewMocks, run_program
from .writer import write_plan


@contextlib.contextmanager
def program_messages() -> Iterator[list[tuple[str, str]]]:
    """(level, message) of what the program logs while it runs (the mock engine logs to the root logger)."""
    said: list[tuple[str, str]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append((record.levelname.lower(), record.getMessage()))

    root = logging.getLogger()
    handler, level = Collect(logging.INFO), root.level
    root.addHandler(handler)
    root.setLevel(min(level, logging.INFO) if level else logging.INFO)
    try:
        yield said
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


OUTPUTS_READ = (
    CONTROL_PLANES_OUTPUT,
    WORKERS_OUTPUT,
    VERSION_OUTPUT,
    JOIN_CREDENTIALS_OUTPUT,
    CERTIFICATES_OUTPUT,
    ACCEPTANCE_OUTPUT,
)
"""Every output of its last deployment the program reads (a StackReference to its own stack), so every one a
--stack-outputs file may give (tests/test_plan_cli.py holds it to the program's reads)."""

STACK_OUTPUTS_FORMAT = (
    "`pulumi stack output --json` of the deployed stack: one JSON object, output name -> value; read are"
    f' `{CERTIFICATES_OUTPUT}` ({{"renewBefore": "…", "notAfter": {{node: {{certificate: date}}}}}}),'
    f' `{JOIN_CREDENTIALS_OUTPUT}` ({{"mintedFor": "…", "nodes": [node, …]}}) and `{VERSION_OUTPUT}`'
    f' ("1.34.2"), checked here; {CONTROL_PLANES_OUTPUT}, {WORKERS_OUTPUT} and {ACCEPTANCE_OUTPUT} are read as the'
    " program reads them; others are not read"
)


def _recorded_version(value: object) -> str | None:
    return value if isinstance(value, str) and checks.k8s_version(value) is None else None


def stack_outputs_problems(outputs: object) -> list[str]:
    """Why a --stack-outputs document is not what `pulumi stack output --json` prints for this program: a wrong
    shape would otherwise read as a stack never deployed ("no record yet") without a word."""
    if not isinstance(outputs, dict):
        return [f"is {type(outputs).__name__}, not an object of outputs ({STACK_OUTPUTS_FORMAT})"]
    readers: dict[str, Callable[[object], object]] = {
        CERTIFICATES_OUTPUT: certificates_record,
        JOIN_CREDENTIALS_OUTPUT: join_record,
        VERSION_OUTPUT: _recorded_version,
    }
    return [
        f"output {name!r} is not what this program exports ({STACK_OUTPUTS_FORMAT})"
        for name, read in readers.items()
        if name in outputs and read(outputs[name]) is None
    ]


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 moment (2026-12-24T09:00Z)") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no UTC offset: add Z (UTC) or +HH:MM")
    return moment.astimezone(UTC)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.plan", description=__doc__.split("\n\n")[0])
    add_stack_arguments(parser)
    parser.add_argument("--out", type=Path, help="output folder (default build/<stack>)")
    parser.add_argument("--compare", type=Path, help="earlier plan folder (or plan.json): print what changes")
    parser.add_argument(
        "--stack-outputs",
        type=Path,
        help="the deployed stack's outputs: the previous deployment the program reads (certificate dates, join"
        " credentials, the version every node runs); without it, a stack never deployed. Format: "
        + STACK_OUTPUTS_FORMAT.replace("%", "%%"),
    )
    parser.add_argument(
        "--bundle-lock",
        type=Path,
        help="the air-gap bundle's lockfile (python -m components.airgap lock): plan.json lists its items, and"
        " --compare shows those added, removed or with a new digest",
    )
    parser.add_argument(
        "--at",
        type=_moment,
        help="the moment to plan for, ISO 8601 with a UTC offset (2026-12-24T09:00Z; default: now). The program's"
        " clock counts the certificates' days left and the join credentials' mint window from it: give two plans"
        " to compare the same --at so that only their stacks differ",
    )
    args = parser.parse_args(argv)

    path, stack = stack_path_and_name(args)
    out = args.out or PROJECT_ROOT / "build" / stack

    if args.compare is not None and not (args.compare / "plan.json").is_file() and not args.compare.is_file():
        print(f"error: {args.compare} holds no plan.json to compare with", file=sys.stderr)
        return 2
    # Read before writing: --compare may name the folder --out replaces.
    earlier = load_plan(args.compare) if args.compare is not None else None

    started = time.perf_counter()
    read = spec_or_report(path)
    if read is None:
        return 2
    stack_file, spec = read
    bundle = None
    if args.bundle_lock is not None:
        try:
            bundle = plan_section(json.loads(args.bundle_lock.read_text()), args.bundle_lock.name)
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(f"error: --bundle-lock {args.bundle_lock}: {error}", file=sys.stderr)
            return 2
    print(f"planning stack {stack} from {path} ...", file=sys.stderr)
    previous: dict[str, object] = {}
    if args.stack_outputs is not None:
        try:
            previous = json.loads(args.stack_outputs.read_text())
        except (OSError, ValueError) as error:
            print(f"error: --stack-outputs {args.stack_outputs}: {error}", file=sys.stderr)
            return 2
        problems = stack_outputs_problems(previous)
        for problem in problems:
            print(f"error: --stack-outputs {args.stack_outputs}: {problem}", file=sys.stderr)
        if problems:
            return 2
    mocks = PreviewMocks(previous)
    at: datetime = args.at or datetime.now(UTC)
    with program_messages() as said, clock.fixed_at(at):
        try:
            run = run_program(stack_file.config, stack_file.secret_keys, stack=stack, mocks=mocks)
        except pulumi.RunError as refused:
            # What the program refuses at preview (a version the cluster cannot go to), as the CLI prints it.
            print(f"error: {refused}", file=sys.stderr)
            return 2
    for other in dict.fromkeys(mocks.other_stacks):
        print(
            f"note: stack {other} (a StackReference) cannot be read offline: what comes from its outputs is"
            " [computed] or [secret] here; `pulumi preview` reads them",
            file=sys.stderr,
        )
    # Every warning the program gave (components/warnings.py), once each, then what else it logged.
    for warning in run.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for level, message in said:
        if message not in run.warnings:
            print(f"{level}: {message}", file=sys.stderr)
    text = write_plan(
        run,
        out,
        project="mlcluster",
        stack=stack,
        spec=spec,
        at=at,
        previous=previous,
        earlier=earlier,
        compared_with=str(args.compare) if args.compare is not None else None,
        secrets=stack_file.secret_digests,
        bundle=bundle,
    )
    # The AI-conformance evidence pack beside the plan (python -m components.conformance writes it alone).
    try:
        conformance.write_pack(spec, out / "ai-conformance", stack=stack)
    except LookupError as missing:
        print(f"note: no AI-conformance evidence pack: {missing}", file=sys.stderr)
    elapsed = time.perf_counter() - started
    print(text)
    print(f"\nwrote {out}/REVIEW.md (the first screen above), plan.json and review files in {elapsed:.2f}s")
    return 0


if __name__ == "__main__":
    # One plan per process, everything it builds alive until it exits: the cyclic GC would only re-walk that heap
    # (a fifth of a 1,000-node plan's time, for ~10 % less memory).
    gc.disable()
    sys.exit(main())
