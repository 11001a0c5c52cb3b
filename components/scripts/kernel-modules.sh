#!/usr/bin/env bash
# Step: overlay (container filesystems) and br_netfilter (bridged pod traffic through iptables).
set -euo pipefail
: "${KERNEL_MODULES:?}"
read -r -a modules <<<"$KERNEL_MODULES"
if write_if_changed /etc/modules-load.d/mlcluster-k8s.conf "$(printf '%s\n' "${modules[@]}")"; then
  changed "/etc/modules-load.d/mlcluster-k8s.conf written"
else
  ok "/etc/modules-load.d/mlcluster-k8s.conf up to date"
fi
for module in "${modules[@]}"; do
  if [ -d "/sys/module/$module" ]; then
    ok "module $module loaded"
  else
    modprobe "$module"
    changed "module $module loaded"
  fi
done
