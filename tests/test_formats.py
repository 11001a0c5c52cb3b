"""Each target format's guard, property-tested: arbitrary text is refused, or the file it is written into
reads back exactly that value (parsed by that file's own grammar, never by the guard's patterns)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from components.config import formats
from components.config.kubelet import ImageDiskSpec
from components.config.schema import Secret
from components.render import toml_text, yaml_text
from components.render.shell import SCRIPTS

# Text that reaches for every grammar: separators, quotes, escapes, specifiers, comments, line breaks.
HOSTILE = "\n\r\t \x00\x0b\x1b\x7f\u0085\u2028\"'\\%$`;#=[]{}&|<>*?,:/.@+-_Aa0é😀"
hostile_text = st.text(alphabet=st.sampled_from(HOSTILE), max_size=24) | st.text(max_size=24)
# Mostly path-shaped, so accepted values are common enough to exercise the round trip.
paths = st.builds(lambda parts: "/" + "/".join(parts), st.lists(hostile_text, min_size=1, max_size=4))
PROPERTY = settings(max_examples=400, deadline=None)


def script_template(name: str, pattern: str) -> str:
    match = re.search(pattern, (SCRIPTS / name).read_text(), re.DOTALL)
    assert match, f"{name} no longer has {pattern!r}: update the property test with it"
    return match.group(1)


# The exact text image-disk.sh writes, so the property follows the script if it changes.
DROP_IN = script_template("image-disk.sh", r'write_if_changed "\$unit_dropin" "(.*?)"; then')
FSTAB_LINE = script_template("image-disk.sh", r'fstab_line="(.*?)"\n')


def systemd_directives(text: str) -> list[tuple[str, str, list[str]]]:
    """(section, key, words) as systemd's unit parser reads a file (conf-parser.c): \\n, \\r and NUL end a
    line, `#`/`;` lines are comments, a trailing backslash continues the line, `key=value` splits at the first
    `=`. A value with a specifier (%), an escape or a quote is not read literally: it yields no words."""
    directives: list[tuple[str, str, list[str]]] = []
    section = ""
    pending = ""
    for raw in re.split(r"\r\n|[\n\r\x00]", text):
        line = (pending + raw).strip(" \t\n\r")
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, _, value = line.partition("=")
        literal = not re.search(r"[%\\\"']", value)
        directives.append((section, key.strip(), value.split() if literal else []))
    return directives


def fstab_line(mount_point: str) -> str:
    return (
        FSTAB_LINE.replace("$uuid", "0a1b")
        .replace('$(blkid -o value -s TYPE "$device")', "xfs")
        .replace("$mount_point", mount_point)
    )


def fstab_fields(text: str) -> list[list[str]]:
    """Fields of each fstab entry as libmount reads them: blank/`#` lines skipped, whitespace separates
    fields, \\NNN octal escapes decoded."""
    entries = []
    for line in text.split("\n"):
        if not line.strip(" \t") or line.lstrip(" \t").startswith("#"):
            continue
        fields = re.split(r"[ \t]+", line.strip(" \t"))
        entries.append([re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), f) for f in fields])
    return entries


@PROPERTY
@given(paths)
def test_systemd_path_is_refused_or_reads_back_as_one_directive(value: str) -> None:
    if formats.systemd_path(value) is not None:
        return
    unit = DROP_IN.replace("$mount_point", value)
    assert systemd_directives(unit) == [("Unit", "RequiresMountsFor", [value])]


@PROPERTY
@given(st.one_of(paths, hostile_text))
def test_fstab_field_is_refused_or_reads_back_as_one_field(value: str) -> None:
    if formats.fstab_field(value) is not None:
        return
    assert fstab_fields("# header\n" + fstab_line(value) + "\n") == [
        ["UUID=0a1b", value, "xfs", "defaults,nofail", "0", "2"]
    ]


@PROPERTY
@given(paths)
def test_mount_point_is_refused_by_key_or_fits_both_files(value: str) -> None:
    """The config check of imageDisk.mountPoint: accepted means both the unit and fstab read it back."""
    check = next(f for f in ImageDiskSpec.__dataclass_fields__.values() if f.name == "mount_point").metadata["check"]
    if check(value) is not None:
        return
    assert systemd_directives(DROP_IN.replace("$mount_point", value)) == [("Unit", "RequiresMountsFor", [value])]
    assert fstab_fields(fstab_line(value))[0][1] == value
    assert not set(value.split("/")) & {".", ".."}


def test_the_mount_point_injection_is_refused() -> None:
    hostile = "/var/lib/containerd\n[Service]\nExecStartPre=/bin/sh -c 'id > /etc/owned'"
    # What the drop-in would read as if the value were written: a root command at the next containerd start.
    assert ("Service", "ExecStartPre", []) in systemd_directives(DROP_IN.replace("$mount_point", hostile))
    assert formats.systemd_path(hostile) is not None and formats.mount_path(hostile) is not None
    for spaced in ("/var/lib/my images", "/data/%H", "/data/\\x2d"):
        assert formats.mount_path(spaced) is not None, spaced


@PROPERTY
@given(hostile_text, hostile_text)
def test_toml_strings_and_keys_read_back_exactly(key: str, value: str) -> None:
    document = {"host": {key: {"header": {"Authorization": value}, "list": [value, key]}}}
    assert tomllib.loads(toml_text.dumps(document)) == document


def test_toml_string_escapes_what_toml_forbids_raw() -> None:
    # DEL and an astral character: JSON's writer leaves the first raw and splits the second into surrogates.
    assert tomllib.loads("v = " + toml_text.string("a\x7fb😀")) == {"v": "a\x7fb😀"}
    assert "\x7f" not in toml_text.string("\x7f")


@PROPERTY
@given(st.dictionaries(hostile_text, st.one_of(hostile_text, st.lists(hostile_text, max_size=3)), max_size=4))
def test_yaml_documents_read_back_exactly(document: dict[str, object]) -> None:
    assert yaml.safe_load(yaml_text.dump(document)) == (document or {})


@PROPERTY
@given(hostile_text)
def test_label_value_is_refused_or_reads_back_from_node_labels(value: str) -> None:
    if formats.label_value(value) is not None:
        return
    # kubelet --node-labels: key=value pairs separated by commas (cliflag.ConfigurationMap).
    argument = f"mlcluster.io/gpu-model={value},mlcluster.io/gpu-count=8"
    pairs = dict(item.split("=", 1) for item in argument.split(","))
    assert pairs["mlcluster.io/gpu-model"] == value and len(value) <= 63


@PROPERTY
@given(st.one_of(hostile_text, st.from_regex(r"[a-zA-Z0-9.-]{1,40}\.?", fullmatch=True)))
def test_dns_name_is_refused_or_is_the_host_of_a_url(value: str) -> None:
    if formats.dns_name(value) is not None:
        return
    assert urlsplit(f"https://{value}:6443/healthz").hostname == value.lower()
    assert value.isascii() and formats.dns_key(value) == formats.dns_key(value.upper() + ".")


def test_dns_names_that_differ_in_case_or_a_trailing_dot_are_one_host() -> None:
    assert formats.dns_key("GPU-1.Lab.Example.") == formats.dns_key("gpu-1.lab.example")
    assert formats.dns_name("10.20.0.21\n") is not None and formats.dns_name("gpu-1.lab.example\n") is not None


@PROPERTY
@given(st.one_of(hostile_text, st.from_regex(r"[a-z0-9./:@-]{1,40}", fullmatch=True)))
def test_image_reference_is_refused_or_one_yaml_scalar_of_reference_characters(value: str) -> None:
    if formats.image_reference(value) is not None:
        return
    assert re.fullmatch(r"[A-Za-z0-9._/:@-]+", value)
    assert yaml.safe_load(yaml_text.dump({"image": value})) == {"image": value}


def test_image_references() -> None:
    for good in ("nvcr.io/nvidia/pytorch:25.01-py3", "localhost:5000/a/b@sha256:" + "a" * 64, "busybox"):
        assert formats.image_reference(good) is None, good
    for bad in ("nvcr.io/nvidia/pytorch:25.01\n", "Upper/Case", "a b", "img:tag;rm -rf /", "img:"):
        assert formats.image_reference(bad) is not None, bad


@PROPERTY
@given(
    st.one_of(hostile_text.map(lambda s: "https://" + s), st.from_regex(r"https?://[a-z0-9.:/-]{1,30}", fullmatch=True))
)
def test_url_is_refused_or_a_toml_table_key_and_a_url_that_read_back(value: str) -> None:
    if formats.http_url(value) is not None:
        return
    assert tomllib.loads(toml_text.dumps({"host": {value: {"capabilities": ["pull"]}}})) == {
        "host": {value: {"capabilities": ["pull"]}}
    }
    assert urlsplit(value).geturl() == value and not re.search(r"\s", value)


@PROPERTY
@given(
    st.one_of(hostile_text.map(lambda s: "https://" + s), st.from_regex(r"https?://[a-z0-9.:/-]{1,30}", fullmatch=True))
)
def test_registry_url_is_refused_or_a_url_spegel_takes(value: str) -> None:
    """spegel v0.7.4 pkg/oci/filter.go validateRegistryURL: http or https, no path, query or user."""
    if formats.registry_url(value) is not None:
        return
    assert formats.http_url(value) is None
    parts = urlsplit(value)
    assert parts.scheme in ("http", "https") and parts.path == "" and not parts.query and parts.username is None


def test_storage_uris_user_names_and_header_values() -> None:
    assert formats.storage_uri("s3://bucket/model") is None and formats.storage_uri("hf://org/m") is None
    for bad in ("bucket/model", "s3://", "file:///etc/shadow", "s3://b/m\n", "s3://b m"):
        assert formats.storage_uri(bad) is not None, bad
    assert formats.user_name("ubuntu") is None and formats.user_name("svc_ml-1") is None
    for bad in ("root\n", "-oProxyCommand=x", "a b", "Admin", "x" * 40, ""):
        assert formats.user_name(bad) is not None, bad
    assert formats.header_value(Secret("Basic dXNlcjpwYXNz")) is None
    for bad in ('Basic a"b', "Basic a\\b", "Basic a\nb", "Basic a\tb", ""):
        assert formats.header_value(Secret(bad)) is not None, bad


@PROPERTY
@given(hostile_text)
def test_single_line_refuses_every_line_break(value: str) -> None:
    if formats.single_line(value) is None:
        assert len(value.splitlines()) <= 1 and "\t" not in value


def test_guards_are_listed_in_the_module_table() -> None:
    table = Path(formats.__file__).read_text().split('"""')[1]
    guards = [name for name in vars(formats) if callable(getattr(formats, name)) and not name.startswith("_")]
    for name in ("single_line", "systemd_path", "fstab_field", "mount_path", "label_value", "dns_name"):
        assert name in guards and f"`{name}`" in table, name
    for name in (
        "image_reference",
        "http_url",
        "registry_url",
        "storage_uri",
        "user_name",
        "ssh_host_key",
        "header_value",
    ):
        assert name in guards and f"`{name}`" in table, name
