#!/usr/bin/env bash
# Step: the kubelet refuses to run with swap on by default; turn it off now and after reboots.
set -euo pipefail
if [ -n "$(swapon --show --noheadings 2>/dev/null)" ]; then
  swapoff -a
  changed "swap turned off"
else
  ok "swap is off"
fi
if grep -Eq '^[^#].*[[:space:]]swap[[:space:]]' /etc/fstab 2>/dev/null; then
  sed -i -E 's/^([^#].*[[:space:]]swap[[:space:]].*)$/# disabled by mlcluster: \1/' /etc/fstab
  changed "swap entries commented out in /etc/fstab"
else
  ok "no active swap entry in /etc/fstab"
fi
