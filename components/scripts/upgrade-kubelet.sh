#!/usr/bin/env bash
# Step (each node, drained, after every control plane runs TARGET_VERSION): on workers kubeadm and `kubeadm
# upgrade node` (the kubelet's configuration), then kubelet and kubectl, held again, and a kubelet restart.
set -euo pipefail
: "${TARGET_VERSION:?}" "${NODE_NAME:?}" "${CONTROL_PLANE:?}" "${UPGRADE_LOG_DIR:?}"
detect_os
# Set before the kubelet package moves, cleared once the kubelet restarted: the kubelet that runs is the old one
# until then, also when the package is already at the target because a restart failed or the host went down.
pending=/var/lib/mlcluster/kubelet-upgrade-restart
kubelet_version=$(kube_package_version kubelet)
kubectl_version=$(kube_package_version kubectl)
if [ "$kubelet_version" = "$TARGET_VERSION" ] && [ "$kubectl_version" = "$TARGET_VERSION" ] && [ ! -f "$pending" ]; then
  kube_packages_hold kubelet kubectl
  ok "$NODE_NAME: kubelet at $TARGET_VERSION"
  exit 0
fi
if [ "$CONTROL_PLANE" != true ] && [ "$kubelet_version" != "$TARGET_VERSION" ]; then
  kubeadm_version=$(kube_package_version kubeadm)
  if [ "$kubeadm_version" != "$TARGET_VERSION" ]; then
    kube_packages_install "$TARGET_VERSION" kubeadm
    changed "kubeadm $TARGET_VERSION installed"
  fi
  kube_packages_hold kubeadm
  log=$UPGRADE_LOG_DIR/kubeadm-upgrade.log
  run_logged "$log" kubeadm upgrade node
  changed "kubeadm upgrade node: kubelet configuration for $TARGET_VERSION (log: $log)"
fi
if [ "$kubelet_version" != "$TARGET_VERSION" ] || [ "$kubectl_version" != "$TARGET_VERSION" ]; then
  mkdir -p "$(dirname "$pending")"
  touch "$pending"
  kube_packages_install "$TARGET_VERSION" kubelet kubectl
  changed "kubelet kubectl $TARGET_VERSION installed"
fi
kube_packages_hold kubelet kubectl
systemctl daemon-reload
systemctl restart kubelet
rm -f "$pending"
changed "kubelet restarted at $TARGET_VERSION"
