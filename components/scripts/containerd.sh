#!/usr/bin/env bash
# Step: install containerd and write its config, in the config version the installed release reads.
set -euo pipefail
: "${CONTAINERD_CONFIG_V2:?}" "${CONTAINERD_CONFIG_V3:?}" "${DOCKER_REPO_RPM:?}"
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

# "containerd github.com/containerd/containerd v1.7.24 <commit>" (distro builds drop the leading v).
version=$(containerd --version | awk '{print $3}')
version=${version#v}
major=${version%%.*}
if [ "$major" -ge 2 ]; then
  config=$CONTAINERD_CONFIG_V3
  config_version=3
else
  config=$CONTAINERD_CONFIG_V2
  config_version=2
fi

# Drop-ins (e.g. the NVIDIA container toolkit's) live here and are imported, so rewriting our file keeps them.
if [ -d /etc/containerd/conf.d ]; then
  ok "/etc/containerd/conf.d exists"
else
  mkdir -p /etc/containerd/conf.d
  changed "/etc/containerd/conf.d created"
fi

if write_if_changed /etc/containerd/config.toml "$config"; then
  systemctl restart containerd
  changed "/etc/containerd/config.toml written (version $config_version for containerd $version); containerd restarted"
else
  ok "/etc/containerd/config.toml up to date (version $config_version for containerd $version)"
fi
service_enable_now containerd
