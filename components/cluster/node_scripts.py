"""NodeScripts: each node's copy of mlcluster's script files, one `remote.CopyToRemote` per node.

Every node step sources the library and its own body from this copy (components/render/shell.py), so the commands
the engine stores (each one twice, as input and output) carry their settings and the content hashes of the files
they source, not the text of the library and every step. The copy's source is a directory of the current files,
each named by its content (`<name>-<sha16>.sh`), written under the project's `.mlcluster/` by this program: the
engine compares it by hash, so the copy runs again only when a script changed, and the host keeps the files of
earlier versions beside the new ones (a delete recorded months ago still finds its own script).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pulumi
from pulumi_command import remote

from ..config.nodes import NodeSpec
from ..config.spec import Spec
from ..render.shell import STORE, store_catalog
from .connection import dial_lanes, node_connection

PROJECT = Path(__file__).resolve().parents[2]
BUNDLES = PROJECT / ".mlcluster"
"""Where the program writes the directories the copies upload (ignored by git; safe to delete)."""
REMOTE_PATH = "."
"""The SSH user's login directory: SFTP writes relative paths there, and the copy lands in `./{STORE}`
whether or not it exists yet (pulumi-command copies a directory into an existing one)."""


def bundle_directory(catalog: Mapping[str, str], root: Path = BUNDLES) -> Path:
    """`root/<digest>/.mlcluster-scripts` holding exactly `catalog` (stored name -> text), written once: a directory
    that is already complete and intact is used as it is, another one is replaced atomically."""
    digest = hashlib.sha256("\n".join(sorted(catalog)).encode()).hexdigest()[:16]
    target = root / digest / STORE
    if _holds(target, catalog):
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=root))
    (staging / STORE).mkdir()
    for name, text in catalog.items():
        (staging / STORE / name).write_text(text)
    final = root / digest
    if _holds(target, catalog):
        # Another run wrote the same content meanwhile.
        shutil.rmtree(staging, ignore_errors=True)
        return target
    shutil.rmtree(final, ignore_errors=True)
    try:
        os.rename(staging, final)
    except OSError:
        # Another run wrote the same content first.
        shutil.rmtree(staging, ignore_errors=True)
        if not _holds(target, catalog):
            raise
    return target


def _holds(directory: Path, catalog: Mapping[str, str]) -> bool:
    if not directory.is_dir() or {p.name for p in directory.iterdir()} != set(catalog):
        return False
    return all((directory / name).read_text() == text for name, text in catalog.items())


def archive_path(directory: Path) -> str:
    """As the engine resolves an archive's path: relative to the program's directory (the project) when inside it,
    so the state does not record where this checkout happens to live."""
    try:
        return os.path.relpath(directory, Path.cwd()) if directory.is_relative_to(Path.cwd()) else str(directory)
    except ValueError:
        return str(directory)


class NodeScripts(pulumi.ComponentResource):
    copies: dict[str, remote.CopyToRemote]

    def __init__(self, spec: Spec, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("mlcluster:node_scripts:NodeScripts", spec.cluster.name, None, opts)
        source = pulumi.FileArchive(archive_path(bundle_directory(store_catalog())))
        self.copies = {node.name: self._copy(spec, node, source) for node in spec.nodes}
        self.register_outputs({})

    def _copy(self, spec: Spec, node: NodeSpec, source: pulumi.Archive) -> remote.CopyToRemote:
        return dial_lanes(
            spec,
            node,
            lambda dial_after: remote.CopyToRemote(
                f"{node.name}-scripts",
                connection=node_connection(spec.ssh, node),
                source=source,
                remote_path=REMOTE_PATH,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=list(dial_after),
                    # pulumi-command copies again on an update only when the source or remote path changed: a new
                    # SSH target (another address, a reinstalled host's key) must get the files too.
                    replace_on_changes=["connection"],
                    # A host that is gone cannot take a new copy: its record stays as it is until the node goes.
                    ignore_changes=["source", "connection"] if node.gone else None,
                ),
            ),
        )
