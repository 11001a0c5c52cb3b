#!/usr/bin/env bash
# Runs on a control plane when a node leaves the stack: drain it, then delete its Node object.
# A node that is gone (nodes[].gone) is not drained: its pods cannot stop, and they go with the Node. A node
# that is NotReady gets a short drain; if that cannot finish, it is reported and the Node deleted anyway.
# A gone control plane cannot run its own `kubeadm reset`, which is what removes a member from etcd: its member is
# removed here, through this (healthy) control plane's etcd, before its Node goes.
set -euo pipefail
: "${NODE_NAME:?}" "${DRAIN_TIMEOUT:?}" "${NOT_READY_DRAIN_TIMEOUT:?}" "${GONE:?}" "${CONTROL_PLANE:?}"
export KUBECONFIG=/etc/kubernetes/admin.conf
remove_etcd_member() {
  local members id
  # `member list -w simple`: ID, status, name, peer URLs, client URLs, is learner (", " between them).
  members=$(etcd_ctl member list -w simple) || die "etcd member list failed on this control plane"
  id=$(awk -F', ' -v name="$1" '$3 == name { print $1 }' <<<"$members")
  if [ -z "$id" ]; then
    ok "etcd has no member named $1"
    return
  fi
  etcd_ctl member remove "$id" >&2 ||
    die "etcd refused to remove member $1 ($id): see its message above (a quorum of started members is needed)"
  changed "etcd member $1 ($id) removed"
}
found=$(kubectl get node "$NODE_NAME" --ignore-not-found -o name) || die "cannot read node $NODE_NAME from the API"
if [ -z "$found" ]; then
  ok "node $NODE_NAME not in the cluster"
  exit 0
fi
status=$(kubectl get node "$NODE_NAME" --no-headers 2>/dev/null | awk '{print $2}')
if [ "$GONE" = true ]; then
  if [ "$CONTROL_PLANE" = true ]; then
    remove_etcd_member "$NODE_NAME"
  fi
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
