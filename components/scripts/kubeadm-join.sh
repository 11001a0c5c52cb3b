#!/usr/bin/env bash
# Step: `kubeadm join` from the rendered JoinConfiguration; the token (and certificate key) arrive on stdin.
set -euo pipefail
: "${JOIN_CONFIG:?}" "${NODE_NAME:?}"
# A control plane joins with a controlPlane section (and a certificate key); it serves the control-plane ports.
ports=$WORKER_PORTS
if grep -q '^controlPlane:' <<<"$JOIN_CONFIG"; then
  ports="$CONTROL_PLANE_PORTS $WORKER_PORTS"
fi
# shellcheck disable=SC2086 # word lists of ports
firewall_open $ports $CALICO_PORTS
if [ -f /etc/kubernetes/kubelet.conf ]; then
  ok "$NODE_NAME already joined"
  exit 0
fi
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
mkdir -p "$(dirname "$log")"
write_if_changed "$file" "$config" 0600 || true
if ! (umask 077 && run_long kubeadm join --config "$file" >"$log" 2>&1); then
  rm -f "$file"
  redacted_tail "$log" >&2
  die "kubeadm join failed (full log on the node: $log)"
fi
# The token is spent; leave no credential on disk.
rm -f "$file"
changed "$NODE_NAME joined the cluster"
