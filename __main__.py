"""mlcluster: bare GPU servers to a machine-learning platform in one `pulumi up`.

The program reads as the cluster's phases, in order.
"""

from __future__ import annotations

import logging

import pulumi

from components.cluster.acceptance import Acceptance
from components.cluster.clock import utc_now
from components.cluster.existing_cluster import ExistingCluster
from components.cluster.gpu_preflight import GpuPreflight
from components.cluster.kubeadm_cluster import KubeadmCluster
from components.cluster.node_scripts import NodeScripts
from components.config.derived import (
    acceptance_wanted,
    fault_mode,
    installed_components,
    monitoring_wanted,
    prepull_sets,
)
from components.config.formats import private_key_fingerprint
from components.config.load import spec_from_pulumi
from components.config.schema import ConfigError
from components.config.support import calendar_notes
from components.platform.cni import Cni
from components.platform.gpu_health import GpuHealth
from components.platform.gpu_operator import GpuOperator
from components.platform.image_logistics import ImageLogistics
from components.platform.kueue import Kueue
from components.platform.monitoring import Monitoring
from components.platform.network import NetworkOperator
from components.platform.serving import Serving
from components.platform.storage import Storage
from components.platform.training import Training
from components.platform.workloads import Workloads
from components.render.acceptance import OUTPUT as ACCEPTANCE_OUTPUT
from components.render.acceptance import REPORT_OUTPUT as ACCEPTANCE_REPORT_OUTPUT
from components.render.certificates import OUTPUT as CERTIFICATES_OUTPUT
from components.render.control_planes import OUTPUT as CONTROL_PLANES_OUTPUT
from components.render.control_planes import WORKERS_OUTPUT
from components.render.gpu_operator import preflight_runs
from components.render.join_credentials import OUTPUT as JOIN_CREDENTIALS_OUTPUT
from components.render.upgrade import VERSION_OUTPUT
from components.warnings import given, warn

# A refusal raised where a previous deployment's outputs are read (a version that skips a minor, a reordered control
# plane) fails every output computed from them; asyncio would log each such future as "exception was never
# retrieved", with a traceback, hundreds of times after the one line Pulumi prints for the refusal.
logging.getLogger("asyncio").setLevel(logging.CRITICAL)

try:
    spec, config_warnings = spec_from_pulumi()
except ConfigError as error:
    # RunError: Pulumi reports the message without a Python traceback.
    raise pulumi.RunError(error.report()) from None
for warning in config_warnings:
    given(str(warning))
# The support calendar on the program's clock (a plan's --at): an end of life near or past, a patch behind.
for note in calendar_notes(
    spec.kubernetes_version, installed_components(spec), utc_now().date(), managed=spec.cluster.mode != "kubeadm"
):
    warn("kubernetesVersion", note)

# 0. Each node's copy of the script files its steps source, then the read-only GPU preflight on every GPU node
#    (the others look for GPUs in their preparation); what it finds decides the GPU Operator's driver mode.
scripts = NodeScripts(spec) if spec.cluster.mode == "kubeadm" else None
gpu_preflight = (
    GpuPreflight(spec, scripts) if scripts is not None and preflight_runs(spec.gpu_operator, spec.cluster) else None
)

# 1. A cluster: bootstrapped over SSH with kubeadm, or one that already exists.
cluster = KubeadmCluster(spec, scripts, preflight=gpu_preflight) if scripts is not None else ExistingCluster(spec)
provider = cluster.provider

# 2. Networking, so nodes become Ready (kubeadm clusters only; managed clusters bring their own).
base: list[pulumi.Resource] = []
if spec.cluster.defaults.installs_cni and spec.cluster.cni != "none":
    base = [Cni(spec, provider)]

# 3. Big images: peer-to-peer layers and pre-pulls, as early as the nodes are up.
if spec.images.spegel.enabled or prepull_sets(spec):
    images = ImageLogistics(spec, provider, depends_on=base)
    pulumi.export("prepulledImages", images.planned)

# 4. The ML platform: storage, then monitoring (its CRDs, ServiceMonitor and PrometheusRule, must exist before
#    the charts that use them; Prometheus' volume needs the StorageClass), then the rest.
platform: list[pulumi.Resource] = []
acceptance_after: list[pulumi.Resource] = []  # what the tests need: the GPUs exposed, the queue, the Trainer
if spec.storage.enabled:
    platform.append(Storage(spec, provider, depends_on=base))
if monitoring_wanted(spec):
    base = [*base, Monitoring(spec, provider, depends_on=[*base, *platform])]
serving = Serving(spec, provider, depends_on=base) if spec.kserve.enabled else None
if spec.gpu_operator.enabled:
    gpu_operator = GpuOperator(spec, provider, depends_on=base, preflight=gpu_preflight)
    platform.append(gpu_operator)
    acceptance_after += [gpu_operator.release, *([gpu_operator.dra] if spec.gpu_operator.dra else [])]
    pulumi.export("gpu", gpu_operator.report)
    if fault_mode(spec) != "off":
        # NVSentinel's webhooks take their certificates from cert-manager (installed with serving).
        cert_manager = [serving.cert_manager] if serving is not None else []
        GpuHealth(spec, provider, depends_on=[gpu_operator, *cert_manager])
if spec.network.rdma.enabled:
    # After the GPU Operator, whose Node Feature Discovery (and its CRDs) the Network Operator then uses.
    gpu_layer = [gpu_operator] if spec.gpu_operator.enabled else []
    platform.append(NetworkOperator(spec, provider, depends_on=[*base, *gpu_layer]))
if spec.kueue.enabled:
    platform.append(Kueue(spec, provider, depends_on=base))
    acceptance_after.append(platform[-1])
if spec.kubeflow.enabled:
    training = Training(spec, provider, depends_on=base).ready
    platform += training
    acceptance_after += training

# 5. The workloads declared in the stack, once what they need is installed.
if spec.workloads.any_enabled:
    Workloads(spec, provider, depends_on=platform)

# 6. Acceptance: the GPU nodes prove themselves once the platform is in (DCGM diagnostics, NCCL bandwidth), and
#    the ones that fail are quarantined.
if isinstance(cluster, KubeadmCluster) and scripts is not None and acceptance_wanted(spec):
    acceptance = Acceptance(spec, scripts, cluster.previous, gpu_preflight, provider, depends_on=acceptance_after)
    pulumi.export(ACCEPTANCE_OUTPUT, acceptance.summary)
    pulumi.export(ACCEPTANCE_REPORT_OUTPUT, acceptance.report)

pulumi.export("kubeconfig", cluster.kubeconfig)
if isinstance(cluster, KubeadmCluster):
    # Read back by the next run (a preview included) for the days left: components/render/certificates.py.
    pulumi.export(CERTIFICATES_OUTPUT, cluster.certificates.record)
    pulumi.export(JOIN_CREDENTIALS_OUTPUT, cluster.join_record)
    pulumi.export(VERSION_OUTPUT, cluster.version_record)
    pulumi.export(CONTROL_PLANES_OUTPUT, cluster.control_planes_record)
    pulumi.export(WORKERS_OUTPUT, cluster.workers_record)
    if spec.ssh.private_key is not None:
        # The connections' key by its public fingerprint (never the key): a rotation shows in every preview.
        fingerprint = private_key_fingerprint(spec.ssh.private_key.reveal())
        pulumi.export("sshKeyFingerprint", fingerprint or "not an OpenSSH-format key: no fingerprint read")
pulumi.export("nodes", [node.name for node in spec.nodes])
