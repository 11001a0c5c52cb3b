#!/usr/bin/env bash
# Step (control planes of a stack with cluster.apiVip): keepalived holds the API VIP on one control plane, haproxy
# on each spreads the API over the ready API servers (components/render/api_vip.py says why this shape).
# Runs before kubeadm init / join: the VIP is the controlPlaneEndpoint every node and kubeconfig uses.
set -euo pipefail
: "${NODE_NAME:?}" "${VIP_ADDRESS:?}" "${VIP_PREFIX:?}" "${VIP_PORT:?}" "${FIRST_CONTROL_PLANE:?}"
: "${INTERFACE_PLACEHOLDER:?}" "${KEEPALIVED_CONF:?}" "${HAPROXY_CFG:?}" "${CHECK_SCRIPT:?}" "${CHECK_SCRIPT_PATH:?}"
: "${LEGACY_CHECK_SCRIPT:?}" "${SELINUX_BOOLEANS?}"
VIP_INTERFACE=${VIP_INTERFACE:-}
ENDPOINT_NAME=${ENDPOINT_NAME:-}
VIP_WAIT_SECONDS=${VIP_WAIT_SECONDS:-60}
detect_os
keepalived_conf=/etc/keepalived/keepalived.conf
haproxy_cfg=/etc/haproxy/haproxy.cfg
check_script=$CHECK_SCRIPT_PATH

# The interface the VIP goes on: the one holding it now, the configured one, or the one whose subnet holds it (a
# route without a gateway). A route through a gateway means the VIP is on no network this node is on.
held_here=$(ip -o -4 addr show to "$VIP_ADDRESS/32")
if [ -n "$VIP_INTERFACE" ]; then
  ip -o link show dev "$VIP_INTERFACE" >/dev/null 2>&1 ||
    die "cluster.apiVip.interface $VIP_INTERFACE: no such interface on $NODE_NAME"
  interface=$VIP_INTERFACE
elif [ -n "$held_here" ]; then
  interface=${held_here#*: }
  interface=${interface%% *}
else
  route=$(ip -o -4 route get "$VIP_ADDRESS") || die "no route to cluster.apiVip $VIP_ADDRESS on $NODE_NAME"
  case $route in
    *" via "*)
      die "cluster.apiVip $VIP_ADDRESS is not on a subnet of $NODE_NAME (its route goes through a gateway: $route):" \
        "keepalived moves the VIP only among control planes on one network; choose an address on their subnet"
      ;;
  esac
  interface=${route#* dev }
  interface=${interface%% *}
fi
ok "the VIP goes on $interface"

if [ -n "$ENDPOINT_NAME" ]; then
  resolved=$(getent ahostsv4 "$ENDPOINT_NAME") ||
    die "cluster.controlPlaneEndpoint $ENDPOINT_NAME does not resolve on $NODE_NAME (it must resolve to $VIP_ADDRESS)"
  [[ $'\n'$resolved == *$'\n'"$VIP_ADDRESS "* ]] ||
    die "cluster.controlPlaneEndpoint $ENDPOINT_NAME resolves to ${resolved%% *}, not to cluster.apiVip $VIP_ADDRESS"
  ok "$ENDPOINT_NAME resolves to $VIP_ADDRESS"
fi

# The addresses in keepalived.conf's unicast_peer block (read from stdin), one per line.
unicast_peers() {
  sed -n '/^    unicast_peer {$/,/^    }$/{/^        [^ #]/s/^ *//p}'
}

# Someone on the network answers ARP for the address: a connection attempt makes the kernel ask, then the neighbour
# table says whether anyone answered. Only the first control plane asks, and only before its keepalived carries this
# VIP: the others start after it, when the VIP rightly answers.
current_conf=""
if [ -f "$keepalived_conf" ]; then
  current_conf=$(cat "$keepalived_conf") || die "cannot read $keepalived_conf"
fi
if [ "$FIRST_CONTROL_PLANE" = true ] && [[ $current_conf != *" $VIP_ADDRESS/$VIP_PREFIX dev "* ]] && [ -z "$held_here" ]; then
  tcp_connects "$VIP_ADDRESS" "$VIP_PORT" 3 || true
  neighbour=$(ip -4 neigh show to "$VIP_ADDRESS")
  if [[ $neighbour == *lladdr* ]]; then
    die "cluster.apiVip $VIP_ADDRESS is in use: another machine answers for it ($neighbour); choose a free address"
  fi
  ok "$VIP_ADDRESS is free"
fi

keepalived_version=$(pkg_version keepalived)
haproxy_version=$(pkg_version haproxy)
if [ -n "$keepalived_version" ] && [ -n "$haproxy_version" ]; then
  ok "keepalived and haproxy installed"
else
  pkg_refresh >/dev/null
  pkg_install keepalived haproxy >/dev/null
  changed "keepalived and haproxy installed"
fi
firewall_open "$VIP_PORT/tcp"
firewall_allow_vrrp
# SELinux (enforcing or permissive): haproxy may reach the API servers' port (components/render/api_vip.py).
for boolean in $SELINUX_BOOLEANS; do
  selinux_boolean_on "$boolean"
done

# Each file is checked by its own program before it replaces the one in use, so a bad file never stops a
# running load balancer.
staged=$(mktemp -d)
trap 'rm -rf "$staged"' EXIT
if write_if_changed "$check_script" "$CHECK_SCRIPT" 0755; then
  changed "$check_script written"
else
  ok "$check_script up to date"
fi
# keepalived may execute a check only where its policy labels scripts for it (the file's own label, not its path).
selinux_relabel "${check_script%/*}"
printf '%s\n' "$HAPROXY_CFG" >"$staged/haproxy.cfg"
haproxy_check=$(haproxy -c -q -f "$staged/haproxy.cfg" 2>&1) || die "haproxy refuses the rendered config: $haproxy_check"
keepalived_text=${KEEPALIVED_CONF//"$INTERFACE_PLACEHOLDER"/$interface}

# A control plane this change drops may still run keepalived: the engine updates the remaining control planes first
# and runs the leaving one's reset, which stops its keepalived and haproxy, only at the end of the `up`, after its
# drain (minutes when pods take their grace period). A backup that stops hearing the holder's adverts takes the VIP
# itself after three missed ones, and the network's ARP entries then flap between two holders. So a dropped peer
# whose haproxy still answers on the VIP's port (every control plane's firewall opens it) stays a peer until the next
# change of this step finds it stopped.
peers_block=$'    unicast_peer {\n'
if [[ $keepalived_text == *"$peers_block"* ]]; then
  rendered_peers=$'\n'$(unicast_peers <<<"$keepalived_text")$'\n'
  current_peers=$(unicast_peers <<<"$current_conf")
  kept_peers=""
  while IFS= read -r peer; do
    [ -n "$peer" ] && [[ $rendered_peers != *$'\n'"$peer"$'\n'* ]] || continue
    if tcp_connects "$peer" "$VIP_PORT" 2; then
      kept_peers+="        # mlcluster: $peer left the control planes; a peer while its keepalived may still run"$'\n'
      kept_peers+="        $peer"$'\n'
      ok "$peer stays a VRRP peer while its haproxy answers (a control plane that leaves stops both at the end" \
        "of this run; the next change of this step drops it)"
    fi
  done <<<"$current_peers"
  keepalived_text=${keepalived_text/"$peers_block"/"$peers_block$kept_peers"}
fi
printf '%s\n' "$keepalived_text" >"$staged/keepalived.conf"
keepalived_check=$(keepalived -t -f "$staged/keepalived.conf" 2>&1) ||
  die "keepalived refuses the rendered config: $keepalived_check"

# A changed file is reloaded, not restarted: keepalived keeps the VIP where it is, haproxy its open connections.
apply_config() {
  local service=$1 path=$2 content=$3
  if write_if_changed "$path" "$content"; then
    # Its stdout lists the links it made; its errors stay on stderr, where a failed step shows them.
    systemctl enable "$service" >/dev/null
    if systemctl is-active --quiet "$service"; then
      systemctl reload "$service"
      changed "$path written, $service reloaded"
    else
      systemctl start "$service"
      changed "$path written, $service started"
    fi
  else
    service_enable_now "$service"
  fi
}
haproxy_text=$(cat "$staged/haproxy.cfg")
keepalived_text=$(cat "$staged/keepalived.conf")
apply_config haproxy "$haproxy_cfg" "$haproxy_text"
apply_config keepalived "$keepalived_conf" "$keepalived_text"
if [ "$LEGACY_CHECK_SCRIPT" != "$check_script" ] && [ -e "$LEGACY_CHECK_SCRIPT" ]; then
  rm -f "$LEGACY_CHECK_SCRIPT"
  changed "$LEGACY_CHECK_SCRIPT removed (the check lives in ${check_script%/*})"
fi

# The VIP answers when some control plane holds it and its haproxy accepts connections. Before the first
# control plane's init no API server answers yet; the connection alone is what this step vouches for.
deadline=$((SECONDS + VIP_WAIT_SECONDS))
next_report=$((SECONDS + 10))
until tcp_connects "$VIP_ADDRESS" "$VIP_PORT" 2; do
  [ "$SECONDS" -lt "$deadline" ] ||
    die "the VIP $VIP_ADDRESS:$VIP_PORT does not answer after ${VIP_WAIT_SECONDS}s: no control plane holds it" \
      "(journalctl -u keepalived on the control planes; is VRRP, IP protocol 112, allowed between them?)"
  if [ "$SECONDS" -ge "$next_report" ]; then
    waiting "for a control plane to hold $VIP_ADDRESS and answer on $VIP_PORT"
    next_report=$((SECONDS + 10))
  fi
  sleep 1
done
held_here=$(ip -o -4 addr show to "$VIP_ADDRESS/32")
if [ -n "$held_here" ]; then
  ok "$NODE_NAME holds the VIP $VIP_ADDRESS; haproxy answers on $VIP_PORT"
else
  ok "the VIP $VIP_ADDRESS answers on $VIP_PORT (held by another control plane)"
fi
