"""SSH rules as pulumi-command applies them: bastion pins, ssh-rsa pins, dial attempts (issue 14)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.cluster.connection import dial_error_limit
from components.config.load import spec_from_values
from components.config.schema import ConfigError
from components.render.kubeconfig import kubeconfig_reaching

from .test_config_validation import HOST_KEY, base

RSA_KEY = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCr3c0e4mEWEyhVAozR57fKHSgMMauf8zqHDXi2EpC+RU6pHTCrwRERoSMaS7X1"
    "ERFnF5sIjBSP4Ssm1/2vqUZcwv/rZ+j/qUnsqN7gRdbLjBbTikR/KXj24EybS2ayRU+6hZoFsRh5gFKTLlxu7jgdAE/lAWMmP/C4"
    "zEVwrkbtcNrbiFOvD7MxSp1EQu4/gsDUycdsBG7PCl0Eko661rxewgbLrGRBcu2FlDGuWU0zH3+u+o5PM4A7crxxUJo4cDr/cA9t"
    "edMGkY1qX9Vsbxet2QI0l4Kl5kZMISdcougITePVDl9bnhq30kTPagd4PGP7ePH5VnYcKOd2vvpecNwV"
)  # a real key blob: the pin is refused for its type, not its shape


def problems(values: dict[str, Any]) -> list[str]:
    try:
        spec_from_values(values, lambda key: key == "ssh")
    except ConfigError as error:
        return [str(p) for p in error.problems.errors]
    return []


def with_bastion(**bastion: Any) -> dict[str, Any]:
    values = base()
    values["ssh"]["bastion"] = {"host": "198.18.0.2", **bastion}
    values["cluster"]["apiAddress"] = "127.0.0.1:6443"
    return values


def test_a_bastion_needs_an_api_address_the_pulumi_host_reaches() -> None:
    values = with_bastion(hostKey=HOST_KEY)
    del values["cluster"]["apiAddress"]
    (problem,) = problems(values)
    assert problem.startswith("mlcluster:cluster.apiAddress: is required with ssh.bastion: the bastion carries SSH")
    assert "127.0.0.1:6443 through `ssh -N -L 6443:<first control plane>:6443 <bastion>`" in problem


def test_the_providers_kubeconfig_dials_the_api_address_and_still_verifies_the_servers_name() -> None:
    kubeconfig = yaml.safe_dump(
        {
            "clusters": [
                {"name": "c", "cluster": {"server": "https://10.0.0.10:6443", "certificate-authority-data": "Q0E="}}
            ]
        }
    )
    cluster = yaml.safe_load(kubeconfig_reaching(kubeconfig, "127.0.0.1:16443"))["clusters"][0]["cluster"]
    assert cluster == {
        "server": "https://127.0.0.1:16443",
        "certificate-authority-data": "Q0E=",
        "tls-server-name": "10.0.0.10",
    }
    assert yaml.safe_load(kubeconfig_reaching(kubeconfig, "lb.example"))["clusters"][0]["cluster"]["server"] == (
        "https://lb.example:6443"
    )


def test_a_bastion_without_a_pinned_host_key_is_refused_unless_the_loud_opt_out() -> None:
    assert problems(with_bastion(hostKey=HOST_KEY)) == []
    assert problems(with_bastion()) == [
        "mlcluster:ssh.bastion.hostKey: is required (pin the SSH host key: ssh-keyscan -t ed25519 HOST), or set"
        " ssh.insecureIgnoreHostKeys: true for a throwaway lab"
    ]
    opted_out = with_bastion()
    opted_out["ssh"]["insecureIgnoreHostKeys"] = True
    assert problems(opted_out) == []


@pytest.mark.parametrize("where", ["nodes[1].hostKey", "ssh.bastion.hostKey"])
def test_an_ssh_rsa_pin_is_refused_for_nodes_and_the_bastion_alike(where: str) -> None:
    values = with_bastion(hostKey=HOST_KEY)
    if where.startswith("nodes"):
        values["nodes"][1]["hostKey"] = RSA_KEY
    else:
        values["ssh"]["bastion"]["hostKey"] = RSA_KEY
    (problem,) = problems(values)
    assert problem.startswith(f"mlcluster:{where}: is an ssh-rsa key") and "ssh-keyscan -t ed25519" in problem


def test_dial_attempts_are_what_pulumi_command_makes_of_the_error_limit() -> None:
    values = base()
    values["ssh"]["dialAttempts"] = 3
    spec = spec_from_values(values, lambda key: key == "ssh")
    # dialErrorLimit N: N failed dials are allowed, N + 1 attempts in all.
    assert dial_error_limit(spec.ssh) + 1 == 3
