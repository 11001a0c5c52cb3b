#!/usr/bin/env bash
# Step (on the first control plane, after every node's kubelet restarted for the restore): roll the controllers
# that watch the API, namespace by namespace in the order they were installed, once per restore name; a Deployment
# or StatefulSet is waited for before the next namespace, a DaemonSet is restarted and left to roll node by node. A restored
# store hands out revisions again; a controller that kept state of later ones (an informer cache, a leader's view)
# starts afresh (Kubernetes' "Operating etcd clusters": restart the components after a restore).
set -euo pipefail
: "${RESTORED:?}" "${RESTORED_MARKER:?}" "${NAMESPACES:?}" "${ROLLOUT_TIMEOUT:?}"
KUBECTL=(kubectl --kubeconfig /etc/kubernetes/admin.conf)

done_for=""
if [ -f "$RESTORED_MARKER" ]; then done_for=$(cat "$RESTORED_MARKER"); fi
if [ "$done_for" = "$RESTORED" ]; then
  ok "controllers already rolled after the etcd restore $RESTORED"
  exit 0
fi
read -r -a namespaces <<<"$NAMESPACES"
for namespace in "${namespaces[@]}"; do
  listed=$(timeout 60 "${KUBECTL[@]}" -n "$namespace" get deployment,daemonset,statefulset -o name) ||
    die "cannot list the controllers in namespace $namespace"
  read -r -a workloads <<<"${listed//$'\n'/ }"
  if [ "${#workloads[@]}" -eq 0 ]; then
    ok "$namespace: no controller to roll"
    continue
  fi
  timeout 60 "${KUBECTL[@]}" -n "$namespace" rollout restart "${workloads[@]}" >/dev/null ||
    die "could not restart the controllers in namespace $namespace"
  for workload in "${workloads[@]}"; do
    if [[ $workload == daemonset.apps/* ]]; then
      # A node agent rolls one node at a time by its update strategy: hours on a large fleet. Its pods restart on
      # their own; waiting here would hold the step (and its 5-minute bound) to the fleet's size.
      ok "$namespace: $workload rolls node by node on its own, not waited for (kubectl -n $namespace rollout" \
        "status $workload)"
      continue
    fi
    waiting "$namespace: $workload rolling (up to $ROLLOUT_TIMEOUT)"
    run_long "${KUBECTL[@]}" -n "$namespace" rollout status "$workload" --timeout="$ROLLOUT_TIMEOUT" >/dev/null ||
      die "$namespace: $workload did not finish rolling within $ROLLOUT_TIMEOUT: see kubectl -n $namespace" \
        "describe $workload; the next up rolls every namespace again"
  done
  changed "$namespace: rolled ${workloads[*]}"
done
mkdir -p "${RESTORED_MARKER%/*}" && printf '%s\n' "$RESTORED" >"$RESTORED_MARKER"
changed "controllers rolled after the etcd restore $RESTORED"
