#!/usr/bin/env bash
# Step: kubeadm, kubelet and kubectl from the per-minor Kubernetes package repository, pinned and held.
set -euo pipefail
: "${K8S_VERSION:?}" "${NODE_NAME:?}" "${K8S_MINOR:?}" "${K8S_REPO_DEB:?}" "${K8S_REPO_RPM:?}" "${K8S_REPO_KEY_URL:?}"
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

# A node already in the cluster keeps its versions here: moving its kubelet in place, before `kubeadm upgrade`
# and without a drain, would make it newer than the API server. The upgrade steps move it, in order; what is
# checked here is that its repository has the target.
install_or_leave_to_upgrade() {
  if at_version; then
    ok "kubeadm kubelet kubectl at $K8S_VERSION"
  elif [ -f /etc/kubernetes/kubelet.conf ] && kubelet_version=$(kube_package_version kubelet) &&
    [ -n "$kubelet_version" ]; then
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
    install_or_leave_to_upgrade
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
    install_or_leave_to_upgrade
    ;;
esac
service_enable_now kubelet
