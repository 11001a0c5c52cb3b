#!/usr/bin/env bash
# Step (on the first control plane): print the admin kubeconfig. Its stdout is a secret output.
set -euo pipefail
[ -s /etc/kubernetes/admin.conf ] || die "/etc/kubernetes/admin.conf missing: was kubeadm init run?"
cat /etc/kubernetes/admin.conf
