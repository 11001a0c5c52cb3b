"""Spegel beside an air-gap seed (issue 51, "Spegel keeps working beside it"): the nodes' hosts.toml name Spegel's
host first and the seed's after it, through a first start, a rerun of the node steps with Spegel's files in place,
and a day-2 change of the seed's registry port.

Spegel's pods cannot run here; what their `configuration` init container does to the node's certs.d runs on the host
as tests/fleet/spegel_configuration.py, held to Spegel's own tests in test_airgap_contracts.py. Its arguments are
the chart's (charts/spegel 0.7.4 templates/daemonset.yaml: `--mirror-targets http://$(NODE_IP):<hostPort>
http://$(NODE_IP):<nodePort>`, values.yaml `service.registry.hostPort: 30020`, `nodePort: 30021`) with the values
the program renders."""

from __future__ import annotations

import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from components.airgap.fetch import LOCKFILE
from components.render.containerd import SANDBOX_IMAGE
from components.render.images import CERTS_DIR, SITE_MIRRORS_ANNOTATION, SPEGEL_BACKUP_DIR, spegel_release
from components.render.seed import site_mirrors

from ..conftest import load_spec
from .airgap_upstream import Internet
from .engine import FleetEngine
from .hosts import Fleet, FleetHost, HostSpec
from .steps import step_outputs
from .test_airgap_bootstrap import CNI_CHART, MANIFEST_TYPES, air_gapped_values, fetched_bundle
from .test_airgap_bundle import put_on

pytestmark = pytest.mark.fleet

MODEL = Path(__file__).with_name("spegel_configuration.py")
SPEGEL_CHART = ("spegel", "0.7.4")
SPEGEL_IMAGE = "ghcr.io/spegel-org/spegel:v0.7.4"
HOST_PORT, NODE_PORT = 30020, 30021


def spegel_values(values: dict[str, Any], secret: list[str]) -> dict[str, Any]:
    """The values of the Spegel release the program renders for these stack values."""
    spec = load_spec(values, secret)
    return spegel_release(spec.images, spec.nodes, site_mirrors(spec.air_gap, spec.nodes)).values


def spegel_pod_starts(host: FleetHost, values: dict[str, Any]) -> None:
    """The init container of the Spegel pod on `host`, with the arguments the chart gives it."""
    spegel = values["spegel"]
    targets = [f"http://{host.address}:{HOST_PORT}", f"http://{host.address}:{NODE_PORT}"]
    args = [
        f"--containerd-registry-config-path={spegel['containerdRegistryConfigPath']}",
        "--mirrored-registries", *spegel["mirroredRegistries"],
        "--mirror-targets", *targets, *spegel["additionalMirrorTargets"],
    ]  # fmt: skip
    if spegel.get("prependExisting"):
        args.append("--prepend-existing")
    host.run(f"{sys.executable} {MODEL} {shlex.join(args)}")


def hosts_of(host: FleetHost, registry: str) -> dict[str, Any]:
    return tomllib.loads(host.read(f"{CERTS_DIR}/{registry}/hosts.toml"))


def seed_answers(node: FleetHost, endpoint: str, reference: str, digest: str) -> None:
    """The manifest containerd asks the seed's host for (override_path: `<endpoint>/<name>/manifests/<tag>`) is the
    lockfile's."""
    name, tag = reference.partition("/")[2].rsplit(":", 1)
    url = f"{endpoint}/{name}/manifests/{tag}"
    head = node.run(f"/usr/bin/curl -fsS -I -H {shlex.quote('Accept: ' + MANIFEST_TYPES)} {shlex.quote(url)}").stdout
    assert f"Docker-Content-Digest: {digest}" in head, (url, head)


def test_spegel_keeps_the_seed_beneath_its_own_host_through_a_rerun_and_a_new_registry_port(
    fleet, internet: Internet, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    hosts = fleet(HostSpec("cp-1", offline=True), HostSpec("w-1", offline=True))
    bundle, lock = fetched_bundle(internet, tmp_path, charts=(*CNI_CHART, SPEGEL_CHART), images=(SPEGEL_IMAGE,))
    digests = {image["reference"]: image["digest"] for image in lock["images"]}
    values, secret = air_gapped_values(hosts, ["cp-1", "w-1"], bundle / LOCKFILE)
    values["images"] = {"spegel": {"enabled": True}}
    put_on(hosts["cp-1"], bundle)
    assert spegel_values(values, secret)["spegel"]["mirroredRegistries"] == [
        "https://ghcr.io",
        "https://registry.k8s.io",
    ]

    engine = FleetEngine()
    try:
        engine.up(values, secret).raise_error()
        spegel_on_an_air_gapped_site(engine, hosts, values, secret, digests)
    finally:
        engine.close()


def spegel_on_an_air_gapped_site(
    engine: FleetEngine, hosts: Fleet, values: dict[str, Any], secret: list[str], digests: dict[str, str]
) -> None:
    seed, worker = hosts["cp-1"], hosts["w-1"]
    rendered = spegel_values(values, secret)
    # Before Spegel: the seed's hosts.toml, as on a site without it.
    seed_endpoint = f"http://{seed.address}:5000/v2/registry.k8s.io"
    assert list(hosts_of(worker, "registry.k8s.io")["host"]) == [seed_endpoint]
    assert not worker.exists(SPEGEL_BACKUP_DIR)

    # Spegel's pod starts: its host first, the seed's after it with override_path kept.
    spegel_pod_starts(worker, rendered)
    spegel_hosts = [f"http://{worker.address}:{HOST_PORT}", f"http://{worker.address}:{NODE_PORT}"]
    for registry in ("registry.k8s.io", "ghcr.io"):
        document = hosts_of(worker, registry)
        endpoint = f"http://{seed.address}:5000/v2/{registry}"
        assert list(document["host"]) == [*spegel_hosts, endpoint], document
        assert document["host"][endpoint] == {"capabilities": ["pull", "resolve"], "override_path": True}
        assert worker.exists(f"{SPEGEL_BACKUP_DIR}/{registry}/hosts.toml")
    seed_answers(worker, seed_endpoint, SANDBOX_IMAGE, digests[SANDBOX_IMAGE])
    seed_answers(worker, f"http://{seed.address}:5000/v2/ghcr.io", SPEGEL_IMAGE, digests[SPEGEL_IMAGE])
    spegels = worker.read(f"{CERTS_DIR}/registry.k8s.io/hosts.toml")

    # The node steps again (state lost, every command runs): they keep to Spegel's backup and leave its files.
    rerun = FleetEngine()
    try:
        again = rerun.up(values, secret)
        again.raise_error()
    finally:
        rerun.close()
    mirrors = step_outputs(again.step("w-1-prepare"))["registry-mirrors"]
    assert f"ok: Spegel holds {CERTS_DIR}: the mirrors beneath its own are kept in {SPEGEL_BACKUP_DIR}" in mirrors
    assert f"ok: {SPEGEL_BACKUP_DIR}/registry.k8s.io/hosts.toml up to date" in mirrors
    assert "changed:" not in mirrors, mirrors
    assert worker.read(f"{CERTS_DIR}/registry.k8s.io/hosts.toml") == spegels

    # Day 2: the seed's registry moves to port 5001. The node writes the new port beneath Spegel's; the program
    # restarts Spegel's pods (a new annotation), whose start puts it after Spegel's host.
    moved_values = {**values, "airGap": {**values["airGap"], "registryPort": 5001}}
    moved = spegel_values(moved_values, secret)
    assert moved["podAnnotations"][SITE_MIRRORS_ANNOTATION] != rendered["podAnnotations"][SITE_MIRRORS_ANNOTATION]
    changed = engine.up(moved_values, secret)
    changed.raise_error()
    mirrors = step_outputs(changed.step("w-1-prepare"))["registry-mirrors"]
    assert f"changed: {SPEGEL_BACKUP_DIR}/registry.k8s.io/hosts.toml written" in mirrors
    assert worker.read(f"{CERTS_DIR}/registry.k8s.io/hosts.toml") == spegels  # Spegel's until its pod restarts
    spegel_pod_starts(worker, moved)
    moved_endpoint = f"http://{seed.address}:5001/v2/registry.k8s.io"
    assert list(hosts_of(worker, "registry.k8s.io")["host"]) == [*spegel_hosts, moved_endpoint]
    seed_answers(worker, moved_endpoint, SANDBOX_IMAGE, digests[SANDBOX_IMAGE])
