"""The bundle's lockfile: every chart, image, node package and file a stack needs from outside its site, each with
where it comes from and (once fetched) its digest; what a stack needs that a lockfile lacks; what changed between
two lockfiles.

The images are read from the objects the stack applies: each Helm release rendered with the real Helm engine with
exactly the values the program gives it (components/airgap/charts.py), and the program's own manifests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..config.airgap import KUBEADM_IMAGES, LOCK_SCHEMA
from ..config.cluster import ClusterSpec
from ..config.spec import Spec
from ..plan.engine import RecordedResource
from ..render.containerd import SANDBOX_IMAGE
from ..render.node_steps import DOCKER_GPG_KEY, K8S_REPO_BASE
from .charts import ChartUnavailableError
from .needs import collect_images
from .releases import RELEASE, chart_directory, release_values

KUBE_PACKAGES = ("kubeadm", "kubelet", "kubectl", "cri-tools", "kubernetes-cni")
CONTAINERD_PACKAGE = {"deb": "containerd", "rpm": "containerd.io"}
"""components/scripts/containerd.sh: Debian/Ubuntu's own package; Docker's repository's on RHEL."""


OPERATOR_LAUNCHED = {
    "tigera-operator": "Calico's images, which the tigera-operator names in its binary, not its chart: `docker run"
    " quay.io/tigera/operator:<version> --print-images=list` (tigera/docs calico_versioned_docs/version-3.30/"
    "operations/image-options/imageset.mdx L123)",
    "gateway-helm": "the Envoy proxy image Envoy Gateway launches for each Gateway (its EnvoyProxy default, in the"
    " binary, not the chart)",
    "knative-operator": "Knative Serving's and Kourier's images, which the Knative Operator applies from the"
    " manifests it bundles",
}
"""Charts whose operator launches images its rendered objects do not name: the lockfile says how to list them."""

_CALICO_COMPONENTS = (
    "node", "cni", "pod2daemon-flexvol", "typha", "kube-controllers", "csi", "node-driver-registrar", "apiserver",
    "goldmane", "whisker", "whisker-backend",
)  # fmt: skip
OPERATOR_IMAGES: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("tigera-operator", "v3.30.3"): (
        tuple(f"docker.io/calico/{name}:v3.30.3" for name in _CALICO_COMPONENTS),
        "launched by tigera/operator v1.38.6 (the chart's tigeraOperator.version) for the chart's default"
        " Installation, APIServer, Goldmane and Whisker: pkg/components/calico.go L61-149 (CalicoRegistry docker.io/,"
        " pkg/components/images.go L18), pkg/render/node.go L170-176, typha.go L106, kube-controllers.go L264,"
        " csi.go L396-401, apiserver.go L205, goldmane/component.go L91, whisker/component.go L92-97",
    ),
    ("gateway-helm", "v1.9.0"): (
        ("docker.io/envoyproxy/envoy:distroless-v1.39.0",),
        "launched by Envoy Gateway v1.9.0 for each Gateway whose EnvoyProxy names no image:"
        " api/v1alpha1/shared_types.go L29 DefaultEnvoyProxyImage (the chart leaves global.images.envoyProxy empty)",
    ),
}
"""The images an operator launches at the version pinned here, read from its source at the tag: the lockfile holds
them, so only an operator of another version is left `unresolved`."""


Render = Callable[[str, str, Mapping[str, Any], str, str], Iterable[Mapping[str, Any]]]
"""(chart, version, values, release, namespace) -> the rendered objects."""


def normalized(reference: str) -> str:
    """An image reference as containerd resolves it: a bare name is docker.io/library/<name>, a path without a
    registry host is on docker.io."""
    first, _, rest = reference.partition("/")
    if not rest:
        return f"docker.io/library/{reference}"
    if "." in first or ":" in first or first == "localhost":
        return reference
    return f"docker.io/{reference}"


def _charts(resources: Iterable[RecordedResource]) -> list[dict[str, Any]]:
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for resource in resources:
        if resource.type != RELEASE:
            continue
        key = (str(resource.inputs["chart"]), str(resource.inputs["version"]))
        seen.setdefault(
            key,
            {
                "name": chart_directory(resource),
                "chart": key[0],
                "repository": resource.inputs.get("repositoryOpts", {}).get("repo")
                if isinstance(resource.inputs.get("repositoryOpts"), Mapping)
                else None,
                "version": key[1],
                "releases": [],
                "digest": None,
            },
        )["releases"].append(f"{resource.inputs['namespace']}/{resource.inputs['name']}")
    return sorted(seen.values(), key=lambda c: (c["name"], c["version"]))


def _labelled(
    resources: Iterable[RecordedResource], render: Render, unrendered: list[str]
) -> list[tuple[str, Mapping[str, Any]]]:
    labelled: list[tuple[str, Mapping[str, Any]]] = []
    for resource in resources:
        if resource.type == RELEASE:
            name, version = str(resource.inputs["name"]), str(resource.inputs["version"])
            # A release the preflight decides is rendered for each decision: the bundle holds either outcome.
            for _, values in release_values(resource):
                try:
                    objects = list(
                        render(chart_directory(resource), version, values, name, str(resource.inputs["namespace"]))
                    )
                except ChartUnavailableError:
                    unrendered.append(f"{chart_directory(resource)}@{version}")
                    break
                labelled += [(f"release {name}", obj) for obj in objects]
        elif resource.custom and resource.type.startswith("kubernetes:") and isinstance(resource.inputs, Mapping):
            labelled.append((f"manifest {resource.name}", resource.inputs))
    return labelled


def _packages(cluster: ClusterSpec, version: str, families: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """What the nodes install from outside their OS's own repositories, per OS family in `airGap.osFamilies`: the
    Kubernetes project's packages, and Docker's containerd.io on RHEL. containerd on Debian/Ubuntu, keepalived,
    haproxy and every dependency are the OS's packages: an air-gapped site takes them from its OS mirror, whose
    packages differ per distribution release (docs/air-gap.md)."""
    if cluster.mode != "kubeadm":
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for family in families:
        items = [
            {"name": name, "version": version if name in ("kubeadm", "kubelet", "kubectl") else None}
            for name in KUBE_PACKAGES
        ]
        if family == "rpm":
            items.append({"name": CONTAINERD_PACKAGE["rpm"], "version": None})
        for item in items:
            item["digest"] = None
        out[family] = items
    return out


def _files(cluster: ClusterSpec, version: str, families: Iterable[str]) -> list[dict[str, Any]]:
    if cluster.mode != "kubeadm":
        return []
    minor = ".".join(version.split(".")[:2])
    repo = f"{K8S_REPO_BASE}/v{minor}"
    files = []
    if "deb" in families:
        files.append({"name": "kubernetes-deb-key", "url": f"{repo}/deb/Release.key", "digest": None})
    if "rpm" in families:
        files += [
            {"name": "kubernetes-rpm-key", "url": f"{repo}/rpm/repodata/repomd.xml.key", "digest": None},
            {"name": "docker-ce-rpm-key", "url": DOCKER_GPG_KEY, "digest": None},
        ]
    return files


def stack_lock(spec: Spec, resources: Sequence[RecordedResource], render: Render, *, stack: str) -> dict[str, Any]:
    """The lockfile of what the stack needs (resources: the program's offline run), digests empty until the bundle
    is fetched."""
    unrendered: list[str] = []
    needed = collect_images(_labelled(resources, render, unrendered))
    images: dict[str, list[str]] = {}
    for item in needed:
        images.setdefault(normalized(item.reference), []).extend(item.sources)
    unresolved: list[str] = []
    if spec.cluster.mode == "kubeadm":
        for name in KUBEADM_IMAGES:
            images.setdefault(f"registry.k8s.io/{name}:v{spec.kubernetes_version}", []).append("kubeadm")
        images.setdefault(SANDBOX_IMAGE, []).append("containerd sandbox_image (render/containerd.py)")
        unresolved.append(
            f"CoreDNS and etcd images: `kubeadm config images list --kubernetes-version v{spec.kubernetes_version}`"
        )
    untagged = sorted(ref for ref in images if ":" not in ref.rsplit("/", 1)[-1] and "@" not in ref)
    for ref in untagged:
        # No tag: the controller that launches it adds one (KServe's explainer version, Trainer's initializers), or
        # the node pulls :latest; the bundle needs the tag the controller picks.
        unresolved.append(f"{ref} (untagged where named: {', '.join(images.pop(ref))})")
    charts = _charts(resources)
    for chart in charts:
        launched = OPERATOR_IMAGES.get((chart["name"], chart["version"]))
        if launched is not None:
            for reference in launched[0]:
                images.setdefault(reference, []).append(f"release {chart['name']}: {launched[1]}")
        elif chart["name"] in OPERATOR_LAUNCHED:
            unresolved.append(OPERATOR_LAUNCHED[chart["name"]])
    packages = _packages(spec.cluster, spec.kubernetes_version, spec.air_gap.os_families)
    files = _files(spec.cluster, spec.kubernetes_version, spec.air_gap.os_families)
    return {
        "schema": LOCK_SCHEMA,
        "stack": stack,
        "kubernetesVersion": spec.kubernetes_version,
        "counts": {
            "charts": len(charts),
            "images": len(images),
            "packages": sum(len(v) for v in packages.values()),
            "files": len(files),
        },
        "charts": charts,
        "images": [
            {"reference": ref, "digest": None, "sources": sorted(set(sources))}
            for ref, sources in sorted(images.items())
        ],
        "packages": packages,
        "files": files,
        "unresolved": unresolved,
        "unrendered": sorted(set(unrendered)),
    }
