"""Hostile and clumsy stack files: each ends with exit 2 and lines naming the key path (or file and line),
never a traceback, never a secret echoed; and what the config lets through reaches node files intact."""

from __future__ import annotations

import copy
import dataclasses
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from components.config.load import spec_from_values
from components.config.schema import ConfigError
from components.plan.__main__ import main as plan
from components.render.images import mirror_authorizations
from components.render.node_steps import image_steps
from components.render.shell import SCRIPTS, render_script
from components.render.tuning_steps import image_disk_step

from .conftest import PROJECT, load_spec, stack_values
from .node_sandbox import Node
from .test_config_validation import HOST_KEY, base

PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAHostileTestKey\n"
SECURE = {"secure": "v1:ZW5jcnlwdGVkLXBsYWNlaG9sZGVy"}


def stack_text(values: dict[str, Any]) -> str:
    return yaml.safe_dump({"config": {f"mlcluster:{k}": v for k, v in values.items()}}, sort_keys=False)


def valid_values() -> dict[str, Any]:
    values = base()
    values["ssh"] = {"user": "ubuntu", "privateKey": SECURE}
    return values


def with_change(path: tuple[Any, ...], value: Any) -> str:
    values = valid_values()
    target: Any = values
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return stack_text(values)


DEEP = "config:\n  mlcluster:nodes: " + "[" * 3000 + "]" * 3000 + "\n"
BOMB = (
    "".join(
        f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['x'] * 9)}]\n"
        for prev, name in zip(["", "a", "b", "c", "d", "e"], ["a", "b", "c", "d", "e", "f"], strict=True)
    )
    + "config: {mlcluster:nodes: [*f]}\n"
)

# (case, file bytes, a line the report must hold)
FILE_FAULTS: list[tuple[str, bytes, str]] = [
    ("tab indentation", b"config:\n\tmlcluster:nodes: []\n", ":2:1: not valid YAML"),
    ("top-level list", b"- config\n- nodes\n", ":1: the file must be a map with a `config:` section"),
    ("top-level scalar", b"mlcluster\n", ":1: the file must be a map with a `config:` section"),
    ("config not a map", b"config: [1, 2]\n", ":1:9: `config:` must be a map"),
    ("non-string key", b"config:\n  mlcluster:cluster:\n    yes: 1\n", ":3:5: key 'yes' is not a string"),
    ("several documents", b"config: {}\n---\nconfig: {}\n", ":3:1: a second YAML document"),
    ("not UTF-8", "config:\n  mlcluster:cluster: {name: café}\n".encode("latin-1"), ":2: byte 0xe9 is not UTF-8"),
    ("unknown tag", b"config:\n  mlcluster:cluster: !!python/object/apply:os.system [id]\n", ":2:22: unknown YAML tag"),
    ("recursive alias", b"config:\n  mlcluster:nodes: &n [*n]\n", "a recursive alias"),
    ("alias bomb", BOMB.encode(), "values once aliases are expanded"),
    ("very deep nesting", DEEP.encode(), "nested"),
    ("duplicate key", b"config:\n  mlcluster:ssh:\n    user: a\n    user: root\n", ":4:5: duplicate key 'user'"),
    (
        "here-document delimiter in a certificate",
        with_change(
            ("images",),
            {
                "mirrors": [
                    {
                        "registry": "docker.io",
                        "endpoints": ["https://m.lab.example"],
                        "ca": "-----BEGIN CERTIFICATE-----\nMLCLUSTER_STEP_SCRIPT\n",
                    }
                ]
            },
        ).encode(),
        "mlcluster:images.mirrors[0].ca: ",
    ),
    ("host with a trailing newline", with_change(("nodes", 0, "host"), "10.20.0.21\n").encode(), "nodes[0].host: "),
    ("node name with a trailing newline", with_change(("nodes", 1, "name"), "w-1\n").encode(), "nodes[1].name: "),
    (
        "version with a trailing newline",
        with_change(("kubernetesVersion",), "1.34.2\n").encode(),
        "kubernetesVersion: ",
    ),
    ("version as a number", with_change(("kueue",), {"version": 0.14}).encode(), "write the version in quotes"),
    ("priority beyond int32", with_change(("kueue",), {"priorityClasses": {"high": 10**30}}).encode(), "32-bit"),
    ("Kubernetes 2.x", with_change(("kubernetesVersion",), "2.0.0").encode(), "Kubernetes releases are 1.x"),
    (
        "hostile mount point",
        with_change(
            ("nodes", 0, "imageDisk"),
            {"device": "/dev/nvme1n1", "mountPoint": "/var/lib/containerd\n[Service]\nExecStartPre=/bin/sh -c id"},
        ).encode(),
        "nodes[0].imageDisk.mountPoint: ",
    ),
    (
        "secret bypassed by a secure sibling",
        stack_text({**valid_values(), "ssh": {"user": SECURE, "privateKey": PRIVATE_KEY}}).encode(),
        "mlcluster:ssh.privateKey: must be set as a secret",
    ),
]


@pytest.mark.parametrize(("case", "content", "expected"), FILE_FAULTS, ids=[c[0] for c in FILE_FAULTS])
def test_every_bad_stack_file_is_refused_by_key_or_line(tmp_path, capsys, case, content, expected) -> None:
    path = tmp_path / "Pulumi.hostile.yaml"
    path.write_bytes(content)
    assert plan(["--stack-file", str(path), "--out", str(tmp_path / "out")]) == 2, case
    out, err = capsys.readouterr()
    assert expected in err, err
    assert "Traceback" not in out + err and "HostileTestKey" not in out + err
    assert not (tmp_path / "out").exists()
    # Every report line names the file (file-level fault) or a mlcluster: key path.
    for line in err.splitlines()[1:]:
        assert line.startswith(f"  - {path}:") or line.startswith("  - mlcluster:"), line


def test_a_file_fault_through_the_real_cli_exits_2_without_a_traceback(tmp_path) -> None:
    path = tmp_path / "Pulumi.dup.yaml"
    path.write_bytes(b"config:\n  mlcluster:ssh: {user: a}\n  mlcluster:ssh: {user: b}\n")
    result = subprocess.run(
        [sys.executable, "-m", "components.plan", "--stack-file", str(path)],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{path}:3:3: duplicate key 'mlcluster:ssh'" in result.stderr


def test_a_secure_private_key_with_plaintext_siblings_is_accepted(tmp_path, capsys) -> None:
    """The negative of the bypass case: the per-path check is no blanket refusal."""
    from components.plan.__main__ import spec_or_report

    path = tmp_path / "Pulumi.ok.yaml"
    path.write_text(stack_text(valid_values()))
    read = spec_or_report(path)
    assert read is not None, capsys.readouterr().err
    assert read[0].secret_keys == ["mlcluster:ssh"] and read[0].secret_paths == {"ssh.privateKey"}


def errors(values: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        spec_from_values(values, lambda key: key == "ssh")
    return [str(p) for p in info.value.problems.errors]


SCANNED = HOST_KEY.split(" ", 1)


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("ssh", "user"), "root\n", "mlcluster:ssh.user: "),
        (("ssh", "user"), "-oProxyCommand=id", "is not a Linux user name"),
        (("nodes", 0, "hostKey"), "ssh-ed25519 AAAA!!!!", "is not base64"),
        (("nodes", 0, "hostKey"), "ssh-ed25519 " + "QUFBQQ==", "is not a ssh-ed25519 key"),
        (("nodes", 0, "hostKey"), f"ssh-rsa {SCANNED[1]}", "is not a ssh-rsa key"),
        (("nodes", 0, "hostKey"), f"10.9.9.9 {HOST_KEY}", "was scanned from '10.9.9.9'"),
        (("nodes", 2, "gpu", "model"), "H100 SXM", "nodes[2].gpu.model: "),
        (("nodes", 2, "gpu", "model"), "H100/SXM", "nodes[2].gpu.model: "),
        (("nodes", 1, "host"), "GPU-1.lab.example.", 'nodes[2].host: "gpu-1.lab.example" is already used by nodes[1]'),
        (("gpuOperator",), {"driverVersion": "580.95.05; reboot"}, "gpuOperator.driverVersion: "),
        (
            ("kserve",),
            {"endpoints": [{"name": "m", "modelFormat": "sklearn", "storageUri": "s3://b/m\n"}]},
            "kserve.endpoints[0].storageUri: ",
        ),
        (
            ("kserve",),
            {
                "endpoints": [
                    {"name": "m", "modelFormat": "sklearn", "storageUri": "s3://b/m", "runtime": "Kserve Sklearn"}
                ]
            },
            "kserve.endpoints[0].runtime: ",
        ),
        (("workloads",), {"training": {"image": "pytorch:2.6 --privileged"}}, "workloads.training.image: "),
        (("nodes", 1, "taints"), ["gpu\nnode-role=x:NoSchedule"], "nodes[1].taints: "),
        (("nodes", 1, "taints"), ["dedicated=ml team:NoExecute"], "nodes[1].taints: "),
    ],
)
def test_values_are_checked_for_where_they_go(path, value, expected) -> None:
    values = base()
    target: Any = values
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    found = errors(values)
    assert any(expected in line for line in found), found


def test_a_pasted_keyscan_line_of_the_right_host_is_pinned_without_the_host() -> None:
    values = base()
    values["nodes"][2]["hostKey"] = f"gpu-1.lab.example {HOST_KEY}"
    values["nodes"][1]["hostKey"] = f"[198.18.0.11]:2222 {HOST_KEY} root@w-1"
    spec = spec_from_values(values, lambda key: key == "ssh")
    assert spec.nodes[2].pinned_host_key == HOST_KEY and spec.nodes[1].pinned_host_key == HOST_KEY


def test_every_single_line_value_of_a_real_stack_refuses_a_trailing_newline() -> None:
    """The class behind `10.20.0.21\\n`: no checked text setting of the example stack takes a line break."""
    values, secret = stack_values("onprem")
    # PEM text, and container arguments (YAML list items, which round-trip any text: test_formats).
    deployments = values["kserve"]["deployments"]
    # The Grafana password: secret text that only ever lands in a Secret's stringData.
    free_text = {
        "images.mirrors[1].ca",
        "monitoring.grafanaAdminPassword",
        *(f"kserve.deployments[{d}].args[{i}]" for d, item in enumerate(deployments) for i in range(len(item["args"]))),
    }
    checked = 0

    def leaves(value: Any, path: str, parts: tuple[Any, ...]) -> list[tuple[str, tuple[Any, ...]]]:
        if isinstance(value, dict):
            return [x for k, v in value.items() for x in leaves(v, f"{path}.{k}" if path else k, (*parts, k))]
        if isinstance(value, list):
            return [x for i, v in enumerate(value) for x in leaves(v, f"{path}[{i}]", (*parts, i))]
        return [(path, parts)] if isinstance(value, str) and "\n" not in value else []

    for path, parts in leaves(values, "", ()):
        if path in free_text or path.endswith(("privateKey", "authorization")):
            continue
        document = copy.deepcopy(values)
        target: Any = document
        for part in parts[:-1]:
            target = target[part]
        target[parts[-1]] += "\n"
        with pytest.raises(ConfigError) as info:
            load_spec(document, secret)
        # At the key itself, or at the map whose check reads it (labels).
        found = [p.path for p in info.value.problems.errors]
        assert any(path == f or path.startswith((f + ".", f + "[")) for f in found), (path, found)
        checked += 1
    assert checked > 40


def test_the_image_disk_step_refuses_a_hostile_mount_point_even_if_rendered(tmp_path) -> None:
    """Before this check the drop-in got `[Service]\\nExecStartPre=...`; now config and step both refuse it."""
    hostile = "/var/lib/containerd\n[Service]\nExecStartPre=/bin/sh -c 'touch /etc/owned'"
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["nodes"][0]["imageDisk"] = {"device": "/dev/nvme1n1", "mountPoint": hostile}
    with pytest.raises(ConfigError) as info:
        load_spec(values, secret)
    assert "nodes[0].imageDisk.mountPoint" in info.value.report()

    values["nodes"][0]["imageDisk"]["mountPoint"] = "/var/lib/containerd"
    node_spec = load_spec(values, secret).nodes[0]
    assert node_spec.image_disk is not None
    forged = dataclasses.replace(node_spec, image_disk=dataclasses.replace(node_spec.image_disk, mount_point=hostile))
    step = image_disk_step(forged)
    assert step is not None and step.script is not None
    node = Node(tmp_path)
    result = node.run(step.script, ("/dev/nvme1n1",))
    assert result.returncode == 1 and "is not a plain absolute path" in result.stderr, result.stderr
    assert not node.exists("/etc/systemd/system/containerd.service.d/50-mlcluster-image-disk.conf")
    assert node.calls("mkfs") == [] and "containerd" not in node.read("/etc/fstab")


def test_an_authorization_with_an_ampersand_is_written_as_given(tmp_path: Path) -> None:
    """bash >= 5.2 reads an unquoted & in a ${var//pattern/replacement} as the matched pattern."""
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["images"] = {
        "mirrors": [{"registry": "docker.io", "endpoints": ["https://m.lab.example"], "authorization": "Basic a&b=&"}],
        "spegel": {"enabled": False},
    }
    spec = load_spec(values, [*secret, "images"])
    (step,) = [s for s in image_steps(spec, spec.nodes[5]) if s.name == "registry-mirrors"]
    assert step.script is not None
    certs = tmp_path / "certs.d"
    script = step.script.replace("CERTS_DIR=/etc/containerd/certs.d", f"CERTS_DIR={certs}")
    result = subprocess.run(
        ["bash", "-c", script],
        input=mirror_authorizations(spec.images.mirrors),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert 'Authorization = "Basic a&b=&"' in (certs / "docker.io" / "hosts.toml").read_text()


STEP_SETTING = re.compile(r'"\$\{([A-Z][A-Z0-9_]*)[:?]')
STEPS = sorted(p.stem for p in SCRIPTS.glob("*.sh") if p.name != "lib.sh")
PAYLOADS = (
    "$(touch {canary})",
    "`touch {canary}`",
    "x\n[Service]\nExecStartPre=touch {canary}; touch {canary}",
    "' \" \\ $HOME ${{HOME}} * ? [a] ~ & | ; < > # % !!",
    "-n",
    "",
    " leading and trailing \t\r\n",
)


def settings_of(step: str) -> list[str]:
    """The settings a step reads: required (`: "${X:?}"`) or with a default (`X=${X:-default}`)."""
    text = (SCRIPTS / f"{step}.sh").read_text()
    required = [n for line in text.splitlines() if line.startswith(': "${') for n in STEP_SETTING.findall(line)]
    return required + re.findall(r"^([A-Z][A-Z0-9_]*)=\$\{\1:-", text, re.MULTILINE)


def assigned(step: str, value: str) -> list[str]:
    """Each setting of `step` as the rendered script's assignments leave it in the shell."""
    names = settings_of(step)
    text = render_script(step, dict.fromkeys(names, value))
    assignments = text.split("# shellcheck shell=bash", 1)[0]
    probe = "".join(f"printf '%s\\0' \"${{{n}}}\"\n" for n in names)
    # Bytes: text mode would turn a \r\n in the output into \n.
    result = subprocess.run(["bash", "-c", assignments + probe], capture_output=True, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.decode().split("\0")[:-1]


@pytest.mark.parametrize("step", STEPS)
def test_each_steps_settings_arrive_as_data(tmp_path, step) -> None:
    assert settings_of(step) or step in ("os", "swap", "admin-kubeconfig"), step
    canary = tmp_path / "owned"
    for payload in PAYLOADS:
        value = payload.format(canary=canary)
        assert assigned(step, value) == [value] * len(settings_of(step)), (step, payload)
    assert not canary.exists()


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(exclude_characters="\x00", codec="utf-8"), max_size=40))
def test_any_text_setting_arrives_unchanged(value: str) -> None:
    assert assigned("image-disk", value) == [value] * 4


def test_step_bodies_never_evaluate_their_inputs() -> None:
    """No eval or sourcing of settings; word splitting is allowed only over lib.sh's port lists."""
    for step in [*STEPS, "lib"]:
        lines = (SCRIPTS / f"{step}.sh").read_text().splitlines()
        for i, line in enumerate(lines):
            code = line.split(" #", 1)[0]
            # Settings are the upper-case variables; sourcing a file named by one would run its content.
            assert not re.search(r"\beval\b|^\s*(source|\.)\s+\"?\$\{?[A-Z]", code), f"{step}.sh:{i + 1}: {line}"
            if "disable=SC2086" in line:
                assert re.fullmatch(r"firewall_open( \$[A-Z_]+| \$ports)+", lines[i + 1]), f"{step}.sh:{i + 2}"


def test_the_program_refuses_a_plaintext_key_beside_a_secure_sibling(tmp_path, monkeypatch) -> None:
    """Under the engine the whole `mlcluster:ssh` key is secret; the stack file shows the plaintext key."""
    from components.config.load import read_stack_document, stack_file_of
    from components.plan.engine import run_program

    (tmp_path / "Pulumi.yaml").write_text("name: mlcluster\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir()
    stack_path = tmp_path / "stacks" / "Pulumi.lab.yaml"
    stack_path.write_text(stack_text({**valid_values(), "ssh": {"user": SECURE, "privateKey": PRIVATE_KEY}}))
    found = stack_file_of(tmp_path, "lab")
    assert found is not None and found.plaintext_at("ssh.privateKey") and not found.plaintext_at("ssh.user")
    assert stack_file_of(tmp_path, "other") is None

    stack = read_stack_document(stack_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(pulumi.RunError) as info:
        run_program(stack.config, stack.secret_keys, stack="lab")
    assert "mlcluster:ssh.privateKey: must be set as a secret" in str(info.value)
    assert "HostileTestKey" not in str(info.value)

    # The negative: the key itself secure, the user plaintext (its section still secret as a whole).
    stack_path.write_text(stack_text(valid_values()))
    found = stack_file_of(tmp_path, "lab")
    assert found is not None and not found.plaintext_at("ssh.privateKey")
