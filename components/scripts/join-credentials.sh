#!/usr/bin/env bash
# Step (on the first control plane): a bootstrap token and the CA hash for the nodes that join, and, when a
# control plane is among those still to join, a certificate key. Every joining node reads them on stdin. Its
# stdout is secret: the program marks it so and logs nothing. FOR_NODES and MINTED_FOR are part of the step so
# that a node added, or a join retried in a later mint window, re-runs it for fresh credentials
# (components/render/join_credentials.py); TOKEN_TTL is how long the token lives.
set -euo pipefail
: "${FOR_NODES:?}" "${MINTED_FOR:?}" "${TOKEN_TTL:?}"
CONTROL_PLANES=${CONTROL_PLANES:-}
read -r -a nodes <<<"$FOR_NODES"
# Nodes that are already members need no credential: when all are, print none (their join steps report
# ok), so a re-run leaves no fresh token behind.
missing=() with_key=false members=''
for node in "${nodes[@]}"; do
  found=$(KUBECONFIG=/etc/kubernetes/admin.conf kubectl get node "$node" --ignore-not-found -o name) ||
    die "cannot read node $node from the API"
  case " $CONTROL_PLANES " in *" $node "*) control_plane=true ;; *) control_plane=false ;; esac
  if [ -n "$found" ] && [ "$control_plane" = true ]; then
    # A control plane's join registers its Node, then adds its etcd member, then labels it a control plane: a
    # Node without both is a join that did not finish. Its host resets itself and joins again (with the
    # certificate key only a missing control plane gets); its Node goes now, because the kubelet that
    # registered it keeps it Ready and a join stops at a Ready Node of the same name.
    if [ -z "$members" ]; then
      members=$(etcd_ctl member list -w simple) || die "etcd member list failed on this control plane"
    fi
    member=$(awk -F', ' -v name="$node" '$3 == name { print $1 }' <<<"$members")
    labels=$(KUBECONFIG=/etc/kubernetes/admin.conf kubectl get node "$node" -o 'jsonpath={.metadata.labels}') ||
      die "cannot read the labels of node $node"
    why=''
    if [ -z "$member" ]; then
      why='no etcd member'
    elif [[ $labels != *'"node-role.kubernetes.io/control-plane"'* ]]; then
      why='no control-plane label'
    fi
    if [ -n "$why" ]; then
      KUBECONFIG=/etc/kubernetes/admin.conf kubectl delete node "$node" >/dev/null
      changed "$node has a Node but $why (a control-plane join that did not finish): deleted the stale Node; $node resets and joins again" >&2
      found=''
    fi
  fi
  if [ -z "$found" ]; then
    missing+=("$node")
    if [ "$control_plane" = true ]; then with_key=true; fi
  fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
join=$(run_long kubeadm token create --ttl "$TOKEN_TTL" \
  --description "mlcluster join of ${#missing[@]} node(s), ${MINTED_FOR}" --print-join-command)
token=$(grep -oE -- '--token [^ ]+' <<<"$join" | awk '{print $2}')
ca_hash=$(grep -oE -- '--discovery-token-ca-cert-hash [^ ]+' <<<"$join" | awk '{print $2}')
if [ -z "$token" ] || [ -z "$ca_hash" ]; then
  die "could not read a token from 'kubeadm token create'"
fi
key=
if [ "$with_key" = true ]; then
  key=$(run_long kubeadm init phase upload-certs --upload-certs 2>/dev/null | tail -n 1) ||
    die "'kubeadm init phase upload-certs' failed: no certificate key for the joining control planes"
  [[ $key =~ ^[0-9a-f]{64}$ ]] || die "could not read the certificate key from 'kubeadm init phase upload-certs'"
fi
# Credentials are printed last, after every command that can fail: pulumi-command puts all of a failed
# step's stdout into its error text, whatever `logging` says.
printf '%s\n%s\n' "$token" "$ca_hash"
if [ -n "$key" ]; then
  printf '%s\n' "$key"
fi
