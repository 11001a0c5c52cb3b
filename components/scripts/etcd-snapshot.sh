#!/usr/bin/env bash
# Step/timer (control plane): save an etcd snapshot with the etcdctl inside the node's etcd static pod, check its
# sha256 on the host (the image may have no etcdutl), keep the newest SNAPSHOT_RETAIN, copy it to SNAPSHOT_COPY_TO.
# As a step (TARGET_VERSION set) it snapshots only when an upgrade is pending; the systemd timer runs it with
# TARGET_VERSION empty and always snapshots.
set -euo pipefail
: "${SNAPSHOT_DIR:?}" "${SNAPSHOT_RETAIN:?}" "${SNAPSHOT_REASON:?}" "${SNAPSHOT_COPY_TO?}" "${TARGET_VERSION?}"
current=$(kube_cluster_version)
if [ -n "$TARGET_VERSION" ] && [ "$current" = "$TARGET_VERSION" ]; then
  ok "cluster at $TARGET_VERSION: no $SNAPSHOT_REASON snapshot needed"
  exit 0
fi
# /var/lib/etcd is the etcd pod's hostPath: a snapshot written there inside the container lands on the node.
name="etcd-$SNAPSHOT_REASON-$(date -u +%Y%m%dT%H%M%SZ)-v$current.db"
saved=/var/lib/etcd/$name
# A failed save leaves etcdctl's .part file, a failed check the file itself: neither stays in etcd's data directory
# (a nightly timer failing for weeks would fill it).
trap 'rm -f "$saved" "$saved.part"' EXIT
etcd_ctl snapshot save "$saved" >/dev/null
status=$(etcd_snapshot_verify "$saved")
mkdir -p "$SNAPSHOT_DIR" && chmod 0700 "$SNAPSHOT_DIR"
mv "$saved" "$SNAPSHOT_DIR/$name"
trap - EXIT
chmod 0600 "$SNAPSHOT_DIR/$name"
changed "etcd snapshot $SNAPSHOT_DIR/$name ($status)"
prune() {
  # Newest first (the UTC timestamp follows the reason in the name); only this reason's snapshots count against its retention.
  find "$1" -maxdepth 1 -name "etcd-$SNAPSHOT_REASON-*.db" -printf '%f\n' | sort -r |
    tail -n +$((SNAPSHOT_RETAIN + 1)) | while read -r old; do
    rm -f "$1/$old"
    changed "old snapshot $1/$old removed (keeping $SNAPSHOT_RETAIN)"
  done
}
prune "$SNAPSHOT_DIR"
if [ -n "$SNAPSHOT_COPY_TO" ]; then
  mkdir -p "$SNAPSHOT_COPY_TO" && chmod 0700 "$SNAPSHOT_COPY_TO"
  cp "$SNAPSHOT_DIR/$name" "$SNAPSHOT_COPY_TO/$name"
  changed "copied to $SNAPSHOT_COPY_TO/$name"
  prune "$SNAPSHOT_COPY_TO"
fi
