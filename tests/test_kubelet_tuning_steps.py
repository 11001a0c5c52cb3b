"""The image-disk and kubelet-tuning steps, run for real on sandboxed nodes with recording stubs.

Each scenario renders the step from a stack config (as the program does), runs it in a private mount
namespace (tests/node_sandbox.py) and asserts on the files written and the stub calls recorded: restarts
happen only when their input changed, other lines of the kubelet env file survive, a disk with a filesystem
is never formatted.
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from typing import Any

import pytest
import yaml

from components.config.load import spec_from_values
from components.config.spec import DEFAULT_KUBERNETES_VERSION, Spec
from components.render.tuning_steps import PENDING_RESTARTS, image_disk_step, restart_step, tuning_step

from .node_sandbox import Node
from .upstream import containerd_errors, kubelet_errors

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG1sY2x1c3Rlci10ZXN0LWhvc3Qta2V5LTAwMDAwMDAw"
EXACT_LINE = 'KUBELET_EXTRA_ARGS="--image-gc-low-threshold 70 --image-gc-high-threshold 80"'
RESTART_KUBELET = ("systemctl", "restart", "kubelet")
RESTART_CONTAINERD = ("systemctl", "restart", "containerd")


def cluster(version: str = "1.29.10", kubelet: dict[str, Any] | None = None, **node: Any) -> Spec:
    values = {
        "kubernetesVersion": DEFAULT_KUBERNETES_VERSION,
        "cluster": {"name": "lab"},
        "ssh": {"privateKey": "KEY"},
        "nodes": [{"name": "n-1", "host": "198.18.0.10", "roles": ["control-plane"], "hostKey": HOST_KEY, **node}],
        "kubelet": kubelet or {},
        # The platform layers have their own version floors; this is about the nodes.
        **{layer: {"enabled": False} for layer in ("gpuOperator", "kueue", "kserve", "kubeflow", "storage")},
    }
    # Placed at any minor the renderers document (docs/kubelet-tuning.md); a kubeadm stack below 1.31 is refused
    # by the support calendar (kubeadm's v1beta4), which tests/test_support_calendar.py proves.
    return replace(spec_from_values(values, lambda key: key == "ssh"), kubernetes_version=version)


def tune(node: Node, spec: Spec) -> list[str]:
    result = node.run(tuning_step(spec.kubelet, spec.kubernetes_version, spec.images, spec.nodes[0]).script)
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout.splitlines()


def restart(node: Node, spec: Spec) -> list[str]:
    result = node.run(restart_step(spec, spec.nodes[0]).script)
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout.splitlines()


def apply(node: Node, spec: Spec) -> list[str]:
    """What `up` runs on a node of the cluster: its tuning, later (in its batch) its restart step."""
    return tune(node, spec) + restart(node, spec)


def join(node: Node) -> None:
    """The node is now in the cluster (kubeadm wrote its kubelet.conf)."""
    node.write("/etc/kubernetes/kubelet.conf", "apiVersion: v1\nkind: Config\n")


def test_sandbox_runs_as_root_in_its_own_mount_namespace(tmp_path) -> None:
    node = Node(tmp_path)
    result = node.run('[ "$(id -u)" = 0 ] && echo probe >/etc/probe && [ -b /dev/sdz ] && echo ok', ("/dev/sdz",))
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr
    assert node.read("/etc/probe") == "probe\n" and not __import__("os").path.exists("/dev/sdz")


@pytest.mark.parametrize("os_family", ["deb", "rpm"])
def test_flags_line_is_exact_other_lines_survive_and_rerun_restarts_nothing(tmp_path, os_family) -> None:
    node = Node(tmp_path, os_family=os_family)
    other = "# site settings\nHTTPS_PROXY=http://198.18.0.1:3128\nKUBELET_EXTRA_ARGS=\nNO_PROXY=10.0.0.0/8\n"
    node.write(node.env_file, other)
    spec = cluster()

    # Day 1, before join: containerd restarts at once (nothing runs yet), kubeadm will start the kubelet.
    first = tune(node, spec)
    expected = other.replace("KUBELET_EXTRA_ARGS=\n", EXACT_LINE + "\n")
    assert node.read(node.env_file) == expected
    assert node.count(*RESTART_KUBELET) == 0 and node.count(*RESTART_CONTAINERD) == 1
    assert ["systemctl", "daemon-reload"] in node.calls() and not node.exists(PENDING_RESTARTS)
    assert any(line.startswith("changed: ") and EXACT_LINE in line for line in first)

    join(node)
    second = apply(node, spec)
    assert node.read(node.env_file) == expected
    assert node.count(*RESTART_KUBELET) == 0 and node.count(*RESTART_CONTAINERD) == 1
    assert second and all(line.startswith("ok: ") for line in second), second


def test_changing_a_threshold_restarts_the_kubelet_once_and_not_containerd(tmp_path) -> None:
    node = Node(tmp_path)
    tune(node, cluster())
    join(node)
    changed = cluster(kubelet={"imageGCLowThresholdPercent": 65})
    tune(node, changed)
    # The tuning only marks the restart: the node's batch does it.
    assert node.count(*RESTART_KUBELET) == 0 and node.read(PENDING_RESTARTS) == "kubelet\n"
    assert node.read(node.env_file) == (
        'KUBELET_EXTRA_ARGS="--image-gc-low-threshold 65 --image-gc-high-threshold 80"\n'
    )
    lines = restart(node, changed)
    assert node.count(*RESTART_KUBELET) == 1 and node.count(*RESTART_CONTAINERD) == 1
    assert node.calls("systemctl")[-2:] == [["systemctl", "daemon-reload"], ["systemctl", "restart", "kubelet"]]
    assert lines[-1].startswith("changed: kubelet restarted") and not node.exists(PENDING_RESTARTS)
    again = apply(node, changed)
    assert node.count(*RESTART_KUBELET) == 1 and all(line.startswith("ok: ") for line in again), again


def test_foreign_flags_are_kept_and_stale_managed_flags_replaced(tmp_path) -> None:
    node = Node(tmp_path)
    node.write(
        node.env_file,
        'KUBELET_EXTRA_ARGS="--node-ip 198.18.0.10 --image-gc-high-threshold 90 --serialize-image-pulls=true'
        ' --image-pull-progress-deadline 5m --v=2"\n',
    )
    tune(node, cluster())
    assert node.read(node.env_file) == (
        'KUBELET_EXTRA_ARGS="--node-ip 198.18.0.10 --v=2 --image-gc-low-threshold 70 --image-gc-high-threshold 80"\n'
    )


def test_the_assignment_in_effect_is_the_one_rewritten_and_duplicates_go(tmp_path) -> None:
    node = Node(tmp_path)
    node.write(node.env_file, 'KUBELET_EXTRA_ARGS="--v=1"\nA=1\nKUBELET_EXTRA_ARGS="--node-ip 198.18.0.10"\n')
    tune(node, cluster())
    assert node.read(node.env_file) == (
        'KUBELET_EXTRA_ARGS="--node-ip 198.18.0.10 --image-gc-low-threshold 70 --image-gc-high-threshold 80"\nA=1\n'
    )


def test_unreadable_containerd_version_stops_before_any_change(tmp_path) -> None:
    node = Node(tmp_path, containerd_version="main")
    result = node.run(
        tuning_step(cluster().kubelet, cluster().kubernetes_version, cluster().images, cluster().nodes[0]).script
    )
    assert result.returncode != 0 and "cannot read the version of containerd" in result.stderr
    assert not node.exists("/etc/containerd/config.toml") and node.calls("systemctl") == []


def test_pull_deadline_change_restarts_containerd_only(tmp_path) -> None:
    node = Node(tmp_path, containerd_version="1.7.24")
    tune(node, cluster())
    config = tomllib.loads(node.read("/etc/containerd/config.toml"))
    assert config["plugins"]["io.containerd.grpc.v1.cri"]["image_pull_progress_timeout"] == "30m"
    assert containerd_errors(config, 2) == []
    join(node)
    apply(node, cluster(kubelet={"imagePullProgressDeadline": "45m"}))
    config = tomllib.loads(node.read("/etc/containerd/config.toml"))
    assert config["plugins"]["io.containerd.grpc.v1.cri"]["image_pull_progress_timeout"] == "45m"
    assert node.count(*RESTART_CONTAINERD) == 2 and node.count(*RESTART_KUBELET) == 0


def test_restart_step_restarts_containerd_before_the_kubelet_and_only_what_was_marked(tmp_path) -> None:
    node = Node(tmp_path)
    spec = cluster()
    assert restart(node, spec) == [
        f"ok: no restart pending (tuning {restart_step(spec, spec.nodes[0]).settings['TUNING_DIGEST']})"
    ]
    node.write(PENDING_RESTARTS, "kubelet\ncontainerd\n")
    restart(node, spec)
    restarts = [c for c in node.calls("systemctl") if c[1] == "restart"]
    assert restarts == [["systemctl", "restart", "containerd"], ["systemctl", "restart", "kubelet"]]
    assert (
        restart_step(cluster(kubelet={"imageGCLowThresholdPercent": 65}), spec.nodes[0]).script
        != restart_step(spec, spec.nodes[0]).script
    ), "the restart step must change (and so run again) when the tuning changes"


def test_containerd_2_gets_config_v3_and_1_6_a_warning_instead_of_the_deadline(tmp_path) -> None:
    two = Node(tmp_path / "two", containerd_version="2.1.4")
    tune(two, cluster())
    config = tomllib.loads(two.read("/etc/containerd/config.toml"))
    assert config["version"] == 3 and containerd_errors(config, 3) == []
    assert config["plugins"]["io.containerd.cri.v1.images"]["image_pull_progress_timeout"] == "30m"

    old = Node(tmp_path / "old", containerd_version="1.6.20")
    result = old.run(
        tuning_step(cluster().kubelet, cluster().kubernetes_version, cluster().images, cluster().nodes[0]).script
    )
    assert result.returncode == 0, result.stderr
    config = tomllib.loads(old.read("/etc/containerd/config.toml"))
    assert "image_pull_progress_timeout" not in config["plugins"]["io.containerd.grpc.v1.cri"]
    # On stderr: stdout stays `ok:`/`changed:` lines only.
    assert result.stderr.startswith("warning: containerd 1.6.20 has no image_pull_progress_timeout")


def test_declared_containerd_version_must_match_the_node(tmp_path) -> None:
    node = Node(tmp_path, containerd_version="1.6.20")
    result = node.run(
        tuning_step(
            cluster(kubelet={"containerdVersion": "1.7"}).kubelet,
            cluster(kubelet={"containerdVersion": "1.7"}).kubernetes_version,
            cluster(kubelet={"containerdVersion": "1.7"}).images,
            cluster().nodes[0],
        ).script
    )
    assert result.returncode != 0
    assert "containerd 1.6.20 is installed but mlcluster:kubelet.containerdVersion says 1.7" in result.stderr
    assert node.count(*RESTART_CONTAINERD) == 0 and node.count(*RESTART_KUBELET) == 0


def test_from_1_30_settings_go_to_a_drop_in_and_the_line_points_at_it(tmp_path) -> None:
    node = Node(tmp_path)
    node.write(node.env_file, 'KUBELET_EXTRA_ARGS="--image-gc-low-threshold 70 --image-gc-high-threshold 80"\n')
    spec = cluster(
        "1.34.2",
        kubelet={"maxParallelImagePulls": 3, "systemReserved": {"cpu": "1"}, "cpuManagerPolicy": "static"},
    )
    tune(node, spec)
    assert node.read(node.env_file) == 'KUBELET_EXTRA_ARGS="--config-dir=/etc/kubernetes/kubelet.conf.d"\n'
    drop_in = yaml.safe_load(node.read("/etc/kubernetes/kubelet.conf.d/50-mlcluster-tuning.conf"))
    assert kubelet_errors(drop_in) == []
    assert drop_in["imageGCLowThresholdPercent"] == 70 and drop_in["maxParallelImagePulls"] == 3
    assert drop_in["serializeImagePulls"] is False and drop_in["cpuManagerPolicy"] == "static"
    assert node.count(*RESTART_KUBELET) == 0 and not node.exists(PENDING_RESTARTS)


def test_cpu_manager_checkpoint_of_another_policy_is_removed_before_the_restart(tmp_path) -> None:
    node = Node(tmp_path)
    tune(node, cluster("1.34.2"))
    join(node)
    node.write("/var/lib/kubelet/cpu_manager_state", '{"policyName":"none","defaultCpuSet":"","checksum":1}')
    apply(node, cluster("1.34.2", kubelet={"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "500m"}}))
    assert not node.exists("/var/lib/kubelet/cpu_manager_state")
    assert node.count(*RESTART_KUBELET) == 1


def disk_step(device: str = "/dev/nvme1n1") -> str:
    spec = cluster(imageDisk={"device": device, "filesystem": "xfs"})
    step = image_disk_step(spec.nodes[0])
    assert step is not None
    return step.script


def test_blank_image_disk_is_formatted_once_and_mounted_by_uuid(tmp_path) -> None:
    node = Node(tmp_path)
    first = node.run(disk_step(), ("/dev/nvme1n1",))
    assert first.returncode == 0, first.stderr
    assert node.calls("mkfs") == [["mkfs", "-t", "xfs", "/dev/nvme1n1"]]
    assert node.calls("mount") == [["mount", "/var/lib/containerd"]]
    uuid = node.state()["disks"]["/dev/nvme1n1"]["uuid"]
    fstab = node.read("/etc/fstab").splitlines()
    assert fstab[0].startswith("# <file system>")
    assert fstab[1] == f"UUID={uuid} /var/lib/containerd xfs defaults,nofail 0 2"
    assert node.state()["mounts"] == {"/var/lib/containerd": "/dev/nvme1n1"}
    unit = node.read("/etc/systemd/system/containerd.service.d/50-mlcluster-image-disk.conf")
    assert "RequiresMountsFor=/var/lib/containerd" in unit

    second = node.run(disk_step(), ("/dev/nvme1n1",))
    assert second.returncode == 0, second.stderr
    assert node.calls("mkfs") == [["mkfs", "-t", "xfs", "/dev/nvme1n1"]]
    assert node.calls("mount") == [["mount", "/var/lib/containerd"]]
    assert all(line.startswith("ok: ") for line in second.stdout.splitlines()), second.stdout


def test_image_disk_with_a_filesystem_is_never_formatted(tmp_path) -> None:
    node = Node(tmp_path)
    node.settings(disks={"/dev/nvme1n1": {"type": "ext4", "uuid": "0a1d0a1d-0000-4000-8000-000000000001"}})
    result = node.run(disk_step(), ("/dev/nvme1n1",))
    assert result.returncode == 0, result.stderr
    assert node.calls("mkfs") == []
    assert "ok: /dev/nvme1n1 already has a ext4 filesystem (not formatted)" in result.stdout
    assert "UUID=0a1d0a1d-0000-4000-8000-000000000001 /var/lib/containerd ext4" in node.read("/etc/fstab")


def test_image_disk_with_only_a_partition_table_is_refused(tmp_path) -> None:
    node = Node(tmp_path)
    node.settings(disks={"/dev/nvme1n1": {"pttype": "gpt"}})
    result = node.run(disk_step(), ("/dev/nvme1n1",))
    assert result.returncode != 0 and "has a partition table and no filesystem" in result.stderr
    assert node.calls("mkfs") == [] and node.calls("mount") == []


def test_image_disk_that_is_not_a_block_device_is_refused(tmp_path) -> None:
    node = Node(tmp_path)
    result = node.run(disk_step())
    assert result.returncode != 0 and "/dev/nvme1n1 is not a block device" in result.stderr
    assert node.calls("blkid") == [] and node.calls("mkfs") == []


def test_image_disk_that_is_mounted_elsewhere_is_refused(tmp_path) -> None:
    node = Node(tmp_path)
    node.settings(disks={"/dev/nvme1n1": {"type": "ext4"}})
    result = node.run(disk_step(), ("/dev/nvme1n1",), mounted={"/dev/nvme1n1": "/var/srv"})
    assert result.returncode != 0 and "/dev/nvme1n1 is mounted on /var/srv" in result.stderr, result.stderr
    assert node.calls("mkfs") == [] and node.calls("mount") == []


def test_containerd_root_is_the_image_disk(tmp_path) -> None:
    node = Node(tmp_path)
    spec = cluster(imageDisk={"device": "/dev/nvme1n1", "mountPoint": "/data/images"})
    tune(node, spec)
    config = tomllib.loads(node.read("/etc/containerd/config.toml"))
    assert config["root"] == "/data/images" and containerd_errors(config, 2) == []
