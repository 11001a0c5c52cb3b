#!/usr/bin/env bash
# Step (first control plane): may the cluster go to TARGET_VERSION? One minor at a time, never down. That every
# node's repository offers the target's packages was checked before, by kube-packages on each node.
set -euo pipefail
: "${TARGET_VERSION:?}" "${UPGRADE_LOG_DIR:?}"
current=$(kube_cluster_version)
[ -n "$current" ] || die "cannot read the cluster's version from the API server"
if [ "$current" = "$TARGET_VERSION" ]; then
  ok "cluster at $TARGET_VERSION: no upgrade"
  exit 0
fi
IFS=. read -r cur_major cur_minor cur_patch <<<"$current"
IFS=. read -r new_major new_minor new_patch <<<"$TARGET_VERSION"
key="mlcluster:kubernetesVersion"
if [ "$new_major" -ne "$cur_major" ]; then
  die "$key: $TARGET_VERSION changes the major version of the cluster ($current)"
fi
if [ "$new_minor" -lt "$cur_minor" ] || { [ "$new_minor" -eq "$cur_minor" ] && [ "$new_patch" -lt "$cur_patch" ]; }; then
  die "$key: $TARGET_VERSION is older than the cluster's $current: downgrades are not supported (restore an etcd snapshot instead)"
fi
if [ "$new_minor" -gt $((cur_minor + 1)) ]; then
  die "$key: $TARGET_VERSION skips a minor: the cluster runs $current; upgrade to $cur_major.$((cur_minor + 1)).x first (one minor at a time)"
fi
log=$UPGRADE_LOG_DIR/kubeadm-upgrade-plan.log
# Without a version: this node's kubeadm is still the old one, and `plan <newer>` refuses a version above its own.
# What it checks here is the cluster's health (control-plane pods, etcd) before anything moves.
run_logged "$log" kubeadm upgrade plan
changed "upgrade $current -> $TARGET_VERSION checked (kubeadm upgrade plan: $log)"
