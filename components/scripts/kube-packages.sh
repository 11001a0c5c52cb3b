#!/usr/bin/env bash
# Step: kubeadm, kubelet and kubectl from the per-minor Kubernetes package repository, pinned and held. On an
# air-gapped site the repository is the seed's (no key to fetch: BUNDLE_DEB_DIGESTS, the lockfile's digest of each
# Debian package, is what a downloaded package is checked against before it is installed: lib.sh).
set -euo pipefail
: "${K8S_VERSION:?}" "${NODE_NAME:?}" "${K8S_MINOR:?}" "${K8S_REPO_DEB:?}" "${K8S_REPO_RPM:?}" "${K8S_REPO_KEY_URL?}"
packages=(kubeadm kubelet kubectl)
detect_os

# A node already in the cluster keeps its versions here: moving its kubelet in place, before `kubeadm upgrade`
# and without a drain, would make it newer than the API server. The upgrade steps move it, in order; what is
# checked here is that its repository has the target. Every version is read before the decision, outside any
# condition, so a package database that cannot be read stops the step instead of reading as "not installed".
install_or_leave_to_upgrade() {
  local pkg installed at_version=true kubelet_version
  for pkg in "${packages[@]}"; do
    installed=$(pkg_version "$pkg")
    case $installed in
      "$K8S_VERSION" | "$K8S_VERSION"-*) ;;
      *) at_version=false ;;
    esac
  done
  kubelet_version=$(kube_package_version kubelet)
  if [ "$at_version" = true ]; then
    ok "kubeadm kubelet kubectl at $K8S_VERSION"
  elif [ -f /etc/kubernetes/kubelet.conf ] && [ -n "$kubelet_version" ]; then
    ok "kubelet at $kubelet_version in the cluster: the upgrade steps move it to $K8S_VERSION"
    # Every node's preparation runs before the upgrade's first step: a family without the packages stops it here.
    kube_packages_offered "$K8S_VERSION" "$NODE_NAME"
  else
    kube_packages_install "$K8S_VERSION" "${packages[@]}"
    changed "kubeadm kubelet kubectl installed at $K8S_VERSION"
  fi
}

case $OS_FAMILY in
  deb)
    keyring=/etc/apt/keyrings/kubernetes-apt-keyring.gpg
    if [ -z "$K8S_REPO_KEY_URL" ]; then
      ok "no repository key: each package is checked against the bundle's lockfile"
    elif [ -s "$keyring" ]; then
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
    install_or_leave_to_upgrade
    kube_packages_hold "${packages[@]}"
    ;;
  rpm)
    # The repository excludes the packages, so routine `dnf upgrade` never moves them.
    if write_if_changed /etc/yum.repos.d/kubernetes.repo "$K8S_REPO_RPM"; then
      changed "repository for Kubernetes $K8S_MINOR configured (packages excluded from upgrades)"
    else
      ok "repository for Kubernetes $K8S_MINOR configured (packages excluded from upgrades)"
    fi
    install_or_leave_to_upgrade
    ;;
esac
service_enable_now kubelet
