"""A credential pasted into the wrong key is named in the error report, never printed (components/config/redact.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.config.load import spec_from_values
from components.config.redact import redacted
from components.config.schema import ConfigError

from .conftest import stack_values

# Each canary: what a user could paste, and the part of it that must never reach a report.
CANARIES = {
    "openssh private key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n"
        "-----END OPENSSH PRIVATE KEY-----\n",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
    ),
    "pem key cut short": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo",
        "MIIEowIBAAKCAQEAu1SU1",
    ),
    "url with user and password": ("https://admin:Hunter2Secret@mimir.example.internal/api/v1/push", "Hunter2Secret"),
    "userinfo without a scheme": ("admin:Hunter2Secret@nfs.example.internal", "Hunter2Secret"),
    "url with a token as user": ("https://ghp_x7Rk9wQ2mN4v@mirror.example.internal", "ghp_x7Rk9wQ2mN4v"),
    "kubeconfig user token": ("users:\n- name: admin\n  user:\n    token: kvS8u2LbQxNw0pRz", "kvS8u2LbQxNw0pRz"),
    "bearer header": ("Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0", "9f8e7d6c5b4a39281706"),
    "bootstrap token": ("abcdef.0123456789abcdef", "0123456789abcdef"),
    "json web token": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJlLXBhcnQ", "eyJzdWIiOiJhZG1pbiJ9"),
    "cloud access key": ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG"),
    "long random string": ("Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg9x", "Zm9vYmFyYmF6cXV4MTIzNDU2"),
}


@pytest.mark.parametrize("name", CANARIES)
def test_each_credential_shape_is_named_not_shown(name: str) -> None:
    value, secret_part = CANARIES[name]
    line = redacted(f'mlcluster:nodes[1].hostKey: got "{value!r}" is not a host key')
    assert secret_part not in line
    assert "[" in line and "]" in line, line


@pytest.mark.parametrize(
    "message",
    [
        "must be set as a secret: pulumi config set --secret --path 'mlcluster:ssh.privateKey' (the value given is"
        " plaintext in the stack file)",
        '"10.0.0.300" is not an IP address or DNS name',
        '"/var/lib/etcd/../etc" is not a normalised absolute path',
        "https://mirror.example.internal is not reachable from mlcluster:images.mirrors[0].endpoints[1]",
        '"nvcr.io/nvidia/pytorch:25.01-py3" is not an image reference',
        "has label 'node-role.kubernetes.io/control-plane', which the kubelet may not set on its own node",
        "(85) must be lower than imageGCHighThresholdPercent (80)",
    ],
)
def test_ordinary_messages_are_left_alone(message: str) -> None:
    assert redacted(message) == message


def _string_leaves(value: Any, parts: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _string_leaves(v, (*parts, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _string_leaves(v, (*parts, i))]
    return [parts] if isinstance(value, str) else []


def _report(values: dict[str, Any], secret: list[str]) -> str:
    try:
        spec_from_values(values, lambda key: key in secret)
    except ConfigError as error:
        return error.report()
    return ""


# What users paste most (the report's redaction is one place for every shape: the unit cases above cover them all).
PASTED = ("openssh private key", "url with user and password", "kubeconfig user token")


@pytest.mark.parametrize(("stack", "text_settings"), [("onprem", 100), ("cloud", 5)])
def test_no_credential_pasted_into_any_key_of_a_real_stack_reaches_the_report(stack: str, text_settings: int) -> None:
    """Every text value of the example stack, replaced by each pasted credential in turn: no report shows it."""
    values, secret = stack_values(stack)
    leaves = _string_leaves(values)
    assert len(leaves) > text_settings, "the walk finds the stack's text settings"
    refused = 0
    for parts in leaves:
        for value, secret_part in (CANARIES[name] for name in PASTED):
            document = copy.deepcopy(values)
            target: Any = document
            for part in parts[:-1]:
                target = target[part]
            target[parts[-1]] = value
            report = _report(document, secret)
            refused += bool(report)
            assert secret_part not in report, (parts, report)
    # Most keys refuse such a value: the assertion above then read a real report, not an empty one.
    assert refused > len(leaves) * len(PASTED) // 2


@pytest.mark.parametrize(
    "parts",
    [
        ("monitoring", "remoteWrite", "url"),
        ("images", "mirrors", 0, "endpoints", 0),
    ],
)
def test_a_url_with_credentials_is_refused_naming_the_secret_setting_beside_it(parts: tuple[Any, ...]) -> None:
    values, secret = stack_values("onprem")
    values = copy.deepcopy(values)
    values["monitoring"]["remoteWrite"] = {"url": "https://mimir.example.internal/api/v1/push"}
    target: Any = values
    for part in parts[:-1]:
        target = target[part]
    target[parts[-1]] = "https://admin:Hunter2Secret@mimir.example.internal/api/v1/push"
    report = _report(values, secret)
    # A list item's problem is reported at the list's key.
    named = parts[:-1] if isinstance(parts[-1], int) else parts
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in named).lstrip(".")
    [line] = [line for line in report.splitlines() if f"mlcluster:{path}:" in line]
    assert "no user or password in it" in line and "`authorization`" in line and "`password`" in line
    assert "Hunter2Secret" not in report and "[credentials]@mimir.example.internal" in line
