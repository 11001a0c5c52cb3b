"""Tests never share a fixed path with another test or a concurrent run (a fleet host's /tmp is the machine's)."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import PROJECT

# A literal absolute path under a machine-wide scratch directory, as a test would write or read it.
FIXED_SCRATCH = re.compile(r"""["'\s=](/tmp|/var/tmp|/dev/shm)/[\w.-]""")


def fixed_scratch_paths(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if FIXED_SCRATCH.search(line)
    ]


def test_no_test_uses_a_fixed_scratch_path() -> None:
    assert fixed_scratch_paths(PROJECT / "tests") == [], "use tmp_path, or a path inside the fleet host's own /etc"


def test_the_check_finds_a_fixed_scratch_path(tmp_path: Path) -> None:
    shared = "/" + "tmp/kubeadm.yaml"  # spelled in two parts so that this file does not match itself
    (tmp_path / "test_x.py").write_text(f'host.run("cat > {shared}")\nok = tmp_path / "kubeadm.yaml"\n')
    assert fixed_scratch_paths(tmp_path) == [f'test_x.py:1: host.run("cat > {shared}")']
