#!/usr/bin/env bash
# Step (on the first control plane): print the admin kubeconfig. Its stdout is a secret output.
# Self-contained on purpose (no lib.sh): the Kubernetes provider is built from this step's stdout, and any
# change to this step's inputs makes the kubeconfig unknown in a preview, which would show the provider and
# everything on it as replaced. Its inputs change only when this file does.
set -euo pipefail
if [ ! -s /etc/kubernetes/admin.conf ]; then
  echo "error: /etc/kubernetes/admin.conf missing: was kubeadm init run?" >&2
  exit 1
fi
cat /etc/kubernetes/admin.conf
