#!/usr/bin/env bash
# Step: check the OS is one mlcluster supports and report its family; refuse a host that cannot run the
# Kubernetes minor (cgroup v1 from 1.35, too old a containerd) before any step changes it.
set -euo pipefail
: "${K8S_MINOR:?}" "${CGROUP_V2_REQUIRED:?}" "${CGROUP_V2_REASON:?}"
detect_os
ok "os $OS_ID $OS_VERSION_ID ($OS_FAMILY family)"
# An air-gapped site's bundle holds the Kubernetes packages of the families the stack names, and no others.
if [ -n "${AIR_GAP_FAMILIES:-}" ] && [[ " $AIR_GAP_FAMILIES " != *" $OS_FAMILY "* ]]; then
  die "mlcluster:airGap.osFamilies: this host is $OS_ID ($OS_FAMILY family), but the air-gap bundle holds packages for $AIR_GAP_FAMILIES only: add $OS_FAMILY, lock and fetch the bundle again"
fi
# cgroup v2 mounts cgroup2fs at /sys/fs/cgroup, cgroup v1 a tmpfs holding one mount per controller
# (kubernetes/website:content/en/docs/concepts/architecture/cgroups.md, "Identify the cgroup version").
cgroup_fs=$(stat -fc %T /sys/fs/cgroup/)
case $cgroup_fs in
  cgroup2fs) ok "cgroup v2" ;;
  tmpfs)
    [ "$CGROUP_V2_REQUIRED" = no ] ||
      die "this host runs cgroup v1; Kubernetes $K8S_MINOR needs cgroup v2 ($CGROUP_V2_REASON): boot it with the unified hierarchy (systemd.unified_cgroup_hierarchy=1, the default of Debian 11+, Ubuntu 21.10+ and RHEL 9+), then run up again"
    ok "cgroup v1 (Kubernetes $K8S_MINOR still runs on it; 1.35 and later do not)"
    ;;
  *) die "cannot tell the cgroup version: /sys/fs/cgroup is $cgroup_fs (expected cgroup2fs or tmpfs)" ;;
esac
if command -v containerd >/dev/null 2>&1; then
  require_containerd_minimum
else
  ok "containerd not installed yet (the containerd step installs it and checks its version)"
fi
mode=$(selinux_mode)
case $mode in
  Enforcing|Permissive|Disabled) ok "SELinux $mode (left as it is)" ;;
  *) die "SELinux reports mode '$mode': expected Enforcing, Permissive or Disabled" ;;
esac
firewall=$(firewall_in_use)
ok "host firewall: $firewall"
