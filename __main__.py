"""mlcluster: bare GPU servers to a machine-learning platform in one `pulumi up`.

The program reads as the cluster's phases, in order.
"""

from __future__ import annotations

import pulumi

from components.cni import Cni
from components.config.load import spec_from_pulumi
from components.config.schema import ConfigError
from components.existing_cluster import ExistingCluster
from components.gpu_operator import GpuOperator
from components.image_logistics import ImageLogistics
from components.kubeadm_cluster import KubeadmCluster
from components.kueue import Kueue
from components.serving import Serving
from components.storage import Storage
from components.training import Training

try:
    spec = spec_from_pulumi()
except ConfigError as error:
    # RunError: Pulumi reports the message without a Python traceback.
    raise pulumi.RunError(error.report()) from None

# 1. A cluster: bootstrapped over SSH with kubeadm, or one that already exists.
cluster = KubeadmCluster(spec) if spec.cluster.mode == "kubeadm" else ExistingCluster(spec)
provider = cluster.provider

# 2. Networking, so nodes become Ready (kubeadm clusters only; managed clusters bring their own).
base: list[pulumi.Resource] = []
if spec.cluster.mode == "kubeadm" and spec.cluster.cni != "none":
    base = [Cni(spec, provider)]

# 3. Big images: peer-to-peer layers and pre-pulls, as early as the nodes are up.
if spec.images.spegel.enabled or spec.images.prepull:
    images = ImageLogistics(spec, provider, depends_on=base)
    pulumi.export("prepulledImages", images.planned)

# 4. The ML platform.
if spec.storage.enabled:
    Storage(spec, provider, depends_on=base)
if spec.gpu_operator.enabled:
    GpuOperator(spec, provider, depends_on=base)
if spec.kueue.enabled:
    Kueue(spec, provider, depends_on=base)
if spec.kserve.enabled:
    Serving(spec, provider, depends_on=base)
if spec.kubeflow.enabled:
    Training(spec, provider, depends_on=base)

pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("nodes", [node.name for node in spec.nodes])
