#!/usr/bin/env bash
# Step: `kubeadm init` on the first control plane, from the rendered v1beta4 config; once only.
set -euo pipefail
: "${KUBEADM_CONFIG:?}" "${UPLOAD_CERTS:?}"
config=/etc/kubernetes/mlcluster/kubeadm-init.yaml
log=/var/log/mlcluster/kubeadm-init.log
# shellcheck disable=SC2086 # word lists of ports
firewall_open $CONTROL_PLANE_PORTS $CALICO_PORTS
if [ -f /etc/kubernetes/admin.conf ]; then
  ok "control plane already initialised"
  if write_if_changed "$config" "$KUBEADM_CONFIG" 0600; then
    changed "$config updated (kubeadm does not re-read it; see the README on day-2 changes)"
  fi
  exit 0
fi
write_if_changed "$config" "$KUBEADM_CONFIG" 0600 || true
mkdir -p "$(dirname "$log")"
args=(init --config "$config")
if [ "$UPLOAD_CERTS" = true ]; then
  args+=(--upload-certs)
fi
# kubeadm prints join tokens and the certificate key: keep its output in a root-only log, never on stdout.
if ! (umask 077 && run_long kubeadm "${args[@]}" >"$log" 2>&1); then
  redacted_tail "$log" >&2
  die "kubeadm init failed (full log on the node: $log)"
fi
changed "control plane initialised (log: $log)"
