#!/usr/bin/env bash
# Step: the kubelet refuses to run with swap on by default; turn it off now and after reboots.
set -euo pipefail
active=$(swapon --show --noheadings) || die "swapon --show failed: cannot tell whether swap is on"
if [ -n "$active" ]; then
  swapoff -a
  changed "swap turned off"
else
  ok "swap is off"
fi
entries=""
if [ -f /etc/fstab ]; then
  entries=$(lines_matching -E '^[^#].*[[:space:]]swap[[:space:]]' /etc/fstab)
fi
if [ -n "$entries" ]; then
  sed -i -E 's/^([^#].*[[:space:]]swap[[:space:]].*)$/# disabled by mlcluster: \1/' /etc/fstab
  changed "swap entries commented out in /etc/fstab"
else
  ok "no active swap entry in /etc/fstab"
fi
