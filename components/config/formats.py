"""One guard per target format: a config value that lands in a file on a node or in a manifest is checked
against the grammar of *that* file here, not only against the shell that carries it.

Every guard is a check (None when fine, else what is wrong), so a refused value is reported at its key path.
Shell quoting (`shlex.quote` in render/shell.py) keeps a value one word in the step script; these guards keep
it one value in the file the script writes (a newline in a systemd drop-in starts a new directive, a space
in an fstab line starts a new field). Encoders whose output is parsed back in the property tests
(tests/test_formats.py) live next to them: TOML strings in render/toml_text.py, YAML in render/yaml_text.py.

| target                           | guard or encoder                        |
|----------------------------------|-----------------------------------------|
| any single-line setting          | `single_line`                           |
| systemd unit value (a path)      | `systemd_path`                          |
| fstab field                      | `fstab_field`                           |
| mount point (unit + fstab)       | `mount_path`                            |
| Kubernetes label value           | `label_value`                           |
| DNS name                         | `dns_name` (`dns_key`: its identity)    |
| container image reference        | `image_reference`                       |
| http(s) URL                      | `http_url`                              |
| registry URL (Spegel)            | `registry_url`                          |
| HTTP header value (secret)       | `header_value`                          |
| storage URI (KServe)             | `storage_uri`                           |
| Linux user name (SSH)            | `user_name`                             |
| SSH public host key              | `ssh_host_key`                          |
| TOML string (containerd)         | `render.toml_text.string`               |
| YAML (manifests, kubelet, values)| `render.yaml_text.dump`                 |
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import re
import struct
from urllib.parse import urlsplit

from .schema import Secret

# C0 and C1 controls, DEL, and the Unicode line and paragraph separators (line breaks to YAML and editors).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
# Characters a systemd unit value reads specially: whitespace separates list items, `%` starts a specifier,
# `\` an escape, quotes group words; a `;` or `#` at a line start begins a comment.
_SYSTEMD_SPECIAL = re.compile(r"[\s%\\\"']")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# ASCII only: with IGNORECASE alone, [a-z] also matches letters that fold to ASCII ones (dotless ı, İ, ſ, the Kelvin
# sign), and a look-alike name would reach SSH, Helm values and labels.
_DNS_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)", re.IGNORECASE | re.ASCII)
# distribution/reference grammar (reference/regexp.go): [domain[:port]/]path[:tag][@digest].
_DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)
# shadow-utils' NAME_REGEX (useradd) with the 32-character limit of utmp.
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,30}[a-z0-9_$-]?")
_STORAGE_SCHEMES = ("s3", "gs", "hf", "pvc", "oci", "http", "https", "azure", "hdfs", "webhdfs")
SSH_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)


def is_ip(value: str) -> bool:
    """IPv4 in dotted decimal, or IPv6 without a zone id: `fe80::1%eth0` names an interface of the machine that
    reads it, and whatever follows the `%` would reach kubeadm, etcd and Prometheus as it is (a link-local address
    is no address for a node, an API endpoint or a mirror)."""
    if "%" in value:
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


_OPENSSH_PRIVATE = re.compile(
    r"-----BEGIN OPENSSH PRIVATE KEY-----\s*(.+?)\s*-----END OPENSSH PRIVATE KEY-----", re.DOTALL | re.ASCII
)


def private_key_fingerprint(private_key: str) -> str | None:
    """The SHA256 fingerprint (as ssh-keygen -l prints it) of the public half of an OpenSSH-format private key, read
    from the key file's unencrypted public section (openssh PROTOCOL.key: magic, cipher, kdf, kdf options, key count,
    then each public key), so it is the same for an encrypted key. None for another format."""
    match = _OPENSSH_PRIVATE.search(private_key)
    if match is None:
        return None
    try:
        blob = base64.b64decode("".join(match.group(1).split()), validate=True)
    except (binascii.Error, ValueError):
        return None
    magic = b"openssh-key-v1\0"
    if not blob.startswith(magic):
        return None
    offset = len(magic)
    try:
        for _ in range(3):  # ciphername, kdfname, kdfoptions
            (length,) = struct.unpack(">I", blob[offset : offset + 4])
            offset += 4 + length
        (count,) = struct.unpack(">I", blob[offset : offset + 4])
        offset += 4
        (length,) = struct.unpack(">I", blob[offset : offset + 4])
        public = blob[offset + 4 : offset + 4 + length]
    except struct.error:
        return None
    if count < 1 or len(public) != length or not public:
        return None
    return "SHA256:" + base64.b64encode(hashlib.sha256(public).digest()).decode().rstrip("=")


def ipv4_mapped(value: str) -> str | None:
    """The IPv4 address an IPv4-mapped IPv6 spelling (::ffff:10.0.0.1) stands for, else None."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(mapped) if mapped is not None else None


def same_address(a: str, b: str) -> bool:
    """Two spellings of one IP address (10.0.0.1 and ::ffff:10.0.0.1, 2001:DB8::1 and 2001:db8:0::1)."""
    try:
        first, second = ipaddress.ip_address(a), ipaddress.ip_address(b)
    except ValueError:
        return False
    unmapped = [x.ipv4_mapped or x if isinstance(x, ipaddress.IPv6Address) else x for x in (first, second)]
    return unmapped[0] == unmapped[1]


_PEM_CERTIFICATE = re.compile(
    r"-----BEGIN CERTIFICATE-----\r?\n([A-Za-z0-9+/=\r\n]+?)\r?\n?-----END CERTIFICATE-----", re.ASCII
)


def pem_certificates(value: str) -> str | None:
    """One or more PEM certificates (RFC 7468) and nothing else: what containerd's hosts.toml `ca` and curl's
    --cacert read. Each block's base64 must decode to a DER SEQUENCE, the shape every X.509 certificate has."""
    blocks = list(_PEM_CERTIFICATE.finditer(value))
    if not blocks:
        return "is not a PEM certificate (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)"
    rest = _PEM_CERTIFICATE.sub("", value)
    if rest.strip():
        return "holds text besides its PEM certificates: give only the CA certificate blocks"
    for index, block in enumerate(blocks):
        try:
            der = base64.b64decode("".join(block.group(1).split()), validate=True)
        except ValueError:
            return f"has a certificate block ({index + 1}) whose content is not base64"
        if len(der) < 64 or der[0] != 0x30:
            return f"has a certificate block ({index + 1}) that is not a DER-encoded X.509 certificate"
    return None


def single_line(value: str) -> str | None:
    """Any setting that ends up in a file or a command line: one line of printable text."""
    found = _CONTROL.search(value)
    if found:
        return f"contains a control character ({found.group()!r}): newlines and tabs are not allowed here"
    return None


def systemd_path(value: str) -> str | None:
    """A path written as the value of a systemd directive (RequiresMountsFor=, ...)."""
    problem = single_line(value)
    if problem:
        return problem
    if not value.startswith("/"):
        return "is not an absolute path"
    if _SYSTEMD_SPECIAL.search(value):
        return "contains whitespace, %, \\ or a quote, which a systemd unit reads as syntax"
    return None


def fstab_field(value: str) -> str | None:
    """One whitespace-separated field of an /etc/fstab line."""
    problem = single_line(value)
    if problem:
        return problem
    if not value or re.search(r"[\s\\]", value) or value.startswith("#"):
        return "is empty or contains whitespace, \\ or a leading #, which /etc/fstab reads as syntax"
    return None


def mount_path(value: str) -> str | None:
    """A mount point: written into /etc/fstab and a containerd unit drop-in, so it must fit both."""
    problem = systemd_path(value) or fstab_field(value)
    if problem:
        return problem
    if any(part in (".", "..") for part in value.split("/")) or "//" in value:
        return "is not a normalised absolute path (no //, . or .. parts)"
    return None


def label_value(value: str) -> str | None:
    """A Kubernetes label value (also a node-label value passed to kubelet --node-labels)."""
    if not _LABEL_VALUE.fullmatch(value):
        return (
            "is not a valid label value (at most 63 letters, digits, '-', '_' or '.', starting and ending"
            " with a letter or digit)"
        )
    return None


def dns_name(value: str) -> str | None:
    labels = value[:-1].split(".") if value.endswith(".") else value.split(".")
    if not all(_DNS_LABEL.fullmatch(label) for label in labels):
        return "is not an IP address or DNS name"
    # A numeric last label (RFC 3696: no top-level domain is all-numeric) is an IPv4 address in another spelling
    # (10.0.1, 0x0a.0.0.1, 0x0a000001, which SSH and curl read as 10.0.0.1): only dotted decimal is an address.
    if re.fullmatch(r"[0-9]+|0x[0-9a-f]*", labels[-1], re.IGNORECASE | re.ASCII):
        return "is not an IP address or DNS name (an IPv4 address is written in dotted decimal, such as 10.0.0.1)"
    if len(value.rstrip(".")) > 253:
        return "is not an IP address or DNS name (longer than 253 characters)"
    return None


def dns_key(value: str) -> str:
    """What identifies a host: DNS is case-insensitive and `example.com.` is `example.com`; an IP address is its
    parsed value (`2001:DB8:0::1` is `2001:db8::1`, and `::ffff:10.0.0.1` is `10.0.0.1`)."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return value.lower().rstrip(".")
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def image_reference(value: str) -> str | None:
    if len(value) > 255 or not _IMAGE.fullmatch(value):
        return "is not an image reference such as nvcr.io/nvidia/pytorch:25.01-py3 (lowercase repository)"
    return None


def http_url(value: str) -> str | None:
    problem = single_line(value)
    if problem or re.search(r"\s", value):
        return "is not an http(s) URL such as https://mirror.example.internal"
    if not value.isascii():
        # urlsplit lowercases the host, and Unicode lowercasing turns look-alikes (the Kelvin sign) into ASCII.
        return (
            "is not an http(s) URL such as https://mirror.example.internal (ASCII only: an international name in"
            " its xn-- form)"
        )
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return "is not an http(s) URL such as https://mirror.example.internal (bad host or port)"
    if "?" in value or "#" in value:
        return "is not an http(s) URL such as https://mirror.example.internal (no query or fragment)"
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return (
            "is not an http(s) URL such as https://mirror.example.internal: no user or password in it (credentials go"
            " in the secret setting beside it: a mirror's `authorization`, remote write's `username` and `password`)"
        )
    host = parts.hostname
    if not (is_ip(host) or not dns_name(host)) or (port is not None and not 1 <= port <= 65535):
        return "is not an http(s) URL such as https://mirror.example.internal (bad host or port)"
    return None


def registry_url(value: str) -> str | None:
    """A registry as Spegel names one: an http(s) URL with no path, not even "/" (spegel v0.7.4 pkg/oci/filter.go
    validateRegistryURL refuses any other at the pod's start)."""
    problem = http_url(value)
    if problem is None and urlsplit(value).path:
        return "is not a registry URL such as https://docker.io (no path, not even a trailing /)"
    return problem


def header_value(value: Secret) -> str | None:
    """An HTTP header value (a registry's Authorization): it travels as one `registry<TAB>value` stdin line
    and is placed inside a TOML basic string on the node, where a quote or backslash would end or escape it."""
    text = value.reveal()
    if not text or single_line(text) or re.search(r'["\\]', text):
        return (
            "is not one HTTP header value such as 'Basic dXNlcjpwYXNz' (no control characters, quotes or backslashes)"
        )
    return None


def storage_uri(value: str) -> str | None:
    """A model location as KServe's storage initializer reads it: scheme://location."""
    scheme, sep, rest = value.partition("://")
    if single_line(value) or re.search(r"\s", value) or not sep or not rest or scheme not in _STORAGE_SCHEMES:
        return (
            "is not a storage URI such as s3://bucket/model, gs://bucket/model, hf://org/model or"
            f" pvc://claim/path (schemes: {', '.join(_STORAGE_SCHEMES)})"
        )
    return None


def user_name(value: str) -> str | None:
    if not _USER.fullmatch(value):
        return "is not a Linux user name (lowercase letters, digits, '_' and '-', starting with a letter or '_')"
    return None


def ssh_host_key(value: str) -> str | None:
    """`TYPE BASE64 [comment]`, or a pasted ssh-keyscan line `HOST TYPE BASE64`: the blob must be a real key
    blob of the stated type (its first field names the same type)."""
    parts = split_host_key(value)
    if parts is None:
        return "is not an SSH public host key such as 'ssh-ed25519 AAAA…' (the output of ssh-keyscan -t ed25519 HOST)"
    key_type, blob = parts
    if key_type not in SSH_KEY_TYPES:
        return f"has key type {key_type!r}; known: {', '.join(SSH_KEY_TYPES)}"
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return "has a key body that is not base64 (copy the whole ssh-keyscan line)"
    if len(raw) < 4:
        return "has a key body too short to be a key"
    (length,) = struct.unpack(">I", raw[:4])
    if raw[4 : 4 + length] != key_type.encode() or len(raw) <= 4 + length:
        return f"has a key body that is not a {key_type} key (the body names another type or is truncated)"
    if key_type == "ssh-ed25519" and len(raw) != 4 + length + 4 + 32:
        return "has an ssh-ed25519 key body of the wrong length (a key is 32 bytes)"
    return None


def split_host_key(value: str) -> tuple[str, str] | None:
    """(type, base64 body) of a host key, dropping a leading ssh-keyscan host field and a trailing comment."""
    if single_line(value):
        return None
    parts = value.split()
    if len(parts) >= 3 and parts[1] in SSH_KEY_TYPES and parts[0] not in SSH_KEY_TYPES:
        parts = parts[1:]
    if len(parts) < 2:
        return None
    return parts[0], parts[1]
