"""What the seed host's steps are given from a fetched bundle's lockfile (components/scripts/bundle-verify.sh)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
IMAGE_BLOBS = "images/blobs/sha256"
"""Where an OCI image layout keeps a blob: blobs/<algorithm>/<hex> (opencontainers/image-spec image-layout.md)."""


def bundle_items(lock: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(`hex<TAB>path<TAB>item` lines, problems): every chart, package and file by its path and digest, every image by
    its manifest blob. A problem per item without a digest or path: a lockfile not fetched yet."""
    rows: list[str] = []
    problems: list[str] = []

    def add(item: str, digest: Any, path: Any) -> None:
        match = DIGEST.fullmatch(str(digest or ""))
        if match is None or not path:
            problems.append(f"{item}: no sha256 digest and path (fetch the bundle first)")
            return
        if "\t" in str(path) or "\n" in str(path) or str(path).startswith("/") or ".." in str(path).split("/"):
            problems.append(f"{item}: path {path!r} is not a plain path inside the bundle")
            return
        rows.append(f"{match.group(1)}\t{path}\t{item}")

    for chart in lock.get("charts") or []:
        add(f"chart {chart['name']}@{chart['version']}", chart.get("digest"), chart.get("path"))
    for image in lock.get("images") or []:
        match = DIGEST.fullmatch(str(image.get("digest") or ""))
        add(f"image {image['reference']}", image.get("digest"), match and f"{IMAGE_BLOBS}/{match.group(1)}")
    for family, packages in (lock.get("packages") or {}).items():
        for package in packages:
            add(f"package {family}:{package['name']}", package.get("digest"), package.get("path"))
    for file in lock.get("files") or []:
        add(f"file {file['name']}", file.get("digest"), file.get("path"))
    return "\n".join(rows), problems
