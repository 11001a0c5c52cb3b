#!/usr/bin/env bash
# Step (each node, drained, after every control plane runs TARGET_VERSION): on workers kubeadm and `kubeadm
# upgrade node` (the kubelet's configuration), then kubelet and kubectl, held again, and a kubelet restart.
set -euo pipefail
: "${TARGET_VERSION:?}" "${NODE_NAME:?}" "${CONTROL_PLANE:?}" "${UPGRADE_LOG_DIR:?}"
detect_os
kubelet_version=$(kube_package_version kubelet)
if [ "$kubelet_version" = "$TARGET_VERSION" ]; then
  ok "$NODE_NAME: kubelet at $TARGET_VERSION"
  exit 0
fi
if [ "$CONTROL_PLANE" != true ]; then
  kubeadm_version=$(kube_package_version kubeadm)
  if [ "$kubeadm_version" != "$TARGET_VERSION" ]; then
    kube_packages_install "$TARGET_VERSION" kubeadm
    kube_packages_hold kubeadm
    changed "kubeadm $TARGET_VERSION installed (held)"
  fi
  log=$UPGRADE_LOG_DIR/kubeadm-upgrade.log
  run_logged "$log" kubeadm upgrade node
  changed "kubeadm upgrade node: kubelet configuration for $TARGET_VERSION (log: $log)"
fi
kube_packages_install "$TARGET_VERSION" kubelet kubectl
kube_packages_hold kubelet kubectl
changed "kubelet kubectl $TARGET_VERSION installed (held)"
systemctl daemon-reload
systemctl restart kubelet
changed "kubelet restarted at $TARGET_VERSION"
