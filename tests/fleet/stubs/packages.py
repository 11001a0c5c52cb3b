"""apt-get, apt-cache, apt-mark, dpkg-query, dnf, rpm: a package database per host and the repositories it sees.

Packages come only from repositories the host has configured (the Kubernetes repository file and key
for DEB, the Docker and Kubernetes `.repo` files for RPM), apt needs `update` after a source changed,
held packages and dnf excludes behave as upstream, and installing a package puts its binaries on PATH
and its systemd unit in place.

An air-gap seed's flat repository (`deb [trusted=yes] http://<seed>/... ./`, sources.list(5): `trusted=yes` takes
the repository without a signature) is read for real over the fleet's network: `update` fetches its Packages index
(apt-ftparchive's, on the seed), `install` downloads each package's file and refuses one whose size differs from the
index ("File has unexpected size": methods/basehttp.cc, apt 2.6) or, of the right size, whose SHA256 differs ("Hash Sum
mismatch": apt-pkg/acquire-item.cc), `--download-only` stops after the download
(apt-get(8)), `-o Dir::Cache::Archives=DIR` is where the files go and a file already there with the index's hash is
used as it is (apt.conf(5), apt-get(8) "autoclean"). A package's `Depends` found in the index come with it.

A yum repository on the seed (a `.repo` whose baseurl is on the fleet's network) is read for real too: dnf reads
repodata/repomd.xml and the primary metadata it names (createrepo_c's, on the seed), refuses a package whose sha256
differs from the metadata's checksum (librepo: "checksum doesn't match"), and with gpgcheck=1 imports the repository's
gpgkey and checks the package's signature with the real rpmkeys (dnf/base.py _sig_check_pkg: "Public key for %s is
not installed. Failing package is: %s", then "Error: GPG check FAILED"; the words held to the real dnf 4.14). A
package's `Requires` found in the metadata come with it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from _stub import Host, StubExit, fail, main, sha256

if TYPE_CHECKING:
    from typing import Any

K8S_PACKAGES = ("kubeadm", "kubelet", "kubectl", "cri-tools", "kubernetes-cni")
BINARIES = {
    "containerd": ["containerd"],
    "containerd.io": ["containerd"],
    # cri-tools (crictl) is a dependency of the kubeadm package.
    "kubeadm": ["kubeadm", "crictl"],
    "kubectl": ["kubectl"],
}
UNITS = {"containerd": "containerd", "containerd.io": "containerd", "kubelet": "kubelet"}
REAL_PACKAGES = {"keepalived": ("1:2.2.7-1+b2", "2.2.8-4.el9"), "haproxy": ("2.6.12-1+deb12u4", "2.4.22-4.el9")}
"""In every distribution's base repositories (DEB version, RPM version); their binaries are the real ones
(stubs/daemons.py)."""
DEB_K8S_SOURCE = "/etc/apt/sources.list.d/kubernetes.list"
DEB_K8S_KEYRING = "/etc/apt/keyrings/kubernetes-apt-keyring.gpg"
RPM_K8S_REPO = "/etc/yum.repos.d/kubernetes.repo"
RPM_DOCKER_REPO = "/etc/yum.repos.d/docker-ce.repo"


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def _k8s_minor(text: str | None) -> str | None:
    match = re.search(r"pkgs\.k8s\.io/core:/stable:/v(\d+\.\d+)/(deb|rpm)/", text or "")
    return match.group(1) if match else None


def _newest_patch(minor: str) -> int:
    """The newest patch of `minor` that was released: the support calendar's (components/config/support.py, read
    from kubernetes.io/releases), 5 for a minor it does not hold."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from components.config.support import KUBERNETES_MINORS

    major, minor_number = (int(part) for part in minor.split("."))
    known = [m.newest_patch for m in KUBERNETES_MINORS if m.minor == (major, minor_number)]
    return int(known[0].rsplit(".", 1)[1]) if known else 5


def _k8s_versions(host: Host, name: str, minor: str) -> list[str]:
    """What the repository of `minor` offers of package `name`: each released patch (x.y.0 to the newest), less the
    host's `repoLacks` (["kubelet-1.35.0", ...]: a mirror or family whose repository misses a release)."""
    lacks = set(host.settings.get("repoLacks") or [])
    released = (f"{minor}.{patch}" for patch in range(_newest_patch(minor) + 1))
    return [v for v in released if f"{name}-{v}" not in lacks]


SEED_SOURCE = re.compile(r"^deb \[trusted=yes\] (http://\S+/) \./$", re.MULTILINE)
ARCHIVES = "/var/cache/apt/archives"


def _seed_base(text: str | None) -> str | None:
    match = SEED_SOURCE.search(text or "")
    return match.group(1) if match else None


def _fetch(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return bytes(response.read())
    except (urllib.error.URLError, OSError) as error:
        raise fail(f"E: Failed to fetch {url}  {error}", 100) from None


def _index(text: str) -> dict[str, list[dict[str, str]]]:
    """A Packages file (deb-control stanzas) -> name -> its entries."""
    packages: dict[str, list[dict[str, str]]] = {}
    for stanza in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
        if "Package" in fields:
            packages.setdefault(fields["Package"], []).append(fields)
    return packages


def _sources_hash() -> str:
    return sha256(f"{_read(DEB_K8S_SOURCE)}|{os.path.exists(DEB_K8S_KEYRING)}")


def _deb_available(host: Host, state: dict[str, Any], name: str) -> list[str]:
    if name in REAL_PACKAGES:
        return [REAL_PACKAGES[name][0]]
    if name == "containerd":
        return [f"{host.settings.get('containerdVersion', '1.7.24')}~ds1-1"]
    if name in K8S_PACKAGES and _seed_base(_read(DEB_K8S_SOURCE)):
        if state.get("aptUpdatedSources") != _sources_hash():
            return []
        return [entry["Version"] for entry in state.get("seedIndex", {}).get(name, [])]
    if name in K8S_PACKAGES:
        minor = _k8s_minor(_read(DEB_K8S_SOURCE))
        # apt sees a source only after `apt-get update` read it (and its signing key).
        if minor is None or state.get("aptUpdatedSources") != _sources_hash() or not os.path.exists(DEB_K8S_KEYRING):
            return []
        return [f"{v}-1.1" for v in _k8s_versions(host, name, minor)]
    return []


def _installed(host: Host, state: dict[str, Any], name: str, version: str) -> None:
    state.setdefault("packages", {})[name] = version
    for tool in BINARIES.get(name, []):
        host.install_binary(tool)
    if name in REAL_PACKAGES:
        host.install_real_binary(name)
        if name not in state.setdefault("units", []):
            state["units"].append(name)
    unit = UNITS.get(name)
    if unit:
        units = state.setdefault("units", [])
        if unit not in units:
            units.append(unit)


def _options(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """(the words, the `-o Key=Value` options) of an apt-get command line."""
    words: list[str] = []
    options: dict[str, str] = {}
    skip = False
    for index, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "-o":
            key, _, value = argv[index + 1].partition("=")
            options[key] = value
            skip = True
        elif not arg.startswith("-"):
            words.append(arg)
    return words, options


def _seed_download(base: str, entry: dict[str, str], archives: str) -> None:
    """The package's file into `archives`, as apt fetches it: its SHA256 must be the index's."""
    name = os.path.basename(entry["Filename"])
    target = Path(archives) / name
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == entry["SHA256"]:
        return
    url = base + entry["Filename"].removeprefix("./")
    data = _fetch(url)
    # apt's http method compares the response's length with the index's Size before any hash is read (apt 2.6
    # methods/basehttp.cc, BaseHttpMethod::Loop: "File has unexpected size (%llu != %llu). Mirror sync in
    # progress?"); only a file of the right size reaches the hash check.
    if "Size" in entry and len(data) != int(entry["Size"]):
        raise fail(
            f"E: Failed to fetch {url}  File has unexpected size ({len(data)} != {entry['Size']}). "
            "Mirror sync in progress?",
            100,
        )
    if hashlib.sha256(data).hexdigest() != entry["SHA256"]:
        raise fail(f"E: Failed to fetch {url}  Hash Sum mismatch", 100)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    print(f"Get: {url} {entry['Package']} {entry['Version']}")


def _with_seed_dependencies(state: dict[str, Any], plan: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The plan and the Depends of each planned package that the seed's index holds (once each)."""
    index = state.get("seedIndex", {})
    names = {name for name, _ in plan}
    for name, version in list(plan):
        entry = next((e for e in index.get(name, []) if e["Version"] == version), None)
        for dependency in (entry or {}).get("Depends", "").split(","):
            depends = dependency.strip().split(" ")[0]
            if depends in index and depends not in names:
                names.add(depends)
                plan.append((depends, index[depends][-1]["Version"]))
    return plan


def apt_get(host: Host, argv: list[str]) -> int:
    words, options = _options(argv)
    with host.state() as state:
        if words[:1] == ["update"]:
            base = _seed_base(_read(DEB_K8S_SOURCE))
            if base is None and host.settings.get("offline") and _k8s_minor(_read(DEB_K8S_SOURCE)):
                # An air-gapped host reaches nothing outside the fleet (the OS's own sources are the site's mirror).
                raise fail("E: Failed to fetch https://pkgs.k8s.io/  Could not resolve 'pkgs.k8s.io'", 100)
            if base is not None:
                state["seedIndex"] = _index(_fetch(base + "Packages").decode())
                print(f"Get:1 {base} ./ Packages")
            state["aptUpdatedSources"] = _sources_hash()
            host.record_extra["sourcesSha256"] = state["aptUpdatedSources"]
            print("Reading package lists...")
            return 0
        if words[:1] != ["install"]:
            raise fail(f"apt-get: unsupported by the stub: {' '.join(argv)}")
        if "-y" not in argv:
            raise fail("apt-get install without -y would wait for an answer")
        held = set(state.get("held", []))
        packages = state.setdefault("packages", {})
        plan: list[tuple[str, str]] = []
        for spec in words[1:]:
            name, _, wanted = spec.partition("=")
            available = _deb_available(host, state, name)
            if not available:
                raise fail(f"E: Unable to locate package {name}", 100)
            matching = [v for v in available if not wanted or fnmatch.fnmatchcase(v, wanted)]
            if not matching:
                raise fail(f"E: Version '{wanted}' for '{name}' was not found", 100)
            version = matching[-1]
            if name in held and packages.get(name) != version and "--allow-change-held-packages" not in argv:
                raise fail("E: Held packages were changed and -y was used without --allow-change-held-packages.", 100)
            plan.append((name, version))
        base = _seed_base(_read(DEB_K8S_SOURCE))
        if base is not None:
            plan = _with_seed_dependencies(state, plan)
            for name, version in plan:
                entry = next((e for e in state.get("seedIndex", {}).get(name, []) if e["Version"] == version), None)
                if entry is not None:
                    _seed_download(base, entry, options.get("Dir::Cache::Archives", ARCHIVES))
        if "--download-only" in argv or "-d" in argv:
            print("Download complete and in download only mode")
            return 0
        for name, version in plan:
            _installed(host, state, name, version)
            if name in UNITS:
                # Debian packages enable and start their service in postinst.
                service = state.setdefault("services", {}).setdefault(
                    UNITS[name], {"enabled": False, "active": False, "starts": 0, "restarts": 0}
                )
                service.update(enabled=True, active=True)
                service["starts"] += 1
            if name in REAL_PACKAGES:
                _deb_postinst_real(host, state, name)
            print(f"Setting up {name} ({version}) ...")
    return 0


def _deb_postinst_real(host: Host, state: dict[str, Any], name: str) -> None:
    """Debian enables both services; haproxy starts with the package's default configuration, keepalived not
    (its unit needs a non-empty keepalived.conf). A start that fails leaves the install done (`|| true`)."""
    import daemons

    service = state.setdefault("services", {}).setdefault(
        name, {"enabled": False, "active": False, "starts": 0, "restarts": 0}
    )
    service["enabled"] = True
    if name == "haproxy":
        try:
            daemons.start(host, name)
            service["starts"] += 1
        except StubExit:
            pass
    service["active"] = daemons.alive(name)


def apt_cache(host: Host, argv: list[str]) -> int:
    words = [a for a in argv if not a.startswith("-")]
    if words[:1] != ["madison"]:
        raise fail(f"apt-cache: unsupported by the stub: {' '.join(argv)}")
    with host.state() as state:
        for name in words[1:]:
            for version in reversed(_deb_available(host, state, name)):
                minor = ".".join(version.split(".")[:2])
                print(f"   {name} | {version} | https://pkgs.k8s.io/core:/stable:/v{minor}/deb  Packages")
    return 0


def apt_mark(host: Host, argv: list[str]) -> int:
    action, names = argv[0], argv[1:]
    with host.state() as state:
        held = state.setdefault("held", [])
        packages = state.get("packages", {})
        if action == "showhold":
            print("\n".join(sorted(held)))
            return 0
        for name in names:
            if name not in packages and not _deb_available(host, state, name):
                raise fail(f"E: Unable to locate package {name}", 100)
            if name not in packages:
                print(f"{name} was already not on hold.")
                continue
            if action == "hold" and name not in held:
                held.append(name)
                print(f"{name} set on hold.")
            elif action == "unhold" and name in held:
                held.remove(name)
                print(f"Canceled hold on {name}.")
    return 0


def dpkg_query(host: Host, argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")]
    fmt = next((a.split("=", 1)[1] for a in argv if a.startswith("-f=") or a.startswith("--showformat=")), None)
    with host.state() as state:
        packages = state.get("packages", {})
    rc = 0
    for name in names:
        if name not in packages:
            print(f"dpkg-query: no packages found matching {name}", file=sys.stderr)
            rc = 1
            continue
        text = (fmt or "${Package}\t${Version}\n").replace("${Version}", packages[name]).replace("${Package}", name)
        text = text.replace("${Status}", "install ok installed")
        sys.stdout.write(text)
    return rc


_REPO_NS = {"repo": "http://linux.duke.edu/metadata/repo"}
_COMMON_NS = {"common": "http://linux.duke.edu/metadata/common", "rpm": "http://linux.duke.edu/metadata/rpm"}


def _repo_field(text: str | None, key: str) -> str | None:
    match = re.search(rf"^{key}\s*=\s*(\S+)\s*$", text or "", re.MULTILINE)
    return match.group(1) if match else None


def _seed_repo(text: str | None) -> str | None:
    """The repository's baseurl when it is on the fleet's network (an air-gap seed), with a trailing slash."""
    from fetch import _inside_the_fleet

    base = _repo_field(text, "baseurl")
    return base.rstrip("/") + "/" if base and _inside_the_fleet(base) else None


def _rpm_index(base: str) -> dict[str, list[dict[str, Any]]]:
    """createrepo_c's primary metadata of the repository at `base`: name -> entries (version, release, location,
    sha256, requires)."""
    import gzip
    from xml.etree import ElementTree

    repomd = ElementTree.fromstring(_fetch(base + "repodata/repomd.xml"))
    location = repomd.find("repo:data[@type='primary']/repo:location", _REPO_NS)
    if location is None:
        raise fail(f"Error: Failed to download metadata for repo: no primary metadata at {base}", 1)
    primary = ElementTree.fromstring(gzip.decompress(_fetch(base + location.attrib["href"])))
    index: dict[str, list[dict[str, Any]]] = {}
    for package in primary.findall("common:package", _COMMON_NS):
        version = package.find("common:version", _COMMON_NS)
        checksum = package.find("common:checksum", _COMMON_NS)
        href = package.find("common:location", _COMMON_NS)
        name = package.find("common:name", _COMMON_NS)
        arch = package.find("common:arch", _COMMON_NS)
        if version is None or checksum is None or href is None or name is None or name.text is None:
            continue
        requires = [
            entry.attrib["name"] for entry in package.findall("common:format/rpm:requires/rpm:entry", _COMMON_NS)
        ]
        index.setdefault(name.text, []).append(
            {
                "version": version.attrib["ver"],
                "release": version.attrib["rel"],
                "arch": arch.text if arch is not None and arch.text else "noarch",
                "location": href.attrib["href"],
                "sha256": checksum.text,
                "requires": requires,
            }
        )
    return index


def _rpm_fetched(base: str, entry: dict[str, Any], gpgkey: str | None, name: str) -> None:
    """The package's file downloaded and checked as dnf does: its checksum, then (gpgcheck=1) its signature with the
    real rpmkeys against the repository's key. The words are dnf 4.14's (librepo's "[MIRROR] …: Downloading
    successful, but checksum doesn't match", dnf/base.py "Error downloading packages" and _sig_check_pkg's "Public key
    for %s is not installed. Failing package is: %s", "GPG check FAILED"), held to the real dnf by
    tests/fleet/test_airgap_contracts.py."""
    import subprocess
    import tempfile

    data = _fetch(base + entry["location"])
    file = os.path.basename(entry["location"])
    nevra = f"{name}-{entry['version']}-{entry['release']}.{entry['arch']}"
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise fail(
            f"[MIRROR] {file}: Downloading successful, but checksum doesn't match."
            f" Calculated: {hashlib.sha256(data).hexdigest()}(sha256)  Expected: {entry['sha256']}(sha256)\n"
            f"[FAILED] {file}: No more mirrors to try - All mirrors were already tried without success\n"
            f"Error: Error downloading packages:\n  {nevra}: Cannot download, all mirrors were already tried without"
            " success",
            1,
        )
    if gpgkey is None:
        return
    with tempfile.TemporaryDirectory(prefix="mlcluster-dnf-") as work:
        (Path(work) / file).write_bytes(data)
        (Path(work) / "key.asc").write_bytes(_fetch(gpgkey))
        database = Path(work) / "rpmdb"
        database.mkdir()
        rpmkeys = ["/usr/bin/rpmkeys", "--dbpath", str(database)]
        subprocess.run([*rpmkeys, "--import", str(Path(work) / "key.asc")], check=True, capture_output=True)
        checked = subprocess.run(
            [*rpmkeys, "--checksig", str(Path(work) / file)], check=False, capture_output=True, text=True
        )
    if checked.returncode != 0 or "signatures OK" not in checked.stdout:
        raise fail(
            f"Public key for {file} is not installed. Failing package is: {nevra}\n GPG Keys are configured as:"
            f" {gpgkey}\nError: GPG check FAILED",
            1,
        )


def _repo_excludes(text: str) -> list[str]:
    match = re.search(r"^exclude\s*=\s*(.*)$", text, re.MULTILINE)
    return match.group(1).split() if match else []


def dnf(host: Host, argv: list[str]) -> int:
    words = [a for a in argv if not a.startswith("-")]
    if words[:1] == ["makecache"]:
        return 0
    if words[:1] == ["list"]:
        return _dnf_list(host, argv, words[1:])
    if words[:1] != ["install"]:
        raise fail(f"dnf: unsupported by the stub: {' '.join(argv)}")
    if "-y" not in argv:
        raise fail("dnf install without -y would wait for an answer")
    disabled = {a.split("=", 1)[1] for a in argv if a.startswith("--disableexcludes=")}
    k8s_repo = _read(RPM_K8S_REPO)
    if _seed_repo(k8s_repo) is not None or _seed_repo(_read(RPM_DOCKER_REPO)) is not None:
        return _dnf_install_from_seed(host, words[1:], disabled)
    if host.settings.get("offline") and (k8s_repo is not None or _read(RPM_DOCKER_REPO) is not None):
        # An air-gapped host reaches neither the Kubernetes project's repository nor Docker's.
        names = {re.sub(r"-\d.*$", "", word) for word in words[1:]}
        repo = "kubernetes" if k8s_repo is not None and names & set(K8S_PACKAGES) else "docker-ce-stable"
        raise fail(f"Error: Failed to download metadata for repo '{repo}': Cannot download repomd.xml", 1)
    with host.state() as state:
        plan = []
        for spec in words[1:]:
            match = re.fullmatch(r"([a-z.-]+?)(?:-(\d[\w.]*))?", spec)
            if not match:
                raise fail(f"Error: Unable to find a match: {spec}")
            name, wanted = match.group(1), match.group(2)
            if name == "containerd.io" and _read(RPM_DOCKER_REPO) is not None:
                available = [str(host.settings.get("containerdVersion", "1.7.24"))]
            elif name in REAL_PACKAGES:
                available = [REAL_PACKAGES[name][1]]
            elif name in K8S_PACKAGES and _k8s_minor(k8s_repo):
                excluded = name in _repo_excludes(k8s_repo or "") and not disabled & {"kubernetes", "all"}
                available = [] if excluded else _k8s_versions(host, name, _k8s_minor(k8s_repo) or "")
            else:
                available = []
            matching = [v for v in available if wanted is None or v == wanted]
            if not matching:
                raise fail(f"Error: Unable to find a match: {spec}")
            plan.append((name, matching[-1]))
        for name, version in plan:
            _installed(host, state, name, version)
    return 0


def _dnf_install_from_seed(host: Host, specs: list[str], disabled: set[str]) -> int:
    """`dnf install` where the repositories are the air-gap seed's: each package resolved in its repository's real
    metadata (the Kubernetes repository's excludes apply), downloaded and checked, its Requires with it."""
    repos = {}
    for repo_id, path in (("kubernetes", RPM_K8S_REPO), ("docker-ce-stable", RPM_DOCKER_REPO)):
        text = _read(path)
        base = _seed_repo(text)
        if base is not None:
            gpgcheck = _repo_field(text, "gpgcheck") == "1"
            repos[repo_id] = (base, _rpm_index(base), _repo_field(text, "gpgkey") if gpgcheck else None, text or "")
    plan: list[tuple[str, dict[str, Any], str]] = []
    wanted = list(specs)
    while wanted:
        spec = wanted.pop(0)
        match = re.fullmatch(r"([a-z.-]+?)(?:-(\d[\w.]*))?", spec)
        if not match:
            raise fail(f"Error: Unable to find a match: {spec}")
        name, version = match.group(1), match.group(2)
        if any(name == planned for planned, _, _ in plan):
            continue
        found = None
        for repo_id, (_, index, _, text) in repos.items():
            excluded = name in _repo_excludes(text) and not disabled & {repo_id, "all"}
            entries = [] if excluded else [e for e in index.get(name, []) if version in (None, e["version"])]
            if entries:
                found = (entries[-1], repo_id)
                break
        if found is None:
            if spec in specs:
                raise fail(f"Error: Unable to find a match: {spec}")
            continue  # a Requires the OS repositories give
        plan.append((name, found[0], found[1]))
        wanted += [r for r in found[0]["requires"] if not r.startswith(("/", "rpmlib("))]
    for name, entry, repo_id in plan:
        base, _, gpgkey, _ = repos[repo_id]
        _rpm_fetched(base, entry, gpgkey, name)
    with host.state() as state:
        for name, entry, _ in plan:
            _installed(host, state, name, entry["version"])
            print(f"Installed: {name}-{entry['version']}-{entry['release']}")
    return 0


def _dnf_list(host: Host, argv: list[str], specs: list[str]) -> int:
    """`dnf list --showduplicates NAME-VERSION`: 0 when a configured repository offers it (excludes apply)."""
    disabled = {a.split("=", 1)[1] for a in argv if a.startswith("--disableexcludes=")}
    k8s_repo = _read(RPM_K8S_REPO) or ""
    seed = _seed_repo(k8s_repo)
    if seed is not None:
        index = _rpm_index(seed)
        listed = False
        for spec in specs:
            match = re.fullmatch(r"([a-z.-]+?)(?:-(\d[\w.]*))?", spec)
            if not match or (match.group(1) in _repo_excludes(k8s_repo) and not disabled & {"kubernetes", "all"}):
                continue
            for entry in index.get(match.group(1), []):
                if match.group(2) in (None, entry["version"]):
                    print(f"{match.group(1)}.x86_64  {entry['version']}-{entry['release']}  kubernetes")
                    listed = True
        if not listed:
            raise fail("Error: No matching Packages to list")
        return 0
    minor = _k8s_minor(k8s_repo)
    found = False
    for spec in specs:
        match = re.fullmatch(r"([a-z.-]+?)(?:-(\d[\w.]*))?", spec)
        if not match or match.group(1) not in K8S_PACKAGES or minor is None:
            continue
        if match.group(1) in _repo_excludes(k8s_repo) and not disabled & {"kubernetes", "all"}:
            continue
        for version in _k8s_versions(host, match.group(1), minor):
            if match.group(2) in (None, version):
                print(f"{match.group(1)}.x86_64  {version}-150500.1.1  kubernetes")
                found = True
    if not found:
        raise fail("Error: No matching Packages to list")
    return 0


def rpm(host: Host, argv: list[str]) -> int:
    if "-q" not in argv:
        raise fail(f"rpm: unsupported by the stub: {' '.join(argv)}")
    names = [a for a in argv if not a.startswith("-") and not a.startswith("%")]
    fmt = argv[argv.index("--qf") + 1] if "--qf" in argv else "%{NAME}-%{VERSION}\n"
    names = [n for n in names if n != fmt]
    with host.state() as state:
        packages = state.get("packages", {})
    rc = 0
    for name in names:
        if name not in packages:
            print(f"package {name} is not installed")
            rc = 1
            continue
        sys.stdout.write(fmt.replace("%{VERSION}", packages[name]).replace("%{NAME}", name))
    return rc


if __name__ == "__main__":
    main(
        {
            "apt-get": apt_get,
            "apt-cache": apt_cache,
            "apt-mark": apt_mark,
            "dpkg-query": dpkg_query,
            "dnf": dnf,
            "rpm": rpm,
        }
    )
