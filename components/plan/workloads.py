"""`python -m components.plan.workloads`: a stack's workload manifests as YAML for kubectl.

    python -m components.plan.workloads --stack onprem | kubectl apply -f -
    python -m components.plan.workloads --stack onprem | kubectl diff -f -

The same rendered documents the program creates (namespace, checkpoint claims, jobs), with integers kept as
integers (the plan's manifests/ files show the engine's wire values, where every number is a float).
Exit 2 with the validation report when the config is invalid.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config.stack_cli import PROJECT_ROOT, spec_or_report
from ..render import yaml_text
from ..render.workloads import workload_manifests, workloads_namespace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.plan.workloads", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="stack name: reads stacks/Pulumi.<stack>.yaml")
    source.add_argument("--stack-file", type=Path, help="any stack file")
    args = parser.parse_args(argv)
    path = args.stack_file or PROJECT_ROOT / "stacks" / f"Pulumi.{args.stack}.yaml"
    read = spec_or_report(path)
    if read is None:
        return 2
    spec = read[1]
    documents = workload_manifests(spec)
    if documents and spec.workloads.create_namespace:
        documents.insert(0, workloads_namespace(spec.workloads))
    sys.stdout.write(yaml_text.dump_all(documents))
    return 0


if __name__ == "__main__":
    sys.exit(main())
