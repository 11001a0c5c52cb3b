"""What Spegel's `configuration` init container does to a node's containerd certs.d at every start of a Spegel pod
(a hostPath mount of /etc/containerd/certs.d), for the fleet to run on a host: Spegel cannot run here (no image, no
pods), its effect on the node's files can.

Upstream, spegel v0.7.4 pkg/oci/containerd.go:
- AddMirrorConfiguration: backupConfig, then clearConfig, then one hosts.toml per mirrored registry (templateHosts),
  with prependExisting the registry's backed-up hosts after Spegel's own (existingHosts) and the other files of its
  backed-up folder copied beside it;
- backupConfig: moves everything in the folder into `_backup`, once (an existing `_backup` is kept as it is);
- clearConfig: removes everything but `_backup`;
- templateHosts: `server` (docker.io's is registry-1.docker.io), then each mirror target with
  `capabilities = ['pull', 'resolve']` (resolveTags) and `dial_timeout = '200ms'`;
- existingHosts: each `[host.X]` table of the backed-up file, in the file's order, marshalled by go-toml v2
  (keys sorted, strings and keys in single quotes).
pkg/oci/filter.go parseRegistries: an empty list mirrors every registry (`_default`).

Not modelled: the basic-auth header, and backed-up hosts with nested tables (a `header`): the model refuses them.
tests/fleet/test_airgap_contracts.py holds the model to Spegel's own test cases at the tag."""

from __future__ import annotations

import argparse
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

BACKUP_DIR = "_backup"
WILDCARD = "_default"


def add_mirror_configuration(
    config_path: Path, mirrored: list[str], targets: list[str], *, resolve_tags: bool = True, prepend: bool = False
) -> None:
    registries = [urlsplit(registry) for registry in mirrored]
    config_path.mkdir(parents=True, exist_ok=True)
    _backup(config_path)
    _clear(config_path)
    capabilities = ["pull", "resolve"] if resolve_tags else ["pull"]
    for registry in registries or [None]:
        folder = registry.netloc if registry is not None else WILDCARD
        text = _template_hosts(registry, targets, capabilities)
        if prepend:
            existing = _existing_hosts(config_path / BACKUP_DIR / folder / "hosts.toml")
            if existing:
                backed_up = config_path / BACKUP_DIR / folder
                for source in sorted(p for p in backed_up.rglob("*") if p.is_file() and p.name != "hosts.toml"):
                    target = config_path / folder / source.relative_to(backed_up)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with target.open("ab") as out:  # os.O_APPEND, as Spegel opens it
                        out.write(source.read_bytes())
                text = text + "\n\n" + existing
        (config_path / folder).mkdir(parents=True, exist_ok=True)
        (config_path / folder / "hosts.toml").write_text(text)


def _backup(config_path: Path) -> None:
    backup = config_path / BACKUP_DIR
    if backup.is_dir():
        return
    entries = list(config_path.iterdir())
    backup.mkdir()
    for entry in entries:
        entry.rename(backup / entry.name)


def _clear(config_path: Path) -> None:
    for entry in config_path.iterdir():
        if entry.name == BACKUP_DIR:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _template_hosts(registry: Any, targets: list[str], capabilities: list[str]) -> str:
    lines = []
    if registry is not None:
        server = f"{registry.scheme}://{registry.netloc}"
        lines.append(f"server = '{'https://registry-1.docker.io' if server == 'https://docker.io' else server}'")
    for target in targets:
        lines.append(f"\n[host.'{target}']\ncapabilities = {_value(capabilities)}\ndial_timeout = '200ms'")
    return "\n".join(lines).strip()


def _existing_hosts(path: Path) -> str:
    if not path.is_file():
        return ""
    document = tomllib.loads(path.read_text())
    hosts = document.get("host") or {}
    if not hosts:
        return ""
    blocks = []
    for name in _host_table_order(path.read_text(), hosts):
        fields = hosts[name]
        if any(isinstance(value, dict) for value in fields.values()):
            raise NotImplementedError(f"host {name}: nested tables are not modelled")
        body = "".join(f"{key} = {_value(fields[key])}\n" for key in sorted(fields))
        blocks.append(f"[host.{_key(name)}]\n{body}")
    return "\n".join(blocks).strip()


def _host_table_order(text: str, hosts: dict[str, Any]) -> list[str]:
    """The `[host.X]` table headers in the file's order (Spegel walks the file's expressions with go-toml's parser)."""
    order = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("[host.") and stripped.endswith("]") and not stripped.startswith("[["):
            key = tomllib.loads(f"{stripped}\n")["host"]
            (name,) = key
            if not key[name] and name in hosts and name not in order:
                order.append(name)
    return order


def _key(name: str) -> str:
    bare = name.replace("-", "").replace("_", "").isalnum()
    return name if bare else f"'{name}'"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if "'" in value or "\n" in value:
            raise NotImplementedError(f"string {value!r}: its quoting is not modelled")
        return f"'{value}'"
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise NotImplementedError(f"value {value!r} is not modelled")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="spegel configuration")
    parser.add_argument("--containerd-registry-config-path", default="/etc/containerd/certs.d")
    parser.add_argument("--mirrored-registries", nargs="*", default=[])
    parser.add_argument("--mirror-targets", nargs="+", required=True)
    parser.add_argument("--prepend-existing", action="store_true")
    args = parser.parse_args(argv)
    add_mirror_configuration(
        Path(args.containerd_registry_config_path),
        args.mirrored_registries,
        args.mirror_targets,
        prepend=args.prepend_existing,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
