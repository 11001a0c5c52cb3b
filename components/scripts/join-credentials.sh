#!/usr/bin/env bash
# Step (on the first control plane): a fresh bootstrap token, the CA hash and, for control planes, a
# certificate key, for one joining node. Its stdout is secret: the program marks it so and logs nothing.
set -euo pipefail
: "${FOR_NODE:?}" "${WITH_CERTIFICATE_KEY:?}"
# A node that is already a member needs no credential: print none (its join step reports ok), so a re-run
# leaves no fresh token behind.
if KUBECONFIG=/etc/kubernetes/admin.conf kubectl get node "$FOR_NODE" >/dev/null 2>&1; then
  exit 0
fi
join=$(run_long kubeadm token create --ttl 2h --description "mlcluster join of $FOR_NODE" --print-join-command)
token=$(grep -oE -- '--token [^ ]+' <<<"$join" | awk '{print $2}')
ca_hash=$(grep -oE -- '--discovery-token-ca-cert-hash [^ ]+' <<<"$join" | awk '{print $2}')
if [ -z "$token" ] || [ -z "$ca_hash" ]; then
  die "could not read a token from 'kubeadm token create'"
fi
printf '%s\n%s\n' "$token" "$ca_hash"
if [ "$WITH_CERTIFICATE_KEY" = true ]; then
  key=$(run_long kubeadm init phase upload-certs --upload-certs 2>/dev/null | tail -n 1)
  [[ $key =~ ^[0-9a-f]{64}$ ]] || die "could not read the certificate key from 'kubeadm init phase upload-certs'"
  printf '%s\n' "$key"
fi
