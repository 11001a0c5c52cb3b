"""`python -m components.airgap`: the air-gap bundle's lockfile (docs/air-gap.md).

    python -m components.airgap lock --stack onprem --charts CHARTS --out bundle.lock.json
    python -m components.airgap check --stack onprem --charts CHARTS --lock bundle.lock.json
    python -m components.airgap diff old.lock.json new.lock.json
    python -m components.airgap fetch --lock bundle.lock.json --charts CHARTS --out bundle [--arch amd64]

CHARTS holds each chart the stack installs as `<chart>/<version>/` (`helm pull <ref> --version V --untar
--untardir CHARTS/<chart>/<version>` on a machine with internet); they are rendered offline with the real Helm
engine. `check` exits 2 and names every item the stack needs that the lockfile lacks. `fetch` (on a machine with
internet) brings every item of the lockfile into one folder with its digest, and writes the fetched lockfile there
(components/airgap/fetch.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..config.stack_cli import add_stack_arguments, spec_or_report, stack_path_and_name
from ..plan.bundle import lock_diff, missing
from ..plan.engine import run_program
from .charts import pulled_chart, render_templates, split_manifests
from .fetch import LOCKFILE, RPM_ARCH, FetchError, fetch_bundle
from .lock import stack_lock


def unpack_bundle_charts(lock: Mapping[str, Any], bundle: Path, into: Path) -> None:
    """Each chart archive of a fetched bundle as `<into>/<chart>/<version>/` (an archive holds one top folder, the
    chart's), for the render; an archive that is missing is left to be named as unrendered."""
    for chart in lock.get("charts") or []:
        archive = bundle / str(chart.get("path") or "")
        if not chart.get("path") or not archive.is_file():
            continue
        target = into / str(chart["name"]) / str(chart["version"])
        target.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter="data")
        (top,) = [p for p in target.iterdir() if p.is_dir()]
        for item in top.iterdir():
            item.rename(target / item.name)
        top.rmdir()


def directory_render(charts: Path, kube_version: str) -> Any:
    def render(chart: str, version: str, values: Mapping[str, Any], release: str, namespace: str) -> Iterable[Any]:
        texts, _ = render_templates(
            pulled_chart(charts, chart, version),
            values,
            release=release,
            namespace=namespace,
            kube_version=kube_version,
        )
        for name in sorted(texts):
            if not name.endswith("NOTES.txt"):
                yield from split_manifests(texts[name])

    return render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.airgap", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("lock", "check"):
        command = commands.add_parser(name)
        add_stack_arguments(command)
        if name == "lock":
            command.add_argument(
                "--charts", type=Path, required=True, help="folder of pulled charts (<chart>/<version>)"
            )
            command.add_argument("--out", type=Path, help="write the lockfile here (default: stdout)")
        else:
            command.add_argument(
                "--charts", type=Path, help="folder of pulled charts (default: the fetched bundle's own archives)"
            )
            command.add_argument("--lock", type=Path, required=True, help="the bundle's lockfile")
    fetch = commands.add_parser("fetch")
    fetch.add_argument("--lock", type=Path, required=True, help="the lockfile `lock` wrote")
    fetch.add_argument("--charts", type=Path, required=True, help="folder of pulled charts (<chart>/<version>)")
    fetch.add_argument("--out", type=Path, required=True, help="the bundle folder (resumed when it exists)")
    fetch.add_argument("--arch", choices=sorted(RPM_ARCH), default="amd64", help="the nodes' architecture")
    fetch.add_argument("--rhel-release", default="9", help="RHEL major of the nodes (Docker's containerd.io)")
    fetch.add_argument(
        "--registries-conf", type=Path, help="a containers-registries.conf for skopeo (a proxy or mirror to pull from)"
    )
    fetch.add_argument(
        "--image",
        action="append",
        default=[],
        help="an image the lockfile's `unresolved` asks for (repeatable): each line of `kubeadm config images list`",
    )
    compare = commands.add_parser("diff")
    compare.add_argument("old", type=Path)
    compare.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    if args.command == "fetch":
        try:
            fetched = fetch_bundle(
                json.loads(args.lock.read_text()),
                args.charts,
                args.out,
                arch=args.arch,
                rhel_release=args.rhel_release,
                registries_conf=args.registries_conf,
                extra_images=args.image,
            )
        except (OSError, ValueError) as error:
            print(f"airgap: {args.lock}: {error}", file=sys.stderr)
            return 2
        except FetchError as error:
            print(f"airgap: fetch stopped: {error} (run it again to resume)", file=sys.stderr)
            return 2
        counts = fetched.get("counts") or {}
        for note in fetched.get("unresolved") or []:
            print(f"note: the lockfile leaves unresolved: {note}; add what it names with --image", file=sys.stderr)
        print(
            f"fetched {args.out}: {counts.get('charts', 0)} charts, {counts.get('images', 0)} images,"
            f" {counts.get('packages', 0)} packages, {counts.get('files', 0)} files, each at its digest; lockfile"
            f" {args.out / LOCKFILE}"
        )
        return 0
    if args.command == "diff":
        lines = lock_diff(json.loads(args.old.read_text()), json.loads(args.new.read_text()))
        print("\n".join(lines) if lines else "no change")
        return 0
    path, stack = stack_path_and_name(args)
    read = spec_or_report(path)
    if read is None:
        return 2
    stack_file, spec = read
    print(f"reading what stack {stack} needs from {path} ...", file=sys.stderr)
    run = run_program(stack_file.config, stack_file.secret_keys, stack=stack, preview=True)
    with contextlib.ExitStack() as cleanup:
        charts = args.charts
        if charts is None:
            # Inside the site: the charts are the bundle's archives, beside its lockfile.
            charts = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="mlcluster-charts-")))
            unpack_bundle_charts(json.loads(args.lock.read_text()), args.lock.parent, charts)
        lock = stack_lock(spec, run.resources, directory_render(charts, spec.kubernetes_version), stack=stack)
    if lock["unrendered"]:
        # Their images cannot be known: a lockfile without them would let the site find out at pull time.
        where = args.charts or f"the bundle beside {args.lock}"
        print(
            f"airgap: {', '.join(lock['unrendered'])} not under {where}: helm pull each there"
            " (<chart>/<version>), then run again",
            file=sys.stderr,
        )
        return 2
    if args.command == "lock":
        text = json.dumps(lock, indent=2) + "\n"
        if args.out:
            args.out.write_text(text)
            counts = lock["counts"]
            print(
                f"wrote {args.out}: {counts['charts']} charts, {counts['images']} images, {counts['packages']}"
                f" packages, {counts['files']} files; digests are filled when the bundle is fetched"
            )
        else:
            sys.stdout.write(text)
        return 0
    absent = missing(lock, json.loads(args.lock.read_text()))
    if absent:
        print(f"the bundle {args.lock} lacks {len(absent)} item(s) this stack needs:", file=sys.stderr)
        for line in absent:
            print(f"  {line}", file=sys.stderr)
        return 2
    print(f"the bundle {args.lock} holds everything stack {stack} needs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
