"""What `make check` leaves to `make test`, enforced where the slow work starts.

`make check` runs `pytest -m "not fleet and not render and not etcd"` with MLCLUSTER_QUICK_TESTS=1. A test that
starts such work without its marker would quietly make the edit loop slow: here it fails instead, naming the marker.
"""

from __future__ import annotations

import os

QUICK_TESTS = "MLCLUSTER_QUICK_TESTS"

NEEDS = {
    "fleet": "starts SSH test hosts",
    "render": "renders a chart with the Helm engine or builds a kustomize tree",
    "etcd": "starts real etcd members",
}


def slow_work(marker: str) -> None:
    """Call where the work behind `marker` starts."""
    if os.environ.get(QUICK_TESTS):
        raise AssertionError(
            f"this test {NEEDS[marker]} but is not marked @pytest.mark.{marker}: `make check` ({QUICK_TESTS}=1)"
            " selects tests by these markers, so mark it"
        )


def examples(full: int) -> int:
    """Examples for a property test: all of them in `make test` and CI, a third in `make check`'s edit loop (its
    promise is about a minute and a half on two cores; the full run stays the gate before a commit)."""
    return max(10, full // 3) if os.environ.get(QUICK_TESTS) else full
