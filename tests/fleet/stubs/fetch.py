"""curl and gpg: nothing outside the fleet answers. The package repository key's URL answers with a key (the one
URL outside the site mlcluster fetches); a URL on the fleet's own network (198.18.0.0/15, loopback) is fetched by the
test machine's real curl from inside the host's network namespace, so what answers is a real server on a fleet host
(an air-gap seed's registry and file server)."""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from urllib.parse import urlsplit

from _stub import Host, fail, main, sha256

ARMORED_KEY = (
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQENBGMHoXcBCADukGOEQyleViOgtkMVa7hKifP6POCTh+98xNW4TfHK/nBJN2sm\n"
    "-----END PGP PUBLIC KEY BLOCK-----\n"
)


REAL_CURL = "/usr/bin/curl"
FLEET_NETWORKS = (ipaddress.ip_network("198.18.0.0/15"), ipaddress.ip_network("127.0.0.0/8"))


def _inside_the_fleet(url: str) -> bool:
    try:
        address = ipaddress.ip_address(urlsplit(url).hostname or "")
    except ValueError:
        return False  # a name: the fleet has no DNS, so a name is outside it
    return any(address in network for network in FLEET_NETWORKS)


def curl(host: Host, argv: list[str]) -> int:
    urls = [a for a in argv if a.startswith(("http://", "https://"))]
    if len(urls) != 1:
        raise fail("curl: the stub needs exactly one URL")
    if _inside_the_fleet(urls[0]):
        host.record_extra["real"] = True
        return subprocess.run([REAL_CURL, *argv], check=False).returncode
    if host.settings.get("offline"):
        raise fail(f"curl: (6) Could not resolve host: {urlsplit(urls[0]).hostname}", 6)
    if not urls[0].startswith("https://pkgs.k8s.io/core:/stable:/v") or not urls[0].endswith("/deb/Release.key"):
        raise fail(f"curl: (6) Could not resolve host: {urls[0].split('/')[2]}", 6)
    sys.stdout.write(ARMORED_KEY)
    return 0


def gpg(host: Host, argv: list[str]) -> int:
    if "--dearmor" not in argv or "-o" not in argv:
        raise fail(f"gpg: the stub only supports --dearmor -o FILE, not {' '.join(argv)}")
    data = sys.stdin.read()
    if "BEGIN PGP PUBLIC KEY BLOCK" not in data:
        raise fail("gpg: no valid OpenPGP data found.", 2)
    target = argv[argv.index("-o") + 1]
    with open(target, "wb") as out:
        out.write(b"\x99\x01\x0d" + sha256(data).encode())
    host.record_extra["stdinSha256"] = sha256(data)
    return 0


if __name__ == "__main__":
    main({"curl": curl, "gpg": gpg})
