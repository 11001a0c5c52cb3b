#!/usr/bin/env bash
# Step: `kubeadm join` from the rendered JoinConfiguration, with the token and CA hash (and, for a control
# plane, the certificate key) that the join-credentials step printed, read on stdin: never in the command.
set -euo pipefail
: "${JOIN_CONFIG:?}" "${NODE_NAME:?}"
# A control plane joins with a controlPlane section (and a certificate key); it serves the control-plane ports.
ports=$WORKER_PORTS
if grep -q '^controlPlane:' <<<"$JOIN_CONFIG"; then
  ports="$CONTROL_PLANE_PORTS $WORKER_PORTS"
fi
# shellcheck disable=SC2086 # word lists of ports
firewall_open $ports $CALICO_PORTS
# kubeadm join has no resume: these say whether the join this step ran got to its end.
started=/etc/kubernetes/mlcluster/kubeadm-join.started
finished=/etc/kubernetes/mlcluster/kubeadm-join.finished
# A node this step joined, or one joined before this step kept its markers.
if [ -f "$finished" ] || { [ -f /etc/kubernetes/kubelet.conf ] && [ ! -f "$started" ]; }; then
  ok "$NODE_NAME already joined"
  exit 0
fi
token='' ca_hash='' certificate_key=''
IFS= read -r token || true
IFS= read -r ca_hash || true
IFS= read -r certificate_key || true
if [ -z "$token" ] || [ -z "$ca_hash" ]; then
  die "no join token on stdin: the cluster already has a Node $NODE_NAME but this host has no kubelet.conf (was it reset?); delete the stale Node (kubectl delete node $NODE_NAME) and run again"
fi
# Quoted replacements: bash >= 5.2 reads an unquoted & as the matched placeholder.
config=${JOIN_CONFIG//__MLCLUSTER_JOIN_TOKEN__/"$token"}
config=${config//__MLCLUSTER_CA_CERT_HASH__/"$ca_hash"}
config=${config//__MLCLUSTER_CERTIFICATE_KEY__/"$certificate_key"}
file=/etc/kubernetes/mlcluster/kubeadm-join.yaml
log=/var/log/mlcluster/kubeadm-join.log
mkdir -p "$(dirname "$log")" "$(dirname "$started")"
if [ -f "$started" ]; then
  since=$(cat "$started")
  # The last join stopped part-way (it failed, or the host restarted under it): its bootstrap kubeconfig,
  # certificates and manifests make a second join stop at its preflight. The node is not a working member (the
  # first control plane deleted a control plane's Node that never got its etcd member), so it is reset first.
  if ! run_long kubeadm reset -f >>"$log" 2>&1; then
    redacted_tail "$log" >&2
    die "kubeadm reset -f of the unfinished join failed (full log on the node: $log)"
  fi
  changed "the kubeadm join started $since did not finish: reset this node (kubeadm reset -f) to join again"
fi
write_if_changed "$file" "$config" 0600 || true
date -u +%Y-%m-%dT%H:%M:%SZ >"$started"
joined=true
if ! (umask 077 && run_long kubeadm join --config "$file" >"$log" 2>&1); then
  joined=false
fi
# Leave no credential on disk (the token expires on its own: other nodes may still join with it).
rm -f "$file"
if [ "$joined" = false ]; then
  redacted_tail "$log" >&2
  die "kubeadm join failed (full log on the node: $log); fix the cause and run again (the next up resets what this join left and brings valid credentials)"
fi
touch "$finished"
changed "$NODE_NAME joined the cluster"
