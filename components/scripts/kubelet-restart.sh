#!/usr/bin/env bash
# Step: restart what the kubelet-tuning step marked (containerd, then the kubelet), in this node's batch.
# Batch k runs after batch k-1 has finished, so restarts never hit every node at once; a node with nothing
# marked restarts nothing. TUNING_DIGEST changes with the tuning, which is what makes this step run again.
set -euo pipefail
: "${TUNING_DIGEST:?}" "${PENDING_RESTARTS:?}" "${CPU_MANAGER_POLICY:?}"
if [ ! -s "$PENDING_RESTARTS" ]; then
  ok "no restart pending (tuning $TUNING_DIGEST)"
  exit 0
fi
if grep -qx containerd "$PENDING_RESTARTS"; then
  systemctl restart containerd
  changed "containerd restarted (tuning $TUNING_DIGEST)"
fi
if grep -qx kubelet "$PENDING_RESTARTS"; then
  # The kubelet refuses to start when its CPU manager checkpoint names another policy.
  state=/var/lib/kubelet/cpu_manager_state
  if [ -f "$state" ] && ! grep -q "\"policyName\":\"$CPU_MANAGER_POLICY\"" "$state"; then
    rm -f "$state"
    changed "$state removed (CPU manager policy is now $CPU_MANAGER_POLICY)"
  fi
  systemctl daemon-reload && systemctl restart kubelet
  changed "kubelet restarted (tuning $TUNING_DIGEST)"
fi
rm -f "$PENDING_RESTARTS"
