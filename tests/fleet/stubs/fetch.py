"""curl and gpg for the package repository key: no network, only the URLs mlcluster fetches."""

from __future__ import annotations

import sys

from _stub import Host, fail, main, sha256

ARMORED_KEY = (
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQENBGMHoXcBCADukGOEQyleViOgtkMVa7hKifP6POCTh+98xNW4TfHK/nBJN2sm\n"
    "-----END PGP PUBLIC KEY BLOCK-----\n"
)


def curl(host: Host, argv: list[str]) -> int:
    urls = [a for a in argv if a.startswith(("http://", "https://"))]
    if len(urls) != 1:
        raise fail("curl: the stub needs exactly one URL")
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
