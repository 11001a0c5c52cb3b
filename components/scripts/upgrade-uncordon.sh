#!/usr/bin/env bash
# Step (a control plane): uncordon NODES once their kubelet runs TARGET_VERSION, if the upgrade cordoned them.
set -euo pipefail
: "${TARGET_VERSION:?}" "${NODES:?}" "${CORDON_MARKERS:?}"
export KUBECONFIG=/etc/kubernetes/admin.conf
for node in $NODES; do
  if [ ! -e "$CORDON_MARKERS/$node" ]; then
    ok "$node not cordoned by an upgrade"
    continue
  fi
  kubelet=$(kubectl get node "$node" -o jsonpath='{.status.nodeInfo.kubeletVersion}')
  [ "$kubelet" = "v$TARGET_VERSION" ] || die "$node runs kubelet $kubelet, not v$TARGET_VERSION: left cordoned"
  kubectl uncordon "$node" >/dev/null
  rm -f "$CORDON_MARKERS/$node"
  changed "$node uncordoned at $TARGET_VERSION"
done
