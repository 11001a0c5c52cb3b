#!/usr/bin/env bash
# Step: `kubeadm join` from the rendered JoinConfiguration. What arrives on stdin depends on MINT_TOKEN:
# - true (workers): the admin kubeconfig. The node creates its own bootstrap token (15 min, deleted right
#   after the join), so a join retried hours later or a node added months later always has a fresh one.
# - false (control planes): token, CA hash and certificate key from the join-credentials step.
set -euo pipefail
: "${JOIN_CONFIG:?}" "${NODE_NAME:?}" "${MINT_TOKEN:?}"
if [ -f /etc/kubernetes/kubelet.conf ]; then
  ok "$NODE_NAME already joined"
  exit 0
fi
token='' ca_hash='' certificate_key='' admin_conf=''
if [ "$MINT_TOKEN" = true ]; then
  # tmpfs, root-only, removed however the step ends: the admin credential never stays on the node.
  workdir=$(mktemp -d /run/mlcluster-join.XXXXXX)
  trap 'rm -rf "$workdir"' EXIT
  admin_conf=$workdir/admin.conf
  (umask 077 && cat >"$admin_conf")
  [ -s "$admin_conf" ] || die "no admin kubeconfig on stdin"
  join=$(run_long kubeadm token create --kubeconfig "$admin_conf" --ttl 15m \
    --description "mlcluster join of $NODE_NAME" --print-join-command 2>/dev/null) ||
    die "could not create a join token through the API server (kubeadm token create failed)"
  token=$(grep -oE -- '--token [^ ]+' <<<"$join" | awk '{print $2}')
  ca_hash=$(grep -oE -- '--discovery-token-ca-cert-hash [^ ]+' <<<"$join" | awk '{print $2}')
else
  IFS= read -r token || true
  IFS= read -r ca_hash || true
  IFS= read -r certificate_key || true
fi
if [ -z "$token" ] || [ -z "$ca_hash" ]; then
  die "no join token on stdin: the cluster already has a Node $NODE_NAME but this host has no kubelet.conf (was it reset?); delete the stale Node (kubectl delete node $NODE_NAME) and run again"
fi
config=${JOIN_CONFIG//__MLCLUSTER_JOIN_TOKEN__/$token}
config=${config//__MLCLUSTER_CA_CERT_HASH__/$ca_hash}
config=${config//__MLCLUSTER_CERTIFICATE_KEY__/$certificate_key}
file=/etc/kubernetes/mlcluster/kubeadm-join.yaml
log=/var/log/mlcluster/kubeadm-join.log
mkdir -p "$(dirname "$log")"
write_if_changed "$file" "$config" 0600 || true
joined=true
if ! (umask 077 && run_long kubeadm join --config "$file" >"$log" 2>&1); then
  joined=false
fi
# The token is spent (or useless): leave no credential on disk, nor a live token in the cluster.
rm -f "$file"
if [ -n "$admin_conf" ]; then
  run_long kubeadm token delete --kubeconfig "$admin_conf" "${token%%.*}" >/dev/null 2>&1 || true
fi
if [ "$joined" = false ]; then
  redacted_tail "$log" >&2
  die "kubeadm join failed (full log on the node: $log); run again: a retry gets a fresh token"
fi
changed "$NODE_NAME joined the cluster"
