#!/usr/bin/env bash
# Step (each control plane, one at a time, first one first): kubeadm at TARGET_VERSION, then `kubeadm upgrade
# apply` (FIRST_CONTROL_PLANE) or `kubeadm upgrade node`, which move this node's static pods (kube-apiserver,
# controller-manager, scheduler, etcd). Kubelets move only after every control plane has, so none is ever newer
# than an API server.
set -euo pipefail
: "${TARGET_VERSION:?}" "${NODE_NAME:?}" "${FIRST_CONTROL_PLANE:?}" "${UPGRADE_LOG_DIR:?}"
detect_os
# kubeadm first, each part checked on its own: a run that stopped after the install and before the hold (or the
# upgrade) finishes what is left.
kubeadm_version=$(kube_package_version kubeadm)
if [ "$kubeadm_version" = "$TARGET_VERSION" ]; then
  ok "kubeadm at $TARGET_VERSION"
else
  kube_packages_install "$TARGET_VERSION" kubeadm
  changed "kubeadm $TARGET_VERSION installed"
fi
kube_packages_hold kubeadm
at_target=$(lines_matching "kube-apiserver:v$TARGET_VERSION\$" /etc/kubernetes/manifests/kube-apiserver.yaml)
if [ -n "$at_target" ]; then
  ok "$NODE_NAME: control plane at $TARGET_VERSION"
  exit 0
fi
log=$UPGRADE_LOG_DIR/kubeadm-upgrade.log
# kubeadm's own deadlines decide (5 min for each static pod it moves, then it puts that pod's old manifest back);
# the outer bound only catches a hang, well after them: a signal would stop kubeadm before its rollback.
: "${KUBEADM_UPGRADE_TIMEOUT_SECONDS:?}"
cluster_version=""
if [ "$FIRST_CONTROL_PLANE" = true ]; then cluster_version=$(kube_cluster_version); fi
if [ "$FIRST_CONTROL_PLANE" = true ] && [ "$cluster_version" != "$TARGET_VERSION" ]; then
  # The plan with the new kubeadm, as kubeadm's upgrade guide runs it (the preflight's ran with the old one, which
  # cannot name a newer version): its checks fail the step before anything moves.
  MLCLUSTER_LONG_TIMEOUT=$KUBEADM_UPGRADE_TIMEOUT_SECONDS run_logged "$UPGRADE_LOG_DIR/kubeadm-upgrade-plan.log" \
    kubeadm upgrade plan "v$TARGET_VERSION"
  ok "kubeadm upgrade plan v$TARGET_VERSION with kubeadm $TARGET_VERSION passed"
  MLCLUSTER_LONG_TIMEOUT=$KUBEADM_UPGRADE_TIMEOUT_SECONDS run_logged "$log" kubeadm upgrade apply "v$TARGET_VERSION" --yes
  changed "kubeadm upgrade apply v$TARGET_VERSION (log: $log)"
else
  MLCLUSTER_LONG_TIMEOUT=$KUBEADM_UPGRADE_TIMEOUT_SECONDS run_logged "$log" kubeadm upgrade node
  changed "kubeadm upgrade node: control plane at $TARGET_VERSION (log: $log)"
fi
