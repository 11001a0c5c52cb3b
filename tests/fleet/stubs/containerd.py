"""containerd --version, as the installed release prints it (the version is a per-host setting)."""

from __future__ import annotations

from _stub import Host, fail, main


def containerd(host: Host, argv: list[str]) -> int:
    if argv[:1] not in (["--version"], ["-v"]):
        raise fail(f"containerd: the stub only answers --version, not {' '.join(argv)}")
    version = str(host.settings.get("containerdVersion", "1.7.24"))
    module = "github.com/containerd/containerd/v2" if version.startswith("2.") else "github.com/containerd/containerd"
    print(f"containerd {module} v{version} 88bf19b2105c8b17560993bee28a01ddc2f97182")
    return 0


if __name__ == "__main__":
    main({"containerd": containerd})
