#!/usr/bin/env bash
# Step (a control plane): cordon and drain NODES before their upgrade. PodDisruptionBudgets are respected
# (eviction API) and the drain is bounded by DRAIN_TIMEOUT; running Kueue-admitted jobs are waited for when
# GPU_JOBS is `wait` (up to GPU_JOBS_TIMEOUT_SECONDS, then the upgrade stops with the node cordoned).
set -euo pipefail
: "${TARGET_VERSION:?}" "${NODES:?}" "${DRAIN_TIMEOUT:?}" "${GPU_JOBS:?}" "${GPU_JOBS_TIMEOUT_SECONDS:?}"
: "${KUEUE_POD_LABELS:?}" "${CORDON_MARKERS:?}" "${POLL_SECONDS:?}" "${PROGRESS_SECONDS:?}"
export KUBECONFIG=/etc/kubernetes/admin.conf
mkdir -p "$CORDON_MARKERS"

running_jobs() {
  local label
  for label in $KUEUE_POD_LABELS; do
    kubectl get pods -A --field-selector "spec.nodeName=$1,status.phase=Running" -l "$label" -o name
  done | sort -u
}

for node in $NODES; do
  kubelet=$(kubectl get node "$node" -o jsonpath='{.status.nodeInfo.kubeletVersion}')
  if [ "$kubelet" = "v$TARGET_VERSION" ]; then
    ok "$node at $TARGET_VERSION: no drain"
    continue
  fi
  # Only what the upgrade cordoned is uncordoned after it: a node an operator cordoned stays cordoned.
  unschedulable=$(kubectl get node "$node" -o jsonpath='{.spec.unschedulable}')
  if [ "$unschedulable" != true ]; then
    : >"$CORDON_MARKERS/$node"
    kubectl cordon "$node" >/dev/null
    changed "$node cordoned"
  fi
  if [ "$GPU_JOBS" = wait ]; then
    started=$(date +%s)
    deadline=$((started + GPU_JOBS_TIMEOUT_SECONDS))
    said=0
    jobs=$(running_jobs "$node")
    while [ -n "$jobs" ]; do
      now=$(date +%s)
      if [ $((now - said)) -ge "$PROGRESS_SECONDS" ]; then
        count=$(wc -l <<<"$jobs")
        shown=$(head -n 3 <<<"$jobs" | tr '\n' ' ')
        waiting "$node runs $count Kueue-admitted job(s): ${shown}($((now - started))s of ${GPU_JOBS_TIMEOUT_SECONDS}s)"
        said=$now
      fi
      if [ "$now" -ge "$deadline" ]; then
        die "$node still runs Kueue-admitted job(s) after ${GPU_JOBS_TIMEOUT_SECONDS}s: $(echo "$jobs" | tr '\n' ' ')- the upgrade stops here with $node cordoned; let them finish and run up again, or set mlcluster:upgrade.gpuJobs: evict"
      fi
      sleep "$POLL_SECONDS"
      jobs=$(running_jobs "$node")
    done
  fi
  run_long kubectl drain "$node" --ignore-daemonsets --delete-emptydir-data --timeout="$DRAIN_TIMEOUT" >/dev/null
  changed "$node drained for $TARGET_VERSION"
done
