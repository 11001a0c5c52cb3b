#!/usr/bin/env bash
# Runs on a control plane when a node leaves the stack: drain it, then delete its Node object.
set -euo pipefail
: "${NODE_NAME:?}" "${DRAIN_TIMEOUT:?}"
export KUBECONFIG=/etc/kubernetes/admin.conf
if ! kubectl get node "$NODE_NAME" >/dev/null 2>&1; then
  ok "node $NODE_NAME not in the cluster"
  exit 0
fi
run_long kubectl drain "$NODE_NAME" --ignore-daemonsets --delete-emptydir-data --timeout="$DRAIN_TIMEOUT"
changed "node $NODE_NAME drained"
kubectl delete node "$NODE_NAME" --wait=false
changed "node $NODE_NAME deleted"
