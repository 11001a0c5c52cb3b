#!/usr/bin/env bash
# Step: kubeadm, kubelet and kubectl from the per-minor Kubernetes package repository, pinned and held.
set -euo pipefail
: "${K8S_VERSION:?}" "${K8S_MINOR:?}" "${K8S_REPO_DEB:?}" "${K8S_REPO_RPM:?}" "${K8S_REPO_KEY_URL:?}"
packages=(kubeadm kubelet kubectl)
detect_os

at_version() {
  local installed
  for pkg in "${packages[@]}"; do
    installed=$(pkg_version "$pkg")
    case $installed in
      "$K8S_VERSION" | "$K8S_VERSION"-*) ;;
      *) return 1 ;;
    esac
  done
}

case $OS_FAMILY in
  deb)
    keyring=/etc/apt/keyrings/kubernetes-apt-keyring.gpg
    if [ -s "$keyring" ]; then
      ok "repository key present"
    else
      mkdir -p /etc/apt/keyrings
      run_long curl -fsSL "$K8S_REPO_KEY_URL" | gpg --dearmor --yes -o "$keyring"
      changed "repository key installed"
    fi
    if write_if_changed /etc/apt/sources.list.d/kubernetes.list "$K8S_REPO_DEB"; then
      changed "repository for Kubernetes $K8S_MINOR configured"
    else
      ok "repository for Kubernetes $K8S_MINOR configured"
    fi
    if at_version; then
      ok "kubeadm kubelet kubectl at $K8S_VERSION"
    else
      # After the refresh: apt-mark cannot find packages of a repository apt has not read yet.
      pkg_refresh
      apt-mark unhold "${packages[@]}" >/dev/null
      pkg_install --allow-change-held-packages "${packages[@]/%/=$K8S_VERSION-*}"
      changed "kubeadm kubelet kubectl installed at $K8S_VERSION"
    fi
    held=$(apt-mark showhold)
    for pkg in "${packages[@]}"; do
      if grep -qx "$pkg" <<<"$held"; then
        ok "$pkg held"
      else
        apt-mark hold "$pkg" >/dev/null
        changed "$pkg held"
      fi
    done
    ;;
  rpm)
    # The repository excludes the packages, so routine `dnf upgrade` never moves them.
    if write_if_changed /etc/yum.repos.d/kubernetes.repo "$K8S_REPO_RPM"; then
      changed "repository for Kubernetes $K8S_MINOR configured (packages excluded from upgrades)"
    else
      ok "repository for Kubernetes $K8S_MINOR configured (packages excluded from upgrades)"
    fi
    if at_version; then
      ok "kubeadm kubelet kubectl at $K8S_VERSION"
    else
      pkg_install --disableexcludes=kubernetes "${packages[@]/%/-$K8S_VERSION}"
      changed "kubeadm kubelet kubectl installed at $K8S_VERSION"
    fi
    ;;
esac
service_enable_now kubelet
