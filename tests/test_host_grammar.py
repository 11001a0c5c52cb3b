"""One host grammar for every key that names a host: ASCII names, dotted-decimal IPv4, IPv6 without a zone id,
and duplicates compared on the parsed address."""

from __future__ import annotations

import copy
import ipaddress
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.config import checks, formats

from .test_config_validation import base
from .test_hostile_input import errors

# Every key whose value is a host (or a URL or host:port around one), as a path into the stack values and how the
# host is written into that value.
HOST_KEYS: list[tuple[tuple[Any, ...], str]] = [
    (("nodes", 0, "host"), "{}"),
    (("cluster", "controlPlaneEndpoint"), "{}:6443"),
    (("cluster", "apiAddress"), "{}:6443"),
    (("images", "mirrors", 0, "endpoints", 0), "https://{}"),
    (("storage", "nfsServer"), "{}"),
    (("monitoring", "remoteWrite", "url"), "https://{}/api/v1/push"),
]

HOSTILE_HOSTS = {
    "ipv6 zone id": "fe80::1%eth0",
    "ipv6 zone id with shell": "fe80::1%$(reboot)",
    "dotless i": "gpu-ı.lab.example",
    "dotted capital I": "İnference.lab.example",
    "long s": "ſerver.lab.example",
    "kelvin sign": "\u212aube.lab.example",
    "hex ipv4 label": "0x0a.0.0.1",
    "one-number ipv4": "0x0a000001",
    "three-part ipv4": "10.0.1",
    "full-width digits": "１０.０.０.１",
}


def _set(values: dict[str, Any], parts: tuple[Any, ...], value: str) -> None:
    target: Any = values
    for part in parts[:-1]:
        target = target.setdefault(part, {}) if isinstance(part, str) else target[part]
    target[parts[-1]] = value


def _with_sections(values: dict[str, Any]) -> dict[str, Any]:
    """The example with the optional sections these keys live in switched on (NFS storage, remote write)."""
    values = copy.deepcopy(values)
    values.setdefault("images", {})["mirrors"] = [{"registry": "docker.io", "endpoints": ["https://m.lab.example"]}]
    values["storage"] = {"enabled": True, "provisioner": "nfs", "nfsServer": "nfs.lab.example", "nfsPath": "/export"}
    values.setdefault("monitoring", {})["remoteWrite"] = {"url": "https://mimir.lab.example/api/v1/push"}
    return values


def _key_path(parts: tuple[Any, ...]) -> str:
    named = parts[:-1] if isinstance(parts[-1], int) else parts  # a list item is reported at the list's key
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in named).lstrip(".")


def test_the_example_with_every_host_key_set_is_valid() -> None:
    from components.config.load import spec_from_values

    spec_from_values(_with_sections(base()), lambda key: key == "ssh")


@pytest.mark.parametrize(("parts", "form"), HOST_KEYS, ids=[_key_path(p) for p, _ in HOST_KEYS])
@pytest.mark.parametrize("name", HOSTILE_HOSTS)
def test_every_host_key_refuses_what_is_more_than_a_host(parts: tuple[Any, ...], form: str, name: str) -> None:
    host = HOSTILE_HOSTS[name]
    if form.startswith("https://") and ":" in host:
        host = f"[{host}]"
    values = _with_sections(base())
    _set(values, parts, form.format(host))
    found = errors(values)
    assert any(line.startswith(f"mlcluster:{_key_path(parts)}:") for line in found), (name, found)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("10.20.0.21", "::ffff:10.20.0.21"),
        ("2001:db8::21", "2001:DB8:0:0::21"),
        ("gpu-1.lab.example", "GPU-1.lab.example."),
    ],
)
def test_two_spellings_of_one_host_are_one_host(first: str, second: str) -> None:
    values = base()
    values["nodes"][1]["host"] = first
    values["nodes"][2]["host"] = second
    # An IPv4-mapped spelling is refused by itself (one spelling per address); the others are one host.
    said = "IPv4-mapped IPv6 address: write the IPv4 address" if second.startswith("::ffff:") else "already used by"
    assert any(line.startswith("mlcluster:nodes[2].host:") and said in line for line in errors(values))


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=40))
def test_an_accepted_host_is_an_address_or_an_ascii_dns_name(value: str) -> None:
    if checks.host(value) is not None:
        return
    assert value.isascii() and "%" not in value
    if formats.is_ip(value):
        # What the reader parses back is what was written (no zone, no other spelling of an IPv4 address).
        assert formats.dns_key(value) == str(ipaddress.ip_address(value)) or value.startswith("::ffff:")
        return
    labels = value.rstrip(".").split(".")
    assert all(re.fullmatch(r"[A-Za-z0-9-]{1,63}", label) for label in labels), value
    assert not re.fullmatch(r"[0-9]+|0x[0-9a-fA-F]*", labels[-1]), value


@settings(max_examples=300, deadline=None)
@given(st.ip_addresses())
def test_every_address_in_its_usual_spelling_is_accepted_and_keyed_by_its_value(address: Any) -> None:
    if getattr(address, "ipv4_mapped", None) is not None:
        assert checks.host(str(address)) is not None, "an IPv4-mapped spelling is refused: write the IPv4 address"
        return
    assert checks.host(str(address)) is None
    assert formats.dns_key(str(address)) == formats.dns_key(address.exploded)
