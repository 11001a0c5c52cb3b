#!/usr/bin/env bash
# Step: containerd's config and the kubelet's settings for ML images, day 1 and every later change.
# Only what changed is marked for a restart: containerd when its config changed, the kubelet when its
# KUBELET_EXTRA_ARGS line or its drop-in changed. Before the node is in the cluster nothing runs on it, so
# containerd restarts right away (kubeadm starts the kubelet); on a member the kubelet-restart step restarts
# in batches. Other lines of the kubelet env file, and flags mlcluster does not manage, are kept.
set -euo pipefail
: "${CONTAINERD_CONFIG_1_6:?}" "${CONTAINERD_CONFIG_1_7:?}" "${CONTAINERD_CONFIG_2:?}" "${CONTAINERD_EXPECTED:?}"
: "${PULL_DEADLINE:?}" "${KUBELET_FLAGS?}" "${MANAGED_FLAGS:?}" "${KUBELET_DROP_IN_FILE:?}" "${KUBELET_DROP_IN?}"
: "${PENDING_RESTARTS:?}"
detect_os
# A member (day 2) keeps running until its batch restarts it; before join nothing runs here yet.
member=false
[ -f /etc/kubernetes/kubelet.conf ] && member=true
mark_restart() {
  mkdir -p "$(dirname "$PENDING_RESTARTS")"
  grep -qsx "$1" "$PENDING_RESTARTS" || printf '%s\n' "$1" >>"$PENDING_RESTARTS"
}

# --- containerd ---------------------------------------------------------------------------------------
command -v containerd >/dev/null 2>&1 || die "containerd is not installed (the containerd step runs first)"
read_containerd_version
version=$CONTAINERD_VERSION major=$CONTAINERD_MAJOR minor=$CONTAINERD_MINOR
if [ "$major" -ge 2 ]; then
  line=2 config=$CONTAINERD_CONFIG_2
elif [ "$minor" -ge 7 ]; then
  line=1.7 config=$CONTAINERD_CONFIG_1_7
else
  line=1.6 config=$CONTAINERD_CONFIG_1_6
fi
if [ "$CONTAINERD_EXPECTED" != auto ]; then
  expected_major=${CONTAINERD_EXPECTED%%.*}
  expected_minor=${CONTAINERD_EXPECTED#*.}
  expected_minor=${expected_minor%%.*}
  if [ "$expected_major" != "$major" ] || { [ "$major" -lt 2 ] && [ "$expected_minor" != "$minor" ]; }; then
    die "containerd $version is installed but mlcluster:kubelet.containerdVersion says $CONTAINERD_EXPECTED (fix the setting so preview tells the truth)"
  fi
fi
if [ "$line" = 1.6 ]; then
  printf 'warning: containerd %s has no image_pull_progress_timeout (added in 1.7.0): the pull deadline %s is not enforced\n' >&2 \
    "$version" "$PULL_DEADLINE"
fi

mkdir -p /etc/containerd/conf.d
if write_if_changed /etc/containerd/config.toml "$config"; then
  if [ "$member" = true ]; then
    mark_restart containerd
    changed "/etc/containerd/config.toml written for containerd $version; containerd restarts in its batch"
  else
    systemctl restart containerd
    changed "/etc/containerd/config.toml written for containerd $version; containerd restarted (not in the cluster yet)"
  fi
else
  ok "/etc/containerd/config.toml up to date for containerd $version"
fi

# --- kubelet ------------------------------------------------------------------------------------------
is_managed() {
  local flag=${1%%=*} managed
  for managed in $MANAGED_FLAGS; do
    [ "$flag" = "$managed" ] && return 0
  done
  return 1
}

# The env file's KUBELET_EXTRA_ARGS with mlcluster's flags replaced and everyone else's kept, in order.
extra_args_line() {
  local current=$1 kept=() tokens=() i=0 token
  current=${current#KUBELET_EXTRA_ARGS=}
  current=${current#[\"\']}
  current=${current%[\"\']}
  read -r -a tokens <<<"$current"
  while [ "$i" -lt "${#tokens[@]}" ]; do
    token=${tokens[$i]}
    i=$((i + 1))
    if is_managed "$token"; then
      # "--flag value": the value goes with it; "--flag=value" is one token.
      if [[ $token != *=* ]] && [ "$i" -lt "${#tokens[@]}" ] && [[ ${tokens[$i]} != -* ]]; then
        i=$((i + 1))
      fi
      continue
    fi
    kept+=("$token")
  done
  local all="${kept[*]}"
  if [ -n "$KUBELET_FLAGS" ]; then
    all="${all:+$all }$KUBELET_FLAGS"
  fi
  printf 'KUBELET_EXTRA_ARGS="%s"' "$all"
}

env_file=$(kubelet_env_file)
# systemd's EnvironmentFile takes the last assignment: that is the line in effect, and the one rewritten.
current_line=""
if [ -f "$env_file" ]; then current_line=$(lines_matching '^KUBELET_EXTRA_ARGS=' "$env_file" | tail -n 1); fi
new_line=$(extra_args_line "$current_line")
if [ -f "$env_file" ] && [ -n "$current_line" ]; then
  content=$(NEW_LINE=$new_line awk '/^KUBELET_EXTRA_ARGS=/ { if (!done) print ENVIRON["NEW_LINE"]; done = 1; next } { print }' "$env_file")
elif [ -f "$env_file" ]; then
  content=$(cat "$env_file")
  content="${content:+$content
}$new_line"
else
  content=$new_line
fi

kubelet_changed=false
if write_if_changed "$env_file" "$content"; then
  kubelet_changed=true
  changed "$env_file: $new_line"
else
  ok "$env_file: $new_line"
fi

if [ -n "$KUBELET_DROP_IN" ]; then
  if write_if_changed "$KUBELET_DROP_IN_FILE" "$KUBELET_DROP_IN"; then
    kubelet_changed=true
    changed "$KUBELET_DROP_IN_FILE written"
  else
    ok "$KUBELET_DROP_IN_FILE up to date"
  fi
elif [ -f "$KUBELET_DROP_IN_FILE" ]; then
  rm -f "$KUBELET_DROP_IN_FILE"
  kubelet_changed=true
  changed "$KUBELET_DROP_IN_FILE removed (this kubelet reads flags)"
fi

if [ "$kubelet_changed" = true ]; then
  systemctl daemon-reload
  if [ "$member" = true ]; then
    mark_restart kubelet
    changed "kubelet restarts in its batch"
  else
    changed "kubelet settings in place before kubeadm starts the kubelet"
  fi
else
  ok "kubelet settings unchanged"
fi
