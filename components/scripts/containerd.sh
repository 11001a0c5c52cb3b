#!/usr/bin/env bash
# Step: install containerd. Its config (version and keys for the installed release) is the kubelet-tuning
# step's, which restarts containerd only when that config changed and only in its batch of nodes.
set -euo pipefail
: "${DOCKER_REPO_RPM:?}"
detect_os
if command -v containerd >/dev/null 2>&1; then
  ok "containerd installed"
else
  case $OS_FAMILY in
    deb)
      pkg_refresh
      pkg_install containerd
      ;;
    rpm)
      # RHEL-family base repositories carry no containerd; Docker's repository ships containerd.io.
      write_if_changed /etc/yum.repos.d/docker-ce.repo "$DOCKER_REPO_RPM" || true
      pkg_install containerd.io
      ;;
  esac
  changed "containerd installed"
fi

# Drop-ins (e.g. the NVIDIA container toolkit's) live here and are imported, so rewriting our file keeps them.
if [ -d /etc/containerd/conf.d ]; then
  ok "/etc/containerd/conf.d exists"
else
  mkdir -p /etc/containerd/conf.d
  changed "/etc/containerd/conf.d created"
fi

require_containerd_minimum
service_enable_now containerd
