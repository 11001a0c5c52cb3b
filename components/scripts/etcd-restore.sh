#!/usr/bin/env bash
# Run by hand, as root, on the control planes (docs/cluster-care.md, "Restoring a snapshot"): rewind the stacked
# etcd to one snapshot, the same file on every control plane, in two passes:
#   etcd-restore.sh --snapshot FILE   on each control plane: verify the file, restore it into a new data directory,
#                                     stop the static pods (their manifests move out), swap the data directory in
#   etcd-restore.sh --start           on each control plane, once every one has done the above: manifests back
# Nothing stops before the snapshot is verified and restored. All members stop before any starts (upstream's
# procedure): a restored member next to old ones would get their newer raft log (etcd panics), and the old ones
# would keep taking writes the restore then loses. The timer step installs it as /var/lib/mlcluster/etcd-restore.sh
# with INITIAL_CLUSTER (every control plane) filled in; --initial-cluster, --name, --peer-url, --manifests override.
set -euo pipefail
if ! declare -F die >/dev/null; then
  # Run from a checkout: the library sits beside it (installed, it is part of the script).
  # shellcheck source=/dev/null
  . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
fi
usage="usage: etcd-restore.sh --snapshot FILE [--initial-cluster NAME=https://IP:2380,...] [--name NAME] [--peer-url URL] [--manifests DIR] [--allow-revision-rewind] | --start [--manifests DIR]"
INITIAL_CLUSTER=${INITIAL_CLUSTER:-}
MANIFESTS=${MANIFESTS:-/etc/kubernetes/manifests}
STOP_TIMEOUT_SECONDS=${STOP_TIMEOUT_SECONDS:-120}
snapshot="" name="" peer_url="" start=false allow_rewind=false
initial_cluster=$INITIAL_CLUSTER manifests=$MANIFESTS stop_timeout=$STOP_TIMEOUT_SECONDS
while [ $# -gt 0 ]; do
  case $1 in
    --snapshot | --initial-cluster | --name | --peer-url | --manifests)
      if [ $# -lt 2 ] || [ -z "$2" ]; then
        die "$1 needs a value; $usage"
      fi
      case $1 in
        --snapshot) snapshot=$2 ;;
        --initial-cluster) initial_cluster=$2 ;;
        --name) name=$2 ;;
        --peer-url) peer_url=$2 ;;
        --manifests) manifests=${2%/} ;;
      esac
      shift 2
      ;;
    --start)
      start=true
      shift
      ;;
    --allow-revision-rewind)
      allow_rewind=true
      shift
      ;;
    -h | --help)
      echo "$usage"
      exit 0
      ;;
    *) die "unknown argument '$1'; $usage" ;;
  esac
done
# A sibling of the manifests directory: the kubelet runs every file in it.
stopped=$manifests.stopped-by-etcd-restore
manifest=$manifests/etcd.yaml
if [ "$start" = true ]; then
  [ -z "$snapshot" ] || die "--start takes no --snapshot: it starts what an earlier pass restored"
  parked=""
  if [ -d "$stopped" ]; then parked=$(ls -A "$stopped"); fi
  [ -n "$parked" ] || die "nothing to start: $stopped holds no manifests"
  mv "$stopped"/*.yaml "$manifests"/
  rmdir "$stopped"
  changed "static pods starting: manifests back in $manifests"
  ok "once every control plane is started: etcdctl endpoint health --cluster, then kubectl get nodes; then" \
    "set mlcluster:etcdSnapshots.restored to a name for this restore (the snapshot file's name) and run" \
    "pulumi refresh, then pulumi up: it restarts every kubelet batch by batch, then rolls the controllers" \
    "namespace by namespace (they held state of later revisions)"
  exit 0
fi
# Restoring rewinds the whole cluster: the file is never guessed (the newest is not always the one meant).
[ -n "$snapshot" ] || die "no snapshot given (--snapshot FILE): nothing was changed; $usage"
[ -f "$snapshot" ] || die "$snapshot: no such file: nothing was changed"
[ -n "$initial_cluster" ] || die "--initial-cluster NAME=https://IP:2380,... (every control plane) is needed"
parked=""
if [ -d "$stopped" ]; then parked=$(ls -A "$stopped"); fi
if [ -n "$parked" ]; then
  die "this member is already restored and stopped ($stopped): run --start once every control plane is"
fi
[ -f "$manifest" ] || die "$manifest not found: this is not a control plane with stacked etcd"
flag() { sed -n "s/^ *- --$1=//p" "$manifest" | head -n 1; }
name=${name:-$(flag name)}
peer_url=${peer_url:-$(flag initial-advertise-peer-urls)}
data_dir=$(flag data-dir)
client_url=$(flag listen-client-urls | cut -d, -f1)
if [ -z "$name" ] || [ -z "$peer_url" ] || [ -z "$data_dir" ] || [ -z "$client_url" ]; then
  die "cannot read --name, --initial-advertise-peer-urls, --data-dir and --listen-client-urls from $manifest"
fi
case ",$initial_cluster," in
  *",$name=$peer_url,"*) ;;
  *) die "--initial-cluster ($initial_cluster) does not list this member as $name=$peer_url" ;;
esac

# etcd 3.5+ restores with etcdutl (etcdctl's restore is deprecated in 3.5 and gone in 3.6); 3.4 has only etcdctl.
if command -v etcdutl >/dev/null; then
  tool=(etcdutl)
else
  tool=(env ETCDCTL_API=3 etcdctl)
fi
# The sha256 etcd appended (what the restore itself checks first), then the tool's own read of the database.
verified=$(etcd_snapshot_verify "$snapshot" ": nothing was stopped")
status=$("${tool[@]}" snapshot status "$snapshot" -w simple 2>&1) ||
  die "$snapshot does not verify: nothing was stopped: $status"
ok "snapshot $snapshot: $verified; hash, revision, keys, size: $status (${tool[*]})"
# The restored store starts at the snapshot's revision: watchers (every kubelet, controller and informer) that saw
# later revisions would resume from numbers the store hands out again, and miss what changed. etcd's recovery guide
# for Kubernetes: bump the revision past anything issued since and mark it compacted, so every watch is cut and
# every informer lists again (etcdutl/etcdctl 3.5.10+).
restore_help=$("${tool[@]}" snapshot restore --help 2>&1)
case $restore_help in
  *--bump-revision*--mark-compacted* | *--mark-compacted*--bump-revision*)
    rewind=(--bump-revision 1000000000 --mark-compacted)
    ;;
  *)
    [ "$allow_rewind" = true ] || die "${tool[*]} cannot bump the revision (--bump-revision, --mark-compacted:" \
      "etcd 3.5.10+): watchers of the restored cluster would miss events; put an etcdutl of the cluster's etcd" \
      "release (3.5.10 or later) on PATH, or pass --allow-revision-rewind to restore without: nothing was stopped"
    rewind=()
    ;;
esac
stamp=$(date -u +%Y%m%dT%H%M%SZ)
restored=$data_dir.restored-$stamp
# A new cluster token, the same on every member (it comes from the file): the restored cluster gets new member
# and cluster IDs, so an old member still running is refused by it instead of feeding it its raft log.
token=etcd-restore-$(sha256sum "$snapshot" | cut -c1-16)
# The restore also checks the file's integrity hash: a damaged snapshot fails here, while etcd still runs.
if ! out=$(run_long "${tool[@]}" snapshot restore "$snapshot" --data-dir "$restored" --name "$name" \
  --initial-cluster "$initial_cluster" --initial-advertise-peer-urls "$peer_url" \
  --initial-cluster-token "$token" "${rewind[@]}" 2>&1); then
  rm -rf "$restored"
  die "$snapshot does not restore: nothing was stopped: $(tail -n 3 <<<"$out")"
fi
chmod 0700 "$restored"
changed "restored into $restored as $name ($peer_url)${rewind[*]:+, revision bumped by ${rewind[1]} and compacted}"

# Still running: answering on its client URL, or (on a node, where crictl sees it) its container not yet gone.
running() {
  local hostport=${client_url#*://}
  hostport=${hostport%%/*}
  if (exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}") 2>/dev/null; then
    return 0
  fi
  command -v crictl >/dev/null || return 1
  local found
  found=$(crictl ps --name '^etcd$' --label io.kubernetes.pod.namespace=kube-system --state running -q) ||
    die "crictl ps failed: cannot tell whether etcd has stopped"
  [ -n "$found" ]
}
mkdir -p "$stopped"
mv "$manifests"/*.yaml "$stopped"/
changed "static pods stopping: manifests moved to $stopped"
deadline=$(($(date +%s) + stop_timeout))
while running; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    mv "$stopped"/*.yaml "$manifests"/
    rmdir "$stopped"
    rm -rf "$restored"
    die "etcd still runs ($client_url) ${stop_timeout}s after its manifest moved: manifests moved back, nothing swapped"
  fi
  sleep 1
done
if [ -e "$data_dir" ]; then
  mv "$data_dir" "$data_dir.before-restore-$stamp"
fi
mv "$restored" "$data_dir"
changed "$data_dir is the restored member (the one before: $data_dir.before-restore-$stamp)"
ok "static pods stay stopped: once every control plane has run this with the same snapshot, run --start on each"
