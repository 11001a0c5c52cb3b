#!/usr/bin/env bash
# Step: restart what the kubelet-tuning step marked (containerd, then the kubelet), in this node's batch.
# Batch k runs after batch k-1 has finished, so restarts never hit every node at once; a node with nothing
# marked restarts nothing. TUNING_DIGEST changes with the tuning, which is what makes this step run again.
# RESTORED (etcdSnapshots.restored, set after an etcd restore) restarts the kubelet once per restore name: its
# watches then list the restored store again (Kubernetes' "Operating etcd clusters": restart the components).
set -euo pipefail
: "${TUNING_DIGEST:?}" "${PENDING_RESTARTS:?}" "${CPU_MANAGER_POLICY:?}"
RESTORED=${RESTORED:-} RESTORED_MARKER=${RESTORED_MARKER:-}
restore_restart=false
if [ -n "$RESTORED" ]; then
  done_for=""
  if [ -f "$RESTORED_MARKER" ]; then done_for=$(cat "$RESTORED_MARKER"); fi
  if [ "$done_for" = "$RESTORED" ]; then
    ok "kubelet already restarted after the etcd restore $RESTORED"
  else
    restore_restart=true
  fi
fi
if [ ! -s "$PENDING_RESTARTS" ] && [ "$restore_restart" = false ]; then
  ok "no restart pending (tuning $TUNING_DIGEST)"
  exit 0
fi
if [ -s "$PENDING_RESTARTS" ] && grep -qx containerd "$PENDING_RESTARTS"; then
  systemctl restart containerd
  changed "containerd restarted (tuning $TUNING_DIGEST)"
fi
if [ "$restore_restart" = true ] || { [ -s "$PENDING_RESTARTS" ] && grep -qx kubelet "$PENDING_RESTARTS"; }; then
  # The kubelet refuses to start when its CPU manager checkpoint names another policy.
  state=/var/lib/kubelet/cpu_manager_state
  if [ -f "$state" ] && ! grep -q "\"policyName\":\"$CPU_MANAGER_POLICY\"" "$state"; then
    rm -f "$state"
    changed "$state removed (CPU manager policy is now $CPU_MANAGER_POLICY)"
  fi
  systemctl daemon-reload && systemctl restart kubelet
  if [ "$restore_restart" = true ]; then
    # Recorded after the restart: a step stopped before it restarts the kubelet again on the next run.
    mkdir -p "${RESTORED_MARKER%/*}" && printf '%s\n' "$RESTORED" >"$RESTORED_MARKER"
    changed "kubelet restarted after the etcd restore $RESTORED (tuning $TUNING_DIGEST)"
  else
    changed "kubelet restarted (tuning $TUNING_DIGEST)"
  fi
fi
rm -f "$PENDING_RESTARTS"
