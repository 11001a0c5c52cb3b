#!/usr/bin/env bash
# Step: GPU node preflight. Read-only: it looks at the host and changes nothing.
# Reports NVIDIA PCI devices, nouveau (loaded / blacklisted), a host driver (nvidia-smi), kernel headers,
# then ends with ONE line `mlcluster-gpu-preflight: {json}` that the program parses to pick operator values.
# Also runs standalone: `bash components/scripts/gpu-preflight.sh` (EXPECT_GPU defaults to auto).
set -euo pipefail
# EXPECT_GPU: true (node marked GPU: no NVIDIA GPU is an error), false (detection only), auto (report only).
EXPECT_GPU=${EXPECT_GPU:-auto}
NVIDIA_SMI_TIMEOUT=${NVIDIA_SMI_TIMEOUT:-60}
# Prefix for /sys, /proc, /etc, /lib and /run: empty on a node; a fake root in tests.
root=${PREFLIGHT_ROOT:-}

# As a node step, lib.sh is already part of the script; standalone, it sits next to this file.
if ! declare -F ok >/dev/null; then
  preflight_dir=$(dirname "${BASH_SOURCE[0]}")
  if [ -r "$preflight_dir/lib.sh" ]; then
    # shellcheck source=/dev/null
    . "$preflight_dir/lib.sh"
  else
    ok() { printf 'ok: %s\n' "$*"; }
    die() { printf 'error: %s\n' "$*" >&2; exit 1; }
  fi
fi
warn() { printf 'warning: %s\n' "$*"; preflight_warnings+=("$*"); }
preflight_warnings=()

# JSON string literal of $1 (quotes, backslashes and control characters escaped).
json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/\\t}
  s=${s//$'\r'/}
  s=${s//$'\n'/\\n}
  printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\037')"
}
# JSON array of string literals from the arguments.
json_list() {
  local out="" item
  for item in "$@"; do
    out+="${out:+,}$(json_str "$item")"
  done
  printf '[%s]' "$out"
}

case $EXPECT_GPU in
  true|false|auto) ;;
  *) die "EXPECT_GPU must be true, false or auto (got '$EXPECT_GPU')" ;;
esac
host=$(uname -n)
kernel=$(uname -r)

# --- NVIDIA PCI devices (vendor 10de); GPUs are display controllers (class 03xx) -------------------------
pci_source=none
gpu_names=()
other_nvidia=0
if command -v lspci >/dev/null 2>&1; then
  pci_source=lspci
  pci_lines=$(lspci -nn -d 10de:) || die "lspci failed: cannot list the NVIDIA PCI devices"
  # "17:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] (rev a1)"
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    if [[ $line =~ \[03[0-9a-f]{2}\]: ]]; then
      gpu_names+=("$(printf '%s' "${line#*]: }" | sed -E 's/ \[10de:[0-9a-f]{4}\]//; s/ \(rev [0-9a-f]+\)$//')")
    else
      other_nvidia=$((other_nvidia + 1))
    fi
  done <<<"$pci_lines"
elif [ -d "$root/sys/bus/pci/devices" ]; then
  # No pciutils: sysfs has vendor and class, not names.
  pci_source=sysfs
  for dev in "$root"/sys/bus/pci/devices/*; do
    if [ ! -r "$dev/vendor" ] || [ ! -r "$dev/class" ]; then continue; fi
    vendor=$(cat "$dev/vendor")
    [ "$vendor" = 0x10de ] || continue
    case $(cat "$dev/class") in
      0x03*) gpu_names+=("NVIDIA device $(cat "$dev/device") at ${dev##*/}") ;;
      *) other_nvidia=$((other_nvidia + 1)) ;;
    esac
  done
fi
gpu_count=${#gpu_names[@]}
if [ "$pci_source" = none ]; then
  warn "$host: neither lspci nor /sys/bus/pci: cannot list PCI devices"
elif [ "$gpu_count" -gt 0 ]; then
  ok "$gpu_count NVIDIA GPU(s) on the PCI bus ($pci_source): $(printf '%s; ' "${gpu_names[@]}" | sed 's/; $//')"
else
  ok "no NVIDIA GPU on the PCI bus ($pci_source)"
fi
[ "$pci_source" != sysfs ] || ok "lspci not installed: device names unknown (install pciutils for names)"
[ "$other_nvidia" -eq 0 ] || ok "$other_nvidia other NVIDIA PCI function(s) (bridges, NVSwitch, audio)"

# --- nouveau ---------------------------------------------------------------------------------------------
nouveau_loaded=false
if [ -d "$root/sys/module/nouveau" ]; then
  nouveau_loaded=true
elif [ -z "$root" ] && command -v lsmod >/dev/null 2>&1; then
  modules=$(lsmod) || die "lsmod failed: cannot tell whether nouveau is loaded"
  if grep -q '^nouveau ' <<<"$modules"; then nouveau_loaded=true; fi
fi
nouveau_blacklisted=false
for dir in "$root"/etc/modprobe.d "$root"/run/modprobe.d "$root"/usr/lib/modprobe.d "$root"/lib/modprobe.d; do
  if [ -d "$dir" ] && grep -rqsE '^[[:space:]]*blacklist[[:space:]]+nouveau([[:space:]]|$)' "$dir"; then
    nouveau_blacklisted=true
  fi
done
if [ -r "$root/proc/cmdline" ] && grep -qE '(^| )(modprobe\.blacklist=[^ ]*nouveau|rd\.driver\.blacklist=[^ ]*nouveau)' "$root/proc/cmdline"; then
  nouveau_blacklisted=true
fi
if [ "$nouveau_loaded" = true ]; then
  if [ "$gpu_count" -gt 0 ]; then
    warn "$host: nouveau is loaded: the NVIDIA driver cannot load until it is blacklisted and the host rebooted"
  else
    ok "nouveau loaded (no NVIDIA GPU)"
  fi
else
  ok "nouveau not loaded"
fi
if [ "$nouveau_blacklisted" = true ]; then
  ok "nouveau blacklisted"
else
  ok "nouveau not blacklisted"
fi

# --- host driver -------------------------------------------------------------------------------------------
driver_installed=false
driver_version=""
nvidia_module_loaded=false
[ -d "$root/sys/module/nvidia" ] && nvidia_module_loaded=true
gpu_rows=()
if command -v nvidia-smi >/dev/null 2>&1; then
  # "NVIDIA H200, 570.124.06, 143771 MiB", one line per GPU.
  if smi_out=$(timeout "$NVIDIA_SMI_TIMEOUT" nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2>&1); then
    while IFS= read -r line; do
      [ -n "$line" ] || continue
      gpu_rows+=("$line")
      if [ -z "$driver_version" ]; then
        driver_version=$(printf '%s' "$line" | awk -F', *' '{print $2}')
      fi
    done <<<"$smi_out"
  fi
  if [ -n "$driver_version" ]; then
    driver_installed=true
    ok "host driver $driver_version works (nvidia-smi: ${#gpu_rows[@]} GPU(s): $(printf '%s; ' "${gpu_rows[@]}" | sed 's/; $//'))"
  else
    warn "$host: nvidia-smi is installed but fails: $(printf '%s' "${smi_out:-no output}" | head -n 1)"
  fi
else
  ok "no host driver (nvidia-smi not found)"
fi
# The GPU Operator's driver container exposes its root here; that driver is the operator's, not the host's.
operator_driver=false
if [ -e "$root/run/nvidia/driver/usr/bin/nvidia-smi" ]; then
  operator_driver=true
  ok "GPU Operator driver container present (/run/nvidia/driver)"
fi
[ "$nvidia_module_loaded" = false ] || ok "nvidia kernel module loaded"

# --- kernel headers for the running kernel ---------------------------------------------------------------
kernel_headers=false
headers_source=""
if [ -d "$root/lib/modules/$kernel/build" ]; then
  kernel_headers=true
  headers_source="$root/lib/modules/$kernel/build"
elif [ -z "$root" ] && declare -F detect_os >/dev/null && (detect_os) >/dev/null 2>&1 && declare -F kernel_headers_package >/dev/null; then
  detect_os
  headers_package=$(kernel_headers_package "$kernel")
  headers_version=$(pkg_version "$headers_package")
  if [ -n "$headers_version" ]; then
    kernel_headers=true
    headers_source="package $headers_package"
  fi
fi
if [ "$kernel_headers" = true ]; then
  ok "kernel headers for $kernel present ($headers_source)"
else
  ok "no kernel headers for $kernel (an operator-managed driver needs them or precompiled driver images)"
fi

# --- RDMA ports (InfiniBand / RoCE NICs), for multi-node training over network.rdma -----------------------
# What ibv_devinfo reports, from sysfs (no rdma-core needed): state, rate and link layer of each port, and the
# network interfaces of its device (the names network.rdma.nics.ifNames selects).
rdma_ports=()
for port_dir in "$root"/sys/class/infiniband/*/ports/*; do
  [ -d "$port_dir" ] || continue
  device=${port_dir%/ports/*}
  device=${device##*/}
  port=${port_dir##*/}
  state=$(cat "$port_dir/state") || die "cannot read $port_dir/state"
  rate=$(cat "$port_dir/rate") || die "cannot read $port_dir/rate"
  link_layer=unknown
  [ ! -r "$port_dir/link_layer" ] || link_layer=$(cat "$port_dir/link_layer") || die "cannot read $port_dir/link_layer"
  netdevs=""
  for netdev in "$root"/sys/class/infiniband/"$device"/device/net/*; do
    [ -e "$netdev" ] && netdevs+="${netdevs:+,}${netdev##*/}"
  done
  row="$device port $port: ${state#*: }, $rate, $link_layer${netdevs:+, netdev $netdevs}"
  rdma_ports+=("$row")
  ok "rdma: $row"
  [ "${state#*: }" = ACTIVE ] || warn "RDMA port $device/$port is ${state#*: } (not ACTIVE): check its cable, switch port or subnet manager"
done
[ "${#rdma_ports[@]}" -gt 0 ] || ok "no RDMA device (/sys/class/infiniband is empty)"
peermem_loaded=false
[ ! -d "$root/sys/module/nvidia_peermem" ] || peermem_loaded=true

# --- verdict ---------------------------------------------------------------------------------------------
status=ok
if [ "$EXPECT_GPU" = true ] && [ "$gpu_count" -eq 0 ] && [ "$pci_source" != none ]; then
  status=error
  printf 'error: %s\n' "$host is marked as a GPU node but has no NVIDIA GPU on the PCI bus" >&2
elif [ "$EXPECT_GPU" = false ] && [ "$gpu_count" -gt 0 ]; then
  warn "$host has $gpu_count NVIDIA GPU(s) but is not marked as a GPU node (give its nodes[] entry a gpu section)"
fi

printf 'mlcluster-gpu-preflight: {"host":%s,"expectGpu":"%s","status":"%s","pciSource":"%s","gpuCount":%d,"gpus":%s,"otherNvidiaFunctions":%d,"nouveauLoaded":%s,"nouveauBlacklisted":%s,"driverInstalled":%s,"driverVersion":%s,"driverGpus":%s,"nvidiaModuleLoaded":%s,"operatorDriver":%s,"kernel":%s,"kernelHeaders":%s,"rdmaPorts":%s,"peermemLoaded":%s,"warnings":%s}\n' \
  "$(json_str "$host")" "$EXPECT_GPU" "$status" "$pci_source" "$gpu_count" "$(json_list "${gpu_names[@]}")" \
  "$other_nvidia" "$nouveau_loaded" "$nouveau_blacklisted" "$driver_installed" "$(json_str "$driver_version")" \
  "$(json_list "${gpu_rows[@]}")" "$nvidia_module_loaded" "$operator_driver" "$(json_str "$kernel")" \
  "$kernel_headers" "$(json_list "${rdma_ports[@]}")" "$peermem_loaded" "$(json_list "${preflight_warnings[@]}")"
[ "$status" = ok ] || exit 1
