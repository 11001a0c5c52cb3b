#!/usr/bin/env bash
# Step: `kubeadm init` on the first control plane, from the rendered v1beta4 config; once only.
set -euo pipefail
: "${NODE_NAME:?}" "${KUBEADM_CONFIG:?}" "${UPLOAD_CERTS:?}"
config=/etc/kubernetes/mlcluster/kubeadm-init.yaml
log=/var/log/mlcluster/kubeadm-init.log
# kubeadm init has no resume: these say whether the init this step ran got to its end.
started=/etc/kubernetes/mlcluster/kubeadm-init.started
finished=/etc/kubernetes/mlcluster/kubeadm-init.finished
# shellcheck disable=SC2086 # word lists of ports
firewall_open $CONTROL_PLANE_PORTS $CALICO_PORTS
# A control plane this step initialised, or one initialised before this step kept its markers.
if [ -f "$finished" ] || { [ -f /etc/kubernetes/admin.conf ] && [ ! -f "$started" ]; }; then
  ok "control plane already initialised"
  if write_if_changed "$config" "$KUBEADM_CONFIG" 0600; then
    changed "$config updated (kubeadm does not re-read it: day-2 kubelet changes are the kubelet-tuning step's, docs/kubelet-tuning.md)"
  fi
  exit 0
fi
mkdir -p "$(dirname "$log")" "$(dirname "$started")"
# The log holds join tokens and the certificate key: root-only from its first line.
(umask 077 && touch "$log")
chmod 600 "$log"
if [ -f "$started" ]; then
  since=$(cat "$started")
  # The last init stopped part-way (it failed, or the host restarted under it): its certificates, kubeconfigs,
  # static pods and etcd data make a second init stop at its preflight, and what it never did (the cluster-info
  # the joins read, the add-ons) stays undone. Nothing joined it (every join waits for this step to succeed), so
  # this node's half-made control plane is reset and initialised again, unless its API lists other nodes.
  if [ -f /etc/kubernetes/admin.conf ] && nodes=$(kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=10s get nodes -o name 2>&1); then
    others=$(lines_matching -v -x "node/$NODE_NAME" <<<"$nodes")
    if [ -n "$others" ]; then
      die "the kubeadm init started $since did not finish, but other nodes joined this control plane ($(tr '\n' ' ' <<<"$others")); not resetting it: see $log"
    fi
  fi
  if ! run_long kubeadm reset -f >>"$log" 2>&1; then
    redacted_tail "$log" >&2
    die "kubeadm reset -f of the unfinished init failed (full log on the node: $log)"
  fi
  changed "the kubeadm init started $since did not finish: reset this node's half-made control plane (kubeadm reset -f) to initialise it again"
fi
write_if_changed "$config" "$KUBEADM_CONFIG" 0600 || true
date -u +%Y-%m-%dT%H:%M:%SZ >"$started"
args=(init --config "$config")
if [ "$UPLOAD_CERTS" = true ]; then
  args+=(--upload-certs)
fi
# kubeadm prints join tokens and the certificate key: keep its output in a root-only log, never on stdout.
if ! run_long kubeadm "${args[@]}" >>"$log" 2>&1; then
  redacted_tail "$log" >&2
  die "kubeadm init failed (full log on the node: $log); the next up resets this node's unfinished control plane and initialises it again"
fi
touch "$finished"
changed "control plane initialised (log: $log)"
