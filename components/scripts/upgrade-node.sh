#!/usr/bin/env bash
# Step (each node, in the upgrade's order): kubeadm first, then `kubeadm upgrade apply` (FIRST_CONTROL_PLANE) or
# `kubeadm upgrade node`, then kubelet and kubectl, then a kubelet restart. The kubelet moves only after this
# node's control plane (and, on workers, every control plane) runs the target, so it is never newer than an
# API server. The node was drained before this step and is uncordoned after it.
set -euo pipefail
: "${TARGET_VERSION:?}" "${NODE_NAME:?}" "${FIRST_CONTROL_PLANE:?}" "${CONTROL_PLANE:?}" "${UPGRADE_LOG_DIR:?}"
detect_os
mkdir -p "$UPGRADE_LOG_DIR"
log=$UPGRADE_LOG_DIR/kubeadm-upgrade.log

kubeadm_upgrade() {
  if ! run_long kubeadm upgrade "$@" >"$log" 2>&1; then
    redacted_tail "$log" >&2
    die "kubeadm upgrade $* failed on $NODE_NAME (log on the node: $log)"
  fi
}

if [ "$(kube_package_version kubelet)" = "$TARGET_VERSION" ]; then
  ok "$NODE_NAME: kubelet at $TARGET_VERSION"
  exit 0
fi
if [ "$(kube_package_version kubeadm)" = "$TARGET_VERSION" ]; then
  ok "kubeadm at $TARGET_VERSION"
else
  kube_packages_install "$TARGET_VERSION" kubeadm
  kube_packages_hold kubeadm
  changed "kubeadm $TARGET_VERSION installed (held)"
fi
if [ "$FIRST_CONTROL_PLANE" = true ]; then
  if [ "$(kube_cluster_version)" = "$TARGET_VERSION" ]; then
    ok "control plane already at $TARGET_VERSION"
  else
    kubeadm_upgrade apply "v$TARGET_VERSION" --yes
    changed "kubeadm upgrade apply v$TARGET_VERSION (log: $log)"
  fi
else
  # Control planes: their static pods move to the cluster's version; workers: the kubelet configuration.
  kubeadm_upgrade node
  changed "kubeadm upgrade node ($([ "$CONTROL_PLANE" = true ] && echo control plane || echo worker); log: $log)"
fi
kube_packages_install "$TARGET_VERSION" kubelet kubectl
kube_packages_hold kubelet kubectl
changed "kubelet kubectl $TARGET_VERSION installed (held)"
systemctl daemon-reload
systemctl restart kubelet
changed "kubelet restarted at $TARGET_VERSION"
