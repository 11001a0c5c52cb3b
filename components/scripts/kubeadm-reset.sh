#!/usr/bin/env bash
# Runs on a node that leaves the stack, after it was drained: undo what kubeadm did.
set -euo pipefail
: "${NODE_NAME:?}"
if [ ! -f /etc/kubernetes/kubelet.conf ] && [ ! -f /etc/kubernetes/admin.conf ]; then
  ok "$NODE_NAME has no kubeadm state"
  exit 0
fi
run_long kubeadm reset -f >/dev/null
changed "$NODE_NAME reset (kubeadm reset -f)"
