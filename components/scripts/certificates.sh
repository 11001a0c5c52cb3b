#!/usr/bin/env bash
# Step (each control plane, one at a time, the first one first): kubeadm's certificate expiry dates, renewed when
# the program asks. RENEW_BEFORE empty: only read them. RENEW_BEFORE set (a UTC date the program chose from the
# dates the last `up` recorded): renew when this node's earliest certificate expires before it. The check is
# against the certificates themselves, not this node's clock, so a node renewed already (by `kubeadm upgrade`, by
# hand, or by a run that failed later) prints ok:. After a renewal the control-plane static pods restart the way
# kubeadm documents it (manifests out of the kubelet's directory and back), bounded by RESTART_TIMEOUT_SECONDS.
# The last line carries kubeadm's dates for the program (`ok: certificates: <JSON>`): dates only, no key material.
set -euo pipefail
: "${NODE_NAME:?}" "${RENEW_BEFORE?}" "${MANIFESTS:?}" "${PARKED:?}" "${RESTART_TIMEOUT_SECONDS:?}" "${POLL_SECONDS:?}"
: "${CERTS_LOG:?}" "${API_PORT:?}"
components=(kube-apiserver kube-controller-manager kube-scheduler etcd)

expiration() { run_long kubeadm certs check-expiration -o json; }

# The earliest expirationDate kubeadm printed (RFC 3339 in UTC, so they sort as text).
earliest() { grep -o '"expirationDate": *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/' | sort | head -n 1; }

# A kube-system static pod's container (a user's container of the same name on this node is not it).
running() {
  local found
  found=$(crictl ps --name "^$1\$" --label io.kubernetes.pod.namespace=kube-system -q) ||
    die "crictl ps failed: cannot tell whether $1 runs"
  [ -n "$found" ]
}

# This node's own API server, not admin.conf's server: that is the control-plane endpoint, where another control
# plane answers while this one's etcd still loads, and the next control plane would then park its pods too (two of
# three members down). kubeadm's serving certificate does not name 127.0.0.1; it names "kubernetes".
api_ready() {
  kubectl --kubeconfig /etc/kubernetes/admin.conf --server "https://127.0.0.1:$API_PORT" \
    --tls-server-name kubernetes get --raw /readyz >/dev/null 2>&1
}

# This node's own etcd member answers health (the API server's readiness checks its etcd too; this names which).
member_healthy() {
  local found
  found=$(crictl ps --name '^etcd$' --label io.kubernetes.pod.namespace=kube-system --state running -q) ||
    die "crictl ps failed: cannot look for this node's etcd container"
  [ -n "$found" ] || return 1
  # Unhealthy or not answering yet (loading its data): one more poll, until the deadline.
  etcd_ctl_in "${found%%$'\n'*}" endpoint health >/dev/null 2>&1
}

none_running() {
  local c
  for c in "${components[@]}"; do
    if running "$c"; then return 1; fi
  done
}

wait_for() {
  local what=$1 deadline
  shift
  deadline=$(($(date +%s) + RESTART_TIMEOUT_SECONDS))
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || die "$NODE_NAME: $what not within ${RESTART_TIMEOUT_SECONDS}s"
    sleep "$POLL_SECONDS"
  done
}

# Manifests parked by a run that stopped half-way go back first: the kubelet runs only what is in MANIFESTS.
bring_back() {
  if compgen -G "$PARKED/*.yaml" >/dev/null; then
    mv "$PARKED"/*.yaml "$MANIFESTS/"
    wait_for "kube-apiserver running again" running kube-apiserver
    if [ -f "$MANIFESTS/etcd.yaml" ]; then
      wait_for "this node's etcd member healthy again (etcdctl endpoint health)" member_healthy
    fi
    wait_for "this node's API server ready again (https://127.0.0.1:$API_PORT/readyz)" api_ready
    changed "$NODE_NAME: control-plane pods started again from $MANIFESTS"
  fi
}

bring_back
info=$(expiration)
first=$(printf '%s\n' "$info" | earliest)
[ -n "$first" ] || die "$NODE_NAME: kubeadm certs check-expiration printed no expiration date"
if [ -z "$RENEW_BEFORE" ]; then
  ok "$NODE_NAME: earliest certificate expires $first"
elif [[ ! "$first" < "$RENEW_BEFORE" ]]; then
  ok "$NODE_NAME: earliest certificate expires $first, not before $RENEW_BEFORE: nothing to renew"
else
  run_logged "$CERTS_LOG" kubeadm certs renew all
  changed "$NODE_NAME: kubeadm certs renew all (the earliest expired $first, before $RENEW_BEFORE)"
  mkdir -p "$PARKED" && chmod 0700 "$PARKED"
  for c in "${components[@]}"; do
    if [ -f "$MANIFESTS/$c.yaml" ]; then mv "$MANIFESTS/$c.yaml" "$PARKED/"; fi
  done
  wait_for "the control-plane pods stopped" none_running
  bring_back
  info=$(expiration)
  ok "$NODE_NAME: earliest certificate now expires $(printf '%s\n' "$info" | earliest)"
fi
ok "certificates: $(printf '%s' "$info" | tr -d '\n' | tr -s ' ')"
