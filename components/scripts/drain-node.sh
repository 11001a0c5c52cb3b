#!/usr/bin/env bash
# Runs on a control plane when a node leaves the stack: drain it, then delete its Node object.
# A node that is gone (nodes[].gone) is not drained: its pods cannot stop, and they go with the Node. A node
# that is NotReady gets a short drain; if that cannot finish, it is reported and the Node deleted anyway.
set -euo pipefail
: "${NODE_NAME:?}" "${DRAIN_TIMEOUT:?}" "${NOT_READY_DRAIN_TIMEOUT:?}" "${GONE:?}"
export KUBECONFIG=/etc/kubernetes/admin.conf
if ! kubectl get node "$NODE_NAME" >/dev/null 2>&1; then
  ok "node $NODE_NAME not in the cluster"
  exit 0
fi
status=$(kubectl get node "$NODE_NAME" --no-headers 2>/dev/null | awk '{print $2}')
if [ "$GONE" = true ]; then
  changed "node $NODE_NAME is gone (nodes[].gone): not drained, its pods are deleted with it"
elif [[ $status == NotReady* ]]; then
  if run_long kubectl drain "$NODE_NAME" --ignore-daemonsets --delete-emptydir-data \
    --timeout="$NOT_READY_DRAIN_TIMEOUT" >&2; then
    changed "node $NODE_NAME drained (it was NotReady)"
  else
    changed "node $NODE_NAME is NotReady and did not drain within $NOT_READY_DRAIN_TIMEOUT: deleted without drain"
  fi
else
  run_long kubectl drain "$NODE_NAME" --ignore-daemonsets --delete-emptydir-data --timeout="$DRAIN_TIMEOUT" >&2
  changed "node $NODE_NAME drained"
fi
kubectl delete node "$NODE_NAME" --wait=false >&2
changed "node $NODE_NAME deleted"
