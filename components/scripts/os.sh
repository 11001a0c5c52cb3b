#!/usr/bin/env bash
# Step: check the OS is one mlcluster supports and report its family.
set -euo pipefail
detect_os
ok "os $OS_ID $OS_VERSION_ID ($OS_FAMILY family)"
mode=$(selinux_mode)
case $mode in
  Enforcing|Permissive|Disabled) ok "SELinux $mode (left as it is)" ;;
  *) die "SELinux reports mode '$mode': expected Enforcing, Permissive or Disabled" ;;
esac
firewall=$(firewall_in_use)
ok "host firewall: $firewall"
