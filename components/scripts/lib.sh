# shellcheck shell=bash
# Shared by every node step: output conventions and the one place OS-family differences live.
# Each step is sent as: settings (shell assignments) + this library + the step body.

ok() { printf 'ok: %s\n' "$*"; }
changed() { printf 'changed: %s\n' "$*"; }
# A long wait says what it waits for now and then: the reader sees it is alive, and the bytes keep an SSH session
# through a NAT or bastion with an idle timeout from being cut.
waiting() { printf 'waiting: %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
# A command that fails inside $(…) fails the command substitution's caller too (bash leaves errexit off there by
# default): a failed check must stop the step, never read as an empty answer.
shopt -s inherit_errexit

# Long operations never hang a `pulumi up`: every one runs under a deadline.
MLCLUSTER_LONG_TIMEOUT=${MLCLUSTER_LONG_TIMEOUT:-900}
run_long() { timeout "$MLCLUSTER_LONG_TIMEOUT" "$@"; }

detect_os() {
  [ -r /etc/os-release ] || die "/etc/os-release not found: cannot tell the OS family"
  local like
  # shellcheck source=/dev/null
  OS_ID=$(. /etc/os-release && printf '%s' "${ID:-}")
  # shellcheck source=/dev/null
  OS_VERSION_ID=$(. /etc/os-release && printf '%s' "${VERSION_ID:-}")
  # shellcheck source=/dev/null
  like=$(. /etc/os-release && printf '%s' "${ID_LIKE:-}")
  case " $OS_ID $like " in
    *" debian "*|*" ubuntu "*) OS_FAMILY=deb ;;
    *" rhel "*|*" fedora "*|*" centos "*|*" rocky "*|*" almalinux "*) OS_FAMILY=rpm ;;
    *) die "unsupported OS '$OS_ID $OS_VERSION_ID' (supported: Debian/Ubuntu, RHEL/Rocky/Alma)" ;;
  esac
}

# containerd's release as `containerd --version` prints it: "containerd github.com/containerd/containerd v1.7.24
# <commit>" (distro builds drop the leading v). Sets CONTAINERD_VERSION, CONTAINERD_MAJOR and CONTAINERD_MINOR.
read_containerd_version() {
  local printed
  printed=$(containerd --version)
  CONTAINERD_VERSION=$(printf '%s\n' "$printed" | awk '{print $3}')
  CONTAINERD_VERSION=${CONTAINERD_VERSION#v}
  CONTAINERD_MAJOR=${CONTAINERD_VERSION%%.*}
  CONTAINERD_MINOR=${CONTAINERD_VERSION#*.}
  CONTAINERD_MINOR=${CONTAINERD_MINOR%%.*}
  [[ $CONTAINERD_MAJOR =~ ^[0-9]+$ && $CONTAINERD_MINOR =~ ^[0-9]+$ ]] ||
    die "cannot read the version of containerd from: $printed"
}

# The installed containerd against what Kubernetes $K8S_MINOR needs ($CONTAINERD_MINIMUM, major.minor, and its
# reason; components/config/support.py NODE_NEEDS): a node that cannot run the minor stops here.
require_containerd_minimum() {
  : "${K8S_MINOR:?}" "${CONTAINERD_MINIMUM:?}" "${CONTAINERD_MINIMUM_REASON:?}"
  read_containerd_version
  local want_major=${CONTAINERD_MINIMUM%%.*} want_minor=${CONTAINERD_MINIMUM#*.}
  if [ "$CONTAINERD_MAJOR" -lt "$want_major" ] ||
    { [ "$CONTAINERD_MAJOR" -eq "$want_major" ] && [ "$CONTAINERD_MINOR" -lt "$want_minor" ]; }; then
    die "containerd $CONTAINERD_VERSION is installed; Kubernetes $K8S_MINOR needs containerd >= $CONTAINERD_MINIMUM ($CONTAINERD_MINIMUM_REASON): upgrade containerd, then run up again"
  fi
  ok "containerd $CONTAINERD_VERSION (Kubernetes $K8S_MINOR needs >= $CONTAINERD_MINIMUM)"
}

# grep's lines, where "no line matches" (1) is an answer and only 2 (unreadable file, bad pattern) a failure.
lines_matching() { grep "$@" || [ $? -eq 1 ]; }

# Writes $2 to $1 (mode $3) only when the content differs; returns 0 when it changed the file.
write_if_changed() {
  local path=$1 content mode=${3:-0644}
  # Command substitution drops trailing newlines on both sides, so the comparison is stable.
  content=$(printf '%s' "$2")
  if [ -f "$path" ]; then
    local current
    current=$(cat "$path") || die "cannot read $path"
    [ "$current" != "$content" ] || return 1
  fi
  # Called as `if write_if_changed …` or `… || true`, where errexit is off: every failure stops the step here.
  local tmp
  mkdir -p "$(dirname "$path")" || die "cannot create $(dirname "$path")"
  tmp=$(mktemp "$path.XXXXXX") || die "cannot write next to $path"
  { printf '%s\n' "$content" >"$tmp" && chmod "$mode" "$tmp" && mv -f "$tmp" "$path"; } || die "cannot write $path"
  return 0
}

# The end of a kubeadm log for an error report, with every credential-shaped string masked: kubeadm prints
# bootstrap tokens ([a-z0-9]{6}.[a-z0-9]{16}) in several forms ("Using token: …", join commands), and
# certificate keys and CA hashes as 64 hex digits.
redacted_tail() {
  sed -E 's/[a-z0-9]{6}\.[a-z0-9]{16}/[redacted token]/g; s/[0-9a-f]{64}/[redacted]/g' "$1" | tail -n 30
}

pkg_refresh() {
  case $OS_FAMILY in
    deb) run_long apt-get update -q ;;
    rpm) run_long dnf makecache -q ;;
  esac
}

pkg_install() {
  case $OS_FAMILY in
    deb) DEBIAN_FRONTEND=noninteractive run_long apt-get install -y -q "$@" ;;
    rpm) run_long dnf install -y -q "$@" ;;
  esac
}

# Prints the installed version of a package, or nothing.
pkg_version() {
  local out status=0
  case $OS_FAMILY in
    deb)
      # dpkg-query: 1 is "no such package" (the answer: nothing), 2 a database it could not read (a failure).
      out=$(dpkg-query -W -f='${Version}' "$1" 2>&1) || status=$?
      if [ "$status" -eq 0 ]; then printf '%s' "$out"; elif [ "$status" -ne 1 ]; then
        die "dpkg-query failed ($status) for $1: $out"
      fi
      ;;
    rpm)
      # rpm -q: 1 with "package … is not installed" is the answer; 1 for anything else is a failure.
      out=$(rpm -q --qf '%{VERSION}' "$1" 2>&1) || status=$?
      if [ "$status" -eq 0 ]; then printf '%s' "$out"; elif [[ $out != *"is not installed"* ]]; then
        die "rpm -q failed ($status) for $1: $out"
      fi
      ;;
  esac
}

# The package holding the headers of kernel $1 (what out-of-tree modules such as the NVIDIA driver build against).
kernel_headers_package() {
  case $OS_FAMILY in
    deb) printf 'linux-headers-%s' "$1" ;;
    rpm) printf 'kernel-devel-%s' "$1" ;;
  esac
}

# The file whose KUBELET_EXTRA_ARGS line the kubelet's systemd drop-in reads.
kubelet_env_file() {
  case $OS_FAMILY in
    deb) printf '/etc/default/kubelet' ;;
    rpm) printf '/etc/sysconfig/kubelet' ;;
  esac
}

service_enable_now() {
  if systemctl is-enabled --quiet "$1" && systemctl is-active --quiet "$1"; then
    ok "$1 enabled and running"
  else
    systemctl enable --now "$1"
    changed "$1 enabled and started"
  fi
}

# Ports a node serves, per role (kubernetes.io/docs/reference/networking/ports-and-protocols) and for Calico's
# VXLANCrossSubnet pools: BGP, VXLAN, Typha (docs.tigera.io/calico/latest/getting-started/kubernetes/requirements).
# shellcheck disable=SC2034 # read by the kubeadm steps
CONTROL_PLANE_PORTS="6443/tcp 2379-2380/tcp 10250/tcp 10257/tcp 10259/tcp"
# shellcheck disable=SC2034
WORKER_PORTS="10250/tcp 10256/tcp 30000-32767/tcp"
# shellcheck disable=SC2034
CALICO_PORTS="179/tcp 4789/udp 5473/tcp"

# Which host firewall is filtering: firewalld (RHEL-family default), ufw (Ubuntu), or none.
firewall_in_use() {
  local state status=0
  state=$(firewall-cmd --state 2>&1) || status=$?
  # firewall-cmd --state: 0 running, 252 not running, 127 not installed; anything else is a failure to ask.
  case $status in
    0) printf firewalld && return ;;
    252 | 127) ;;
    *) die "firewall-cmd --state failed ($status): $state" ;;
  esac
  status=0
  state=$(ufw status 2>&1) || status=$?
  case $status in
    0) if grep -qx 'Status: active' <<<"$state"; then printf ufw && return; fi ;;
    127) ;;
    *) die "ufw status failed ($status): $state" ;;
  esac
  printf none
}

# Opens each PORT/PROTO (a range as FIRST-LAST) in the active firewall, permanently; a firewall that is
# not running is left alone (nothing filters, and enabling it later is the admin's call).
firewall_open() {
  local firewall port rule added opened=()
  firewall=$(firewall_in_use)
  case $firewall in
    firewalld)
      # Permanent (survives a reboot) and runtime (what filters now) are separate sets in firewalld.
      for port in "$@"; do
        if ! firewall-cmd --permanent --query-port="$port" >/dev/null 2>&1; then
          firewall-cmd --permanent --add-port="$port" >/dev/null
          opened+=("$port")
        elif ! firewall-cmd --query-port="$port" >/dev/null 2>&1; then
          opened+=("$port")
        fi
      done
      if [ "${#opened[@]}" -gt 0 ]; then
        firewall-cmd --reload >/dev/null
      fi
      ;;
    ufw)
      added=$(ufw show added)
      for port in "$@"; do
        rule=${port/-/:}
        if ! grep -qxF "ufw allow $rule" <<<"$added"; then
          ufw allow "$rule" >/dev/null
          opened+=("$port")
        fi
      done
      ;;
    none)
      ok "no active host firewall (firewalld, ufw): nothing to open"
      return 0
      ;;
  esac
  if [ "${#opened[@]}" -gt 0 ]; then
    changed "$firewall opens ${opened[*]}"
  else
    ok "$firewall opens $*"
  fi
}

# Whether $1:$2 accepts a TCP connection within $3 seconds (bash's /dev/tcp: no nc or curl needed on the node).
tcp_connects() {
  # shellcheck disable=SC2016 # $1 and $2 expand in the inner bash
  timeout "$3" bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null
}

# VRRP (IP protocol 112, keepalived's adverts between the control planes) through the active firewall. ufw has no
# rule for a protocol without ports: its before.rules file takes one line, which an administrator adds (said how).
firewall_allow_vrrp() {
  local firewall before_rules=/etc/ufw/before.rules current
  firewall=$(firewall_in_use)
  case $firewall in
    firewalld)
      if firewall-cmd --permanent --query-protocol=vrrp >/dev/null 2>&1 && firewall-cmd --query-protocol=vrrp >/dev/null 2>&1; then
        ok "firewalld allows VRRP"
      else
        firewall-cmd --permanent --add-protocol=vrrp >/dev/null
        firewall-cmd --reload >/dev/null
        changed "firewalld allows VRRP"
      fi
      ;;
    ufw)
      current=""
      [ ! -f "$before_rules" ] || current=$(cat "$before_rules") || die "cannot read $before_rules"
      [[ $current == *"-p vrrp -j ACCEPT"* ]] ||
        die "ufw is active and drops VRRP (IP protocol 112), which keepalived needs between the control planes: add" \
          "'-A ufw-before-input -p vrrp -j ACCEPT' before the COMMIT line of $before_rules, run 'ufw reload', then up again"
      ok "ufw allows VRRP ($before_rules)"
      ;;
    none) ok "no active host firewall (firewalld, ufw): VRRP passes" ;;
  esac
}

# SELinux stance: mlcluster never changes the mode. Enforcing and permissive both work (containerd.io requires
# container-selinux, the policy that labels containers); the mode is reported so a denial can be traced.
selinux_mode() {
  local mode status=0
  mode=$(getenforce 2>&1) || status=$?
  # Without the SELinux tools (127) there is no SELinux to report; any other failure is a failure to ask.
  case $status in
    0) printf '%s' "$mode" ;;
    127) printf 'Disabled' ;;
    *) die "getenforce failed ($status): $mode" ;;
  esac
}

# An SELinux boolean on, for good (-P), where SELinux is on (enforcing or permissive: a host switched to enforcing
# later keeps working). Check, then act.
selinux_boolean_on() {
  local name=$1 current mode
  mode=$(selinux_mode)
  [ "$mode" != Disabled ] || return 0
  current=$(getsebool "$name") || die "getsebool $name failed: $current"
  if [[ $current == *"--> on" ]]; then
    ok "SELinux boolean $name on"
  else
    run_long setsebool -P "$name" 1 || die "setsebool -P $name 1 failed"
    changed "SELinux boolean $name turned on"
  fi
}

# Files under $1 get the labels the loaded policy's file contexts give them (new files inherit their directory's,
# a new filesystem has none). restorecon -n reports what it would change: nothing to report, nothing to do.
selinux_relabel() {
  local path=$1 pending mode count
  mode=$(selinux_mode)
  [ "$mode" != Disabled ] || return 0
  pending=$(restorecon -nRv "$path") || die "restorecon -nRv $path failed: $pending"
  if [ -z "$pending" ]; then
    ok "SELinux labels of $path as the policy gives them"
  else
    count=$(printf '%s\n' "$pending" | wc -l)
    run_long restorecon -R "$path" || die "restorecon -R $path failed"
    changed "SELinux labels of $path restored ($count path(s))"
  fi
}

# Kubernetes packages ($2…: kubeadm, kubelet, kubectl) at version $1, past the DEB hold / RPM repository exclude
# that keeps routine upgrades from moving them; callers hold them again (kube_packages_hold).
kube_packages_install() {
  local version=$1
  shift
  case $OS_FAMILY in
    deb)
      # After the refresh: apt-mark cannot find packages of a repository apt has not read yet.
      pkg_refresh
      apt-mark unhold "$@" >/dev/null
      if [ -n "${BUNDLE_DEB_DIGESTS:-}" ]; then
        bundle_debs_install --allow-change-held-packages "${@/%/=$version-*}"
      else
        pkg_install --allow-change-held-packages "${@/%/=$version-*}"
      fi
      ;;
    rpm) pkg_install --disableexcludes=kubernetes "${@/%/-$version}" ;;
  esac
}

# Air gap: apt downloads the packages ($@, apt-get install arguments) into a cache of their own, each one the
# lockfile lists (BUNDLE_DEB_DIGESTS: name<TAB>sha256 lines) is checked against its digest, and apt installs those
# very files (it takes a cached package whose hash matches its index instead of fetching it again). A package whose
# bytes differ stops the step, named, before anything is installed; one the lockfile does not list (a dependency
# from the site's OS mirror) is apt's to check against its signed index.
bundle_debs_install() {
  local cache=/var/cache/mlcluster/apt-archives deb file name expected actual checked=0
  local -A digest_of=()
  while IFS=$'\t' read -r name expected; do
    [ -n "$name" ] && digest_of[$name]=$expected
  done <<<"$BUNDLE_DEB_DIGESTS"
  rm -rf "$cache" && mkdir -p "$cache/partial"
  DEBIAN_FRONTEND=noninteractive run_long apt-get install -y -q --download-only -o "Dir::Cache::Archives=$cache" "$@"
  for deb in "$cache"/*.deb; do
    [ -e "$deb" ] || continue
    file=$(basename "$deb")
    name=${file%%_*}
    expected=${digest_of[$name]:-}
    [ -n "$expected" ] || continue
    actual=$(sha256sum "$deb" | cut -d' ' -f1)
    [ "$actual" = "$expected" ] ||
      die "package deb:$name: $file from the seed has sha256 $actual, the lockfile says $expected: nothing was installed"
    checked=$((checked + 1))
  done
  [ "$checked" -gt 0 ] || die "apt downloaded none of the bundle's packages for $*: is the seed's repository in the sources?"
  DEBIAN_FRONTEND=noninteractive run_long apt-get install -y -q -o "Dir::Cache::Archives=$cache" "$@"
  ok "$checked package(s) matched the lockfile's digests before install"
}

# Holds each of the packages ($@) not held yet, saying which (check-then-act: a hold that failed in an earlier
# run is made in the next). RPM needs nothing: the repository file excludes the packages from every transaction
# without --disableexcludes.
kube_packages_hold() {
  local held pkg
  case $OS_FAMILY in
    deb)
      held=$(apt-mark showhold)
      for pkg in "$@"; do
        if grep -qx "$pkg" <<<"$held"; then
          ok "$pkg held"
        else
          apt-mark hold "$pkg" >/dev/null
          changed "$pkg held"
        fi
      done
      ;;
    rpm) ;;
  esac
}

# Prints yes when the configured repositories offer package $1 at Kubernetes version $2, no when they do not; a
# repository that cannot be read stops the step (a mirror that timed out is not "not offered").
kube_package_offer() {
  local out status=0
  case $OS_FAMILY in
    deb)
      out=$(apt-cache madison "$1" 2>&1) || die "apt-cache madison $1 failed: $out"
      if grep -q "| *$2-" <<<"$out"; then printf yes; else printf no; fi
      ;;
    rpm)
      # dnf list: 1 with "No matching Packages" is the answer; 1 for anything else is a failure to ask.
      out=$(dnf list --showduplicates --disableexcludes=kubernetes -q "$1-$2" 2>&1) || status=$?
      if [ "$status" -eq 0 ]; then
        printf yes
      elif [[ $out == *"No matching Packages"* ]]; then
        printf no
      else
        die "dnf list $1-$2 failed ($status): $out"
      fi
      ;;
  esac
}

# Dies, naming the key, node $2 and its OS family, unless this node's repositories offer kubeadm, kubelet and
# kubectl at version $1: each node asks its own repository (families, mirrors and proxies differ by node).
kube_packages_offered() {
  local pkg offer
  if [ "$OS_FAMILY" = deb ]; then
    pkg_refresh >/dev/null
  fi
  for pkg in kubeadm kubelet kubectl; do
    offer=$(kube_package_offer "$pkg" "$1")
    [ "$offer" = yes ] ||
      die "mlcluster:kubernetesVersion: $pkg $1 is not offered by the configured $OS_FAMILY repository of $2 ($OS_ID $OS_VERSION_ID): the upgrade stops before any node moves"
  done
  ok "kubeadm kubelet kubectl $1 offered by the $OS_FAMILY repository"
}

# The Kubernetes version (1.34.2) of installed package $1, or nothing.
kube_package_version() {
  local version
  version=$(pkg_version "$1")
  printf '%s' "${version%%-*}"
}

# The version (1.34.2) the cluster's API server reports, read with the node's admin kubeconfig.
kube_cluster_version() {
  kubectl --kubeconfig /etc/kubernetes/admin.conf get --raw /version |
    sed -n 's/.*"gitVersion": *"v\([0-9][0-9.]*\)".*/\1/p'
}

# Runs a long command ($2…) with its output in the root-only log $1 (kubeadm prints credentials); on failure the
# redacted end of the log goes to stderr and the step stops.
run_logged() {
  local log=$1
  shift
  mkdir -p "$(dirname "$log")"
  if ! (umask 077 && run_long "$@" >"$log" 2>&1); then
    redacted_tail "$log" >&2
    die "$* failed (full log on the node: $log)"
  fi
}

# The etcd container of this control plane's kube-system static pod: scoped to that pod, so a user's container
# that happens to be called etcd (a Milvus or APISIX etcd on an untainted control plane) is never picked.
etcd_container() {
  local found
  found=$(crictl ps --name '^etcd$' --label io.kubernetes.pod.namespace=kube-system --state running -q) ||
    die "crictl ps failed: cannot look for this control plane's etcd container"
  [ -n "$found" ] || die "no running etcd container of the kube-system etcd pod on this node"
  printf '%s\n' "${found%%$'\n'*}"
}

# Verify an etcd snapshot file with the host's coreutils (the etcd image may ship no etcdutl: the images built by
# kubernetes' cluster/images/etcd hold etcd and etcdctl only). etcd streams a snapshot with the sha256 of its bytes
# appended, and etcdctl/etcdutl save refuse a stream without it (the size is then 32 past a multiple of 512);
# `etcdutl snapshot restore` checks that hash before it restores. The same check here: the file holds exactly the
# bytes etcd sent. Prints "sha256 <first 16 hex>, <size> bytes"; a failure's message ends with $2 (what it means).
etcd_snapshot_verify() {
  local file=$1 then=${2:-} size expected actual
  size=$(stat -c %s "$file")
  if [ $((size % 512)) -ne 32 ] || [ "$size" -lt 544 ]; then
    die "$file ($size bytes) is not an etcd snapshot: no sha256 after whole 512-byte blocks (truncated, or not one)$then"
  fi
  expected=$(tail -c 32 "$file" | od -An -v -tx1 | tr -d ' \n')
  actual=$(head -c $((size - 32)) "$file" | sha256sum)
  actual=${actual%% *}
  [ "$expected" = "$actual" ] || die "$file: its bytes do not match the sha256 etcd appended: damaged$then"
  printf 'sha256 %s, %s bytes\n' "${actual:0:16}" "$size"
}

# etcdctl inside this node's etcd pod, talking to its own member with the healthcheck client certificate.
etcd_ctl() {
  local container
  container=$(etcd_container)
  etcd_ctl_in "$container" "$@"
}

# The same in a given container (a wait that looks for the container each time and tolerates its absence).
etcd_ctl_in() {
  local container=$1 pki=/etc/kubernetes/pki/etcd
  shift
  run_long crictl exec "$container" etcdctl --endpoints=https://127.0.0.1:2379 --cacert="$pki/ca.crt" \
    --cert="$pki/healthcheck-client.crt" --key="$pki/healthcheck-client.key" "$@"
}
