#!/usr/bin/env bash
# Step (on the first control plane): each node's labels and taints as the stack declares them, on day 2 too.
# kubeadm registers a Node with its labels and taints once; afterwards only the API changes them. DECLARED has one
# fact per line (components/render/node_metadata.py): `NODE node`, `NODE label KEY=VALUE`, `NODE taint
# KEY[=VALUE]:EFFECT`. A label or taint is removed only when this step set it before (the keys it recorded on the
# Node in two annotations) and the stack no longer declares it: what someone else set is never touched.
set -euo pipefail
: "${DECLARED:?}" "${NODES_TEMPLATE:?}" "${MANAGED_LABELS_ANNOTATION:?}" "${MANAGED_TAINTS_ANNOTATION:?}"
KUBECTL=(timeout 120 kubectl --kubeconfig /etc/kubernetes/admin.conf)

declare -A has_node=() label=() taint=() managed_labels=() managed_taints=()
declare -A want_labels=() want_taints=()
nodes=()

# The cluster as it is: one read for every node.
current=$("${KUBECTL[@]}" get nodes -o "go-template=$NODES_TEMPLATE") || die "cannot read the nodes from the API"
node=""
while read -r kind rest; do
  case $kind in
    node) node=$rest; has_node[$node]=1 ;;
    label) label["$node|${rest%%=*}"]=${rest#*=} ;;
    # key[=value]:effect, kept whole under key:effect (a taint's identity for kubectl).
    taint) taint["$node|${rest%%[=:]*}:${rest##*:}"]=$rest ;;
    managed-labels) managed_labels[$node]=$rest ;;
    managed-taints) managed_taints[$node]=$rest ;;
    "") ;;
    *) die "unexpected line from kubectl's template: $kind $rest" ;;
  esac
done <<<"$current"

# The stack's declaration, in its order.
while read -r node kind fact; do
  case $kind in
    node) nodes+=("$node"); want_labels[$node]=""; want_taints[$node]="" ;;
    label) want_labels[$node]+="$fact " ;;
    taint) want_taints[$node]+="$fact " ;;
    *) die "unexpected declaration: $node $kind $fact" ;;
  esac
done <<<"$DECLARED"

declare -A kept_labels=() kept_taints=()
missing=()
for node in "${nodes[@]}"; do
  if [ -z "${has_node[$node]:-}" ]; then
    missing+=("$node")
    continue
  fi
  label_args=() taint_args=() said=() keys=() ids=() kept_labels=() kept_taints=()
  read -r -a wanted <<<"${want_labels[$node]}"
  for pair in "${wanted[@]}"; do
    key=${pair%%=*} value=${pair#*=}
    keys+=("$key")
    kept_labels[$key]=1
    if [ "${label[$node|$key]+set}" != set ]; then
      label_args+=("$pair")
      said+=("label $pair added")
    elif [ "${label[$node|$key]}" != "$value" ]; then
      label_args+=("$pair")
      said+=("label $pair (was ${label[$node|$key]})")
    fi
  done
  IFS=, read -r -a before <<<"${managed_labels[$node]:-}"
  for key in "${before[@]}"; do
    if [ -z "${kept_labels[$key]:-}" ] && [ "${label[$node|$key]+set}" = set ]; then
      label_args+=("$key-")
      said+=("label $key=${label[$node|$key]} removed (no longer declared)")
    fi
  done
  read -r -a wanted <<<"${want_taints[$node]}"
  for spec in "${wanted[@]}"; do
    id=${spec%%[=:]*}:${spec##*:}
    ids+=("$id")
    kept_taints[$id]=1
    if [ "${taint[$node|$id]+set}" != set ]; then
      taint_args+=("$spec")
      said+=("taint $spec added")
    elif [ "${taint[$node|$id]}" != "$spec" ]; then
      taint_args+=("$spec")
      said+=("taint $spec (was ${taint[$node|$id]})")
    fi
  done
  IFS=, read -r -a before <<<"${managed_taints[$node]:-}"
  for id in "${before[@]}"; do
    if [ -z "${kept_taints[$id]:-}" ] && [ "${taint[$node|$id]+set}" = set ]; then
      taint_args+=("$id-")
      said+=("taint ${taint[$node|$id]} removed (no longer declared)")
    fi
  done
  if [ "${#label_args[@]}" -gt 0 ]; then
    "${KUBECTL[@]}" label node "$node" --overwrite "${label_args[@]}" >/dev/null || die "could not label node $node"
  fi
  if [ "${#taint_args[@]}" -gt 0 ]; then
    "${KUBECTL[@]}" taint node "$node" --overwrite "${taint_args[@]}" >/dev/null || die "could not taint node $node"
  fi
  # Recorded last: a step stopped before this leaves the old record, and the next run finishes the removals.
  record_labels=$(IFS=,; printf '%s' "${keys[*]}")
  record_taints=$(IFS=,; printf '%s' "${ids[*]}")
  if [ "${managed_labels[$node]:-}" != "$record_labels" ] || [ "${managed_taints[$node]:-}" != "$record_taints" ]; then
    "${KUBECTL[@]}" annotate node "$node" --overwrite "$MANAGED_LABELS_ANNOTATION=$record_labels" \
      "$MANAGED_TAINTS_ANNOTATION=$record_taints" >/dev/null || die "could not annotate node $node"
    [ "${#said[@]}" -gt 0 ] || said+=("records the ${#keys[@]} label(s) and ${#ids[@]} taint(s) mlcluster manages")
  fi
  if [ "${#said[@]}" -gt 0 ]; then
    for change in "${said[@]}"; do
      changed "$node: $change"
    done
  else
    ok "$node: labels and taints as declared"
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  die "no Node in the cluster for ${missing[*]}, which the stack has joined: was it deleted by hand? Its kubelet" \
    "registers it again when restarted (systemctl restart kubelet on that host); or set nodes[].gone, up, and" \
    "remove it from the stack"
fi
