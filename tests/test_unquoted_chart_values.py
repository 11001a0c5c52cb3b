"""Every place a pinned chart writes one of our values unquoted, found by rendering, and what keeps each one text.

A template that writes `{{ .Values.x }}` unquoted hands Kubernetes' YAML reader whatever the value spells: `1e3`
arrives as a number, `y` as a boolean. Each release of the example stacks is rendered with every string in its
values replaced by a distinct canary that Go reads as a number (`7100012e0`), and the release namespace by another;
a canary that comes back as a number marks an unquoted placement. Each one must be in the table below, with either
the constant we always pass or the config key that feeds it and the check that keeps it text, so a chart bump that
adds a placement fails here until it is looked at.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from components.airgap.charts import render_templates
from components.config.schema import reference_rows
from components.config.spec import Spec
from components.plan.engine import run_program

from .conftest import as_config, load_spec
from .helm_render import chart_path, split_manifests
from .markers import slow_work
from .rendered_stack import RELEASE, chart_directory, release_values, variants
from .test_config_validation import base
from .test_hostile_input import errors

CANARY = 7_100_000
NAMESPACE = "(release namespace)"

# (chart, values path) -> what keeps the placement text: a constant, or "config-key: why it stays text".
PLACEMENTS: dict[tuple[str, str], str] = {
    ("gpu-operator", NAMESPACE): "every `namespace` key: checks.k8s_name refuses names YAML reads as non-text",
    ("gpu-operator", "driver.upgradePolicy.drain.podSelector"): (
        "gpuOperator.driverUpgradePolicy.drain.podSelector: gpu.chart_selector (Go's reading)"
    ),
    ("gpu-operator", "driver.upgradePolicy.waitForCompletion.podSelector"): (
        "gpuOperator.driverUpgradePolicy.waitForCompletion.podSelector: gpu.chart_selector (Go's reading)"
    ),
    ("gpu-operator", "driver.upgradePolicy.maxUnavailable"): (
        "gpuOperator.driverUpgradePolicy.maxUnavailable: passed as an integer, or as N% (text to Go)"
    ),
    ("gpu-operator", "mig.strategy"): "gpuOperator.migStrategy: one of none, single, mixed",
    ("gpu-operator", "dcgmExporter.config.name"): "constant: the DCGM metrics ConfigMap's name",
    ("nvidia-dra-driver-gpu", NAMESPACE): "every `namespace` key (as above)",
    ("nvidia-dra-driver-gpu", "nvidiaDriverRoot"): "constant: / or the operator's driver root (absolute paths)",
    ("spegel", NAMESPACE): "every `namespace` key (as above)",
    ("spegel", "spegel.containerdContentPath"): (
        "nodes[].imageDisk.path/mountPoint: checks.absolute_path (a leading / is always text)"
    ),
    ("spegel", "spegel.containerdRegistryConfigPath"): "constant: /etc/containerd/certs.d",
    ("local-path-provisioner", NAMESPACE): "every `namespace` key (as above)",
    ("local-path-provisioner", "storageClass.name"): "storage.className: checks.k8s_name (as above)",
    ("nfs-subdir-external-provisioner", NAMESPACE): "every `namespace` key (as above)",
    ("nfs-subdir-external-provisioner", "nfs.server"): "storage.nfsServer: checks.host (names YAML reads as text)",
    ("nfs-subdir-external-provisioner", "nfs.path"): "storage.nfsPath: checks.absolute_path (a leading / is text)",
    ("nfs-subdir-external-provisioner", "storageClass.name"): "storage.className: checks.k8s_name (as above)",
    ("kube-prometheus-stack", NAMESPACE): "every `namespace` key (as above)",
    ("kube-prometheus-stack", "grafana.admin.existingSecret"): "constant: the Grafana admin Secret's name",
    ("kube-prometheus-stack", "grafana.admin.userKey"): "constant: admin-user",
    ("kube-prometheus-stack", "grafana.admin.passwordKey"): "constant: admin-password",
    ("prometheus-adapter", NAMESPACE): "every `namespace` key (as above)",
    ("metrics-server", NAMESPACE): "constant: kube-system",
    ("metrics-server", "args.0"): "constant: --kubelet-insecure-tls",
    ("cert-manager", NAMESPACE): "constant: cert-manager",
    ("tigera-operator", NAMESPACE): "constant: tigera-operator",
    ("kubeflow-trainer", NAMESPACE): "every `namespace` key (as above)",
    ("kserve-resources", NAMESPACE): "every `namespace` key (as above)",
    ("nvsentinel", NAMESPACE): "every `namespace` key (as above)",
    ("gateway-helm", NAMESPACE): "every `namespace` key (as above): kserve.gateway.namespace",
}


def _nfs(values: dict[str, Any]) -> None:
    values["storage"] = {"enabled": True, "provisioner": "nfs", "nfsServer": "198.18.0.50", "nfsPath": "/export/ml"}


def _audited() -> dict[str, tuple[dict[str, Any], list[str]]]:
    found = variants()
    values, secret = copy.deepcopy(found["onprem"][0]), found["onprem"][1]
    _nfs(values)
    chosen = {name: found[name] for name in ("onprem", "cloud", "dra", "knative", "existing-eks")}
    return {**chosen, "nfs": (values, secret)}


def _strings(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))


def _numbers(value: Any) -> Iterator[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)


def _render(chart: str, version: str, values: dict[str, Any], *, release: str, namespace: str, kube: str) -> list[Any]:
    # Not tests.helm_render.render_chart: canaries break the values schemas' enums, which is beside the point here.
    slow_work("render")
    rendered, _ = render_templates(
        chart_path(chart, version), values, release=release, namespace=namespace, kube_version=kube, validate=False
    )
    return [d for t in sorted(rendered) if not t.endswith("NOTES.txt") for d in split_manifests(rendered[t])]


def _set(values: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        values = values[key]
    values[path[-1]] = value


def _placements(chart: str, version: str, values: dict[str, Any], release: str, kube: str) -> set[str]:
    """The values paths (and NAMESPACE) a render writes unquoted. All canaries go in one render; a render that
    fails on them is split in halves until the value a template cannot do without is left alone."""
    found: set[str] = set()
    namespace_canary = CANARY - 1

    def attempt(subset: list[tuple[int, tuple[Any, ...]]], with_namespace: bool) -> None:
        canaried = copy.deepcopy(values)
        for index, path in subset:
            _set(canaried, path, f"{CANARY + index}e0")
        namespace = f"{namespace_canary}e0" if with_namespace else "canary-namespace"
        try:
            documents = _render(chart, version, canaried, release=release, namespace=namespace, kube=kube)
        except Exception:
            if len(subset) > 1:
                half = len(subset) // 2
                attempt(subset[:half], False)
                attempt(subset[half:], False)
            return
        by_number = {CANARY + index: path for index, path in subset}
        for number in (n for d in documents for n in _numbers(d)):
            if number == namespace_canary and with_namespace:
                found.add(NAMESPACE)
            elif number == int(number) and int(number) in by_number:
                found.add(".".join(str(p) for p in by_number[int(number)]))

    attempt(list(enumerate(_strings(values))), True)
    return found


@cache
def audit() -> dict[tuple[str, str], set[str]]:
    """(chart, placement) -> the audited stacks it was found in."""
    out: dict[tuple[str, str], set[str]] = {}
    for name, (values, secret) in _audited().items():
        spec = load_spec(values, secret)
        run = run_program(as_config(values), [f"mlcluster:{k}" for k in secret], stack=name, preview=True)
        for resource in run.resources:
            if resource.type != RELEASE:
                continue
            for _, chart_values in release_values(resource):
                chart = chart_directory(resource)
                for placement in _placements(
                    chart,
                    str(resource.inputs["version"]),
                    chart_values,
                    str(resource.inputs["name"]),
                    spec.kubernetes_version,
                ):
                    out.setdefault((chart, placement), set()).add(name)
    return out


@pytest.mark.render
def test_every_unquoted_placement_is_known_and_kept_text(capsys: pytest.CaptureFixture[str]) -> None:
    found = audit()
    with capsys.disabled():
        print(f"\nunquoted placements of our values in the pinned charts ({len(found)}):")
        for (chart, placement), stacks in sorted(found.items()):
            kept = PLACEMENTS.get((chart, placement), "UNKNOWN")
            print(f"  {chart:32} {placement:52} {','.join(sorted(stacks)):30} {kept}")
    assert not sorted(set(found) - set(PLACEMENTS)), "unquoted placements nobody checked"
    assert not sorted(set(PLACEMENTS) - set(found)), "table rows no audited stack renders (stale)"


@pytest.mark.render
def test_a_canary_written_quoted_is_not_reported() -> None:
    """The negative control: the audit reports a placement only where the canary came back as a number."""
    values = {"storageClass": {"name": "local-path", "defaultClass": True}, "helperPod": {"namespaceOverride": "x"}}
    found = _placements("local-path-provisioner", "0.0.37", values, "local-path", "1.34.2")
    assert "storageClass.name" in found and NAMESPACE in found
    # The chart quotes the helper pod's namespace override, so its canary stays text.
    assert "helperPod.namespaceOverride" not in found


def _namespace_keys() -> list[str]:
    return [row.key for row in reference_rows(Spec) if row.key.endswith("namespace") and "[]" not in row.key]


@pytest.mark.parametrize("key", _namespace_keys())
@pytest.mark.parametrize("name", ["1e3", "y", "0x1f", "null", "123"])
def test_a_namespace_yaml_reads_as_no_text_is_refused(key: str, name: str) -> None:
    values = base()
    section = values
    *parents, last = key.split(".")
    for part in parents:
        section = section.setdefault(part, {})
    section[last] = name
    found = errors(values)
    assert any(f"mlcluster:{key}:" in line and "reads as" in line for line in found), (key, found)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (("storage", "className"), "1e3"),
        (("storage", "nfsServer"), "1e3"),
        (("storage", "nfsPath"), "1e3"),
        (("gpuOperator", "driverUpgradePolicy", "drain", "podSelector"), "y"),
        (("gpuOperator", "driverUpgradePolicy", "waitForCompletion", "podSelector"), "0o17"),
    ],
)
def test_a_fed_placement_refuses_what_yaml_reads_as_no_text(key: tuple[str, ...], value: str) -> None:
    values = base()
    section = values
    for part in key[:-1]:
        section = section.setdefault(part, {})
    section[key[-1]] = value
    assert any(f"mlcluster:{'.'.join(key)}:" in line for line in errors(values))
