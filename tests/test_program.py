"""The whole program on the mock engine: resources, wiring and resource options, per example stack."""

from __future__ import annotations

import json

from components.config.derived import GPU_TAINT
from components.plan.engine import COMPUTED, SECRET
from components.render.shell import script_of_command, split_parts

from .conftest import known, runs

COMMAND = "command:remote:Command"


def test_onprem_registers_every_node_step_and_layer(run_stack) -> None:
    from components.render.node_steps import prepare_steps

    from .conftest import load_spec, stack_values

    spec = load_spec(*stack_values("onprem"))
    run = run_stack("onprem")
    names = {r.name for r in run.of_type(COMMAND)}
    for node in spec.nodes:
        # One prepare command per node, its steps inside it in order.
        expected = [step.name for step in prepare_steps(spec, node)]
        script = known(script_of_command(run.named(f"{node.name}-prepare").inputs["create"]))
        assert len(expected) >= 6 and [step for step, _ in split_parts(script)] == expected, node.name
        if node is not spec.nodes[0]:
            assert {f"{node.name}-kubeadm-join", f"{node.name}-drain-on-removal"} <= names
    assert {"cp-1-kubeadm-init", "cp-1-admin-kubeconfig", "cp-1-join-credentials"} <= names
    gpu_preflights = {n for n in names if n.endswith("-gpu-preflight")}
    assert gpu_preflights == {f"{node.name}-gpu-preflight" for node in spec.nodes if node.gpu is not None}
    releases = {r.inputs["name"] for r in run.of_type("kubernetes:helm.sh/v3:Release")}
    assert {"gpu-operator", "kueue", "cert-manager", "kserve-crd", "kserve-resources", "kubeflow-trainer"} <= releases
    assert "tigera-operator" in releases


def test_first_control_plane_init_is_protected_and_alone(run_stack) -> None:
    run = run_stack("onprem")
    protected = [r.name for r in run.resources if r.options["protect"]]
    assert protected == ["cp-1-kubeadm-init"]


def test_credential_steps_hide_their_output(run_stack) -> None:
    run = run_stack("onprem")
    for resource in run.of_type(COMMAND):
        secret_stdout = resource.name in ("cp-1-join-credentials", "cp-1-admin-kubeconfig")
        assert ("stdout" in resource.options["additionalSecretOutputs"]) == secret_stdout, resource.name
        assert (resource.inputs["logging"] == "none") == secret_stdout, resource.name
        # No environment: it needs the server's AcceptEnv, and previous output must not flow back in.
        assert "environment" not in resource.inputs
        assert resource.inputs["addPreviousOutputInEnv"] is False


def test_joins_take_credentials_on_stdin_never_in_the_command(run_stack) -> None:
    run = run_stack("onprem")
    join = run.named("gpu-1-kubeadm-join")
    assert join.inputs["stdin"] in (SECRET, COMPUTED)
    # Workers and control planes read what join-credentials printed (a worker: token and CA hash only); no
    # admin credential reaches a worker.
    for name in ("gpu-1-kubeadm-join", "cp-2-kubeadm-join"):
        assert run.urn_of("cp-1-join-credentials") in run.named(name).depends_on
        assert run.urn_of("cp-1-admin-kubeconfig") not in run.named(name).depends_on
    assert join.options["ignoreChanges"] == ["stdin", "create"]
    script = runs(join.inputs["create"])
    assert "__MLCLUSTER_JOIN_TOKEN__" in script and "token: __MLCLUSTER_JOIN_TOKEN__" in script
    assert "IFS= read -r token" in script and "admin.conf" not in script.split("# ---- kubeadm-join-", 1)[1]


def test_steps_run_in_order_on_each_node(run_stack) -> None:
    from components.render.node_steps import prepare_steps

    from .conftest import load_spec, stack_values

    run = run_stack("onprem")
    spec = load_spec(*stack_values("onprem"))
    order = [step.name for step in prepare_steps(spec, spec.nodes[6])]
    assert order[:7] == ["os", "swap", "kernel-modules", "sysctl", "image-disk", "containerd", "kube-packages"]
    assert order[-1] == "kubelet-tuning"
    script = known(script_of_command(run.named("gpu-2-prepare").inputs["create"]))
    # In order inside the one command: each step's part starts after the previous one's.
    positions = [script.index(f"# ---- mlcluster step: {step}:") for step in order]
    assert positions == sorted(positions)
    assert run.urn_of("cp-1-prepare") in run.named("cp-1-kubeadm-init").depends_on
    assert run.urn_of("gpu-2-prepare") in run.named("gpu-2-kubeadm-join").depends_on


def test_workers_join_in_parallel_control_planes_one_by_one(run_stack) -> None:
    run = run_stack("onprem")
    joins = {r.name: r for r in run.of_type(COMMAND) if r.name.endswith("-kubeadm-join")}
    worker_join_urns = {r.urn for n, r in joins.items() if not n.startswith("cp-")}
    for name, join in joins.items():
        if not name.startswith("cp-"):
            assert not worker_join_urns & set(join.depends_on), f"{name} waits for another worker"
    assert run.urn_of("cp-2-kubeadm-join") in joins["cp-3-kubeadm-join"].depends_on
    assert run.urn_of("cp-3-kubeadm-join") in joins["gpu-4-kubeadm-join"].depends_on


def test_one_join_credential_serves_every_joining_node_and_markers_open_no_session(run_stack) -> None:
    run = run_stack("onprem")
    credentials = [r for r in run.of_type(COMMAND) if r.name.endswith("-join-credentials")]
    assert [r.name for r in credentials] == ["cp-1-join-credentials"]
    script = runs(credentials[0].inputs["create"])
    assert "FOR_NODES='cp-2 cp-3 cpu-1 cpu-2 gpu-1 gpu-2 gpu-3 gpu-4'" in script
    assert "CONTROL_PLANES='cp-2 cp-3'" in script and "TOKEN_TTL=24h" in script
    marker = run.named("gpu-1-drain-on-removal")
    assert "create" not in marker.inputs and "kubectl drain" in runs(marker.inputs["delete"])


def test_host_keys_are_pinned_on_every_connection(run_stack) -> None:
    run = run_stack("onprem")
    for resource in run.of_type(COMMAND):
        connection = resource.raw_inputs["connection"]
        assert connection["hostKey"].startswith("ssh-ed25519 "), resource.name
        # dialAttempts 3 (the default) is pulumi-command's dialErrorLimit 2: N failed dials, N + 1 attempts.
        assert connection["perDialTimeout"] == 10 and connection["dialErrorLimit"] == 2


def test_gpu_nodes_get_the_gpu_taint_and_model_label(run_stack) -> None:
    run = run_stack("onprem")
    script = known(script_of_command(run.named("gpu-3-kubeadm-join").inputs["create"]))
    key, _rest = GPU_TAINT.split("=", 1)
    assert f"key: {key}" in script and "effect: NoSchedule" in script
    assert "mlcluster.io/gpu-model=H100-SXM-80GB" in script


def test_kubeconfig_is_a_secret_output_and_feeds_the_provider(run_stack) -> None:
    run = run_stack("onprem")
    assert run.run.outputs["kubeconfig"].secret
    provider = run.of_type("pulumi:providers:kubernetes")[0]
    assert provider.inputs["kubeconfig"] == SECRET
    for release in run.of_type("kubernetes:helm.sh/v3:Release"):
        assert release.options["provider"].startswith(provider.urn), release.name


def test_cloud_stack_has_no_ssh_or_kubeadm(run_stack) -> None:
    run = run_stack("cloud")
    assert not [r for r in run.resources if r.type == COMMAND]
    assert run.run.outputs["kubeconfig"].secret
    assert len(run.of_type("kubernetes:helm.sh/v3:Release")) >= 5


def test_no_secret_value_reaches_recorded_inputs(run_stack) -> None:
    secret_text = "-----BEGIN OPENSSH PRIVATE KEY-----\nmlcluster-test-secret\n-----END OPENSSH PRIVATE KEY-----"
    from .conftest import stack_values

    values, secret = stack_values("onprem")
    values["ssh"]["privateKey"] = secret_text
    run = run_stack("onprem", values=values, secret=secret)
    wire = json.dumps([r.inputs for r in run.resources])
    assert "mlcluster-test-secret" not in wire
    # and the key did reach the engine, only as a secret
    assert run.named("cp-1-prepare").raw_inputs["connection"]["privateKey"] == secret_text
