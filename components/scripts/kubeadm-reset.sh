#!/usr/bin/env bash
# Runs on a node that leaves the stack, after it was drained: undo what kubeadm did.
set -euo pipefail
: "${NODE_NAME:?}"
# A control plane that leaves stops answering for the API VIP (cluster.apiVip): its keepalived could otherwise take
# the VIP with a load balancer on a node that is no longer a member.
vip_conf=""
if [ -f /etc/keepalived/keepalived.conf ]; then
  vip_conf=$(cat /etc/keepalived/keepalived.conf) || die "cannot read /etc/keepalived/keepalived.conf"
fi
if [[ $vip_conf == "# mlcluster: cluster.apiVip"* ]]; then
  systemctl disable --now keepalived haproxy
  rm -f /etc/keepalived/keepalived.conf
  changed "$NODE_NAME no longer holds the API VIP (keepalived and haproxy stopped and disabled)"
fi
if [ ! -f /etc/kubernetes/kubelet.conf ] && [ ! -f /etc/kubernetes/admin.conf ]; then
  ok "$NODE_NAME has no kubeadm state"
  exit 0
fi
run_long kubeadm reset -f >/dev/null
changed "$NODE_NAME reset (kubeadm reset -f)"
