#!/usr/bin/env bash
# Step (on the first control plane): keep the nodes that failed acceptance out of new work. FAILED gets the
# quarantine taint (NoSchedule: what runs there keeps running), PASSED loses it if it has it; no other node and no
# other taint is touched. Both lists come from the verdicts of the acceptance step (components/render/acceptance.py).
set -euo pipefail
: "${TAINT_KEY:?}" "${TAINT_VALUE:?}" "${TAINT_EFFECT:?}"
FAILED=${FAILED:-} PASSED=${PASSED:-}
KUBECTL=(timeout 60 kubectl --kubeconfig /etc/kubernetes/admin.conf)

# The node's value of the quarantine taint ('' when it has none).
quarantine_value() {
  local taints
  taints=$("${KUBECTL[@]}" get node "$1" -o 'jsonpath={.spec.taints}') || die "cannot read the taints of node $1"
  [ -n "$taints" ] || return 0
  printf '%s' "$taints" | tr '{' '\n' | awk -v key="\"key\":\"$TAINT_KEY\"" -v effect="\"effect\":\"$TAINT_EFFECT\"" '
    index($0, key) && index($0, effect) {
      if (match($0, /"value":"[^"]*"/)) print substr($0, RSTART + 9, RLENGTH - 10); else print "(none)"
    }'
}

read -r -a failed <<<"$FAILED"
read -r -a passed <<<"$PASSED"
for node in "${failed[@]}"; do
  value=$(quarantine_value "$node")
  if [ "$value" = "$TAINT_VALUE" ]; then
    ok "$node: already quarantined ($TAINT_KEY=$TAINT_VALUE:$TAINT_EFFECT)"
  else
    "${KUBECTL[@]}" taint nodes "$node" "$TAINT_KEY=$TAINT_VALUE:$TAINT_EFFECT" --overwrite >/dev/null ||
      die "could not taint node $node"
    changed "$node: quarantined ($TAINT_KEY=$TAINT_VALUE:$TAINT_EFFECT): it failed acceptance"
  fi
done
for node in "${passed[@]}"; do
  value=$(quarantine_value "$node")
  if [ -z "$value" ]; then
    ok "$node: not quarantined"
  else
    "${KUBECTL[@]}" taint nodes "$node" "$TAINT_KEY:$TAINT_EFFECT-" >/dev/null || die "could not untaint node $node"
    changed "$node: quarantine lifted: it passed acceptance"
  fi
done
