#!/usr/bin/env bash
# Step (on the first control plane): a fresh bootstrap token, the CA hash and, when control planes join,
# a certificate key, for the nodes joining in this run. Its stdout is secret: the program marks it so and
# logs nothing. FOR_NODES is part of the step so that adding a node re-runs it for a fresh token.
set -euo pipefail
: "${FOR_NODES:?}" "${WITH_CERTIFICATE_KEY:?}"
read -r -a nodes <<<"$FOR_NODES"
# Nodes that are already members need no credential: when all are, print none (their join steps report
# ok), so a re-run leaves no fresh token behind.
missing=0
for node in "${nodes[@]}"; do
  if ! KUBECONFIG=/etc/kubernetes/admin.conf kubectl get node "$node" >/dev/null 2>&1; then
    missing=$((missing + 1))
  fi
done
if [ "$missing" -eq 0 ]; then
  exit 0
fi
join=$(run_long kubeadm token create --ttl 2h --description "mlcluster join of $missing node(s)" \
  --print-join-command)
token=$(grep -oE -- '--token [^ ]+' <<<"$join" | awk '{print $2}')
ca_hash=$(grep -oE -- '--discovery-token-ca-cert-hash [^ ]+' <<<"$join" | awk '{print $2}')
if [ -z "$token" ] || [ -z "$ca_hash" ]; then
  die "could not read a token from 'kubeadm token create'"
fi
key=
if [ "$WITH_CERTIFICATE_KEY" = true ]; then
  key=$(run_long kubeadm init phase upload-certs --upload-certs 2>/dev/null | tail -n 1) ||
    die "'kubeadm init phase upload-certs' failed: no certificate key for the joining control planes"
  [[ $key =~ ^[0-9a-f]{64}$ ]] || die "could not read the certificate key from 'kubeadm init phase upload-certs'"
fi
# Credentials are printed last, after every command that can fail: pulumi-command puts all of a failed
# step's stdout into its error text, whatever `logging` says.
printf '%s\n%s\n' "$token" "$ca_hash"
if [ -n "$key" ]; then
  printf '%s\n' "$key"
fi
