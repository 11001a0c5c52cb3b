"""lspci and nvidia-smi, as a host with the GPUs in its `gpu` setting answers them.

`gpu` setting: {"lspci": [lines of `lspci -nn -d 10de:`], "nvidiaSmi": [lines of the query]}. The launchers
are put on a host's PATH by tests/fleet/gpu.py (nvidia-smi only on hosts with a driver).
"""

from __future__ import annotations

from _stub import Host, fail, main

NVIDIA_SMI_QUERY = ["--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]


def lspci(host: Host, argv: list[str]) -> int:
    if argv != ["-nn", "-d", "10de:"]:
        raise fail(f"lspci: the stub only answers -nn -d 10de:, not {' '.join(argv)}")
    for line in (host.settings.get("gpu") or {}).get("lspci", []):
        print(line)
    return 0


def nvidia_smi(host: Host, argv: list[str]) -> int:
    if argv != NVIDIA_SMI_QUERY:
        raise fail(f"nvidia-smi: the stub only answers {' '.join(NVIDIA_SMI_QUERY)}, not {' '.join(argv)}")
    for line in (host.settings.get("gpu") or {}).get("nvidiaSmi", []):
        print(line)
    return 0


if __name__ == "__main__":
    main({"lspci": lspci, "nvidia-smi": nvidia_smi})
