#!/usr/bin/env bash
# Step: kernel settings Kubernetes networking needs, persisted and applied.
set -euo pipefail
: "${SYSCTL_CONF:?}"
if write_if_changed /etc/sysctl.d/99-mlcluster-k8s.conf "$SYSCTL_CONF"; then
  changed "/etc/sysctl.d/99-mlcluster-k8s.conf written"
fi
stale=0
while IFS='=' read -r key value; do
  key=${key// /}
  value=${value// /}
  [ -n "$key" ] || continue
  current=$(sysctl -n "$key") || die "sysctl cannot read $key"
  if [ "$current" != "$value" ]; then
    stale=1
  fi
done <<<"$SYSCTL_CONF"
if [ "$stale" = 1 ]; then
  sysctl --system >/dev/null
  changed "sysctl settings applied"
else
  ok "sysctl settings in effect"
fi
