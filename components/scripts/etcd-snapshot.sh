#!/usr/bin/env bash
# Step/timer (control plane): save an etcd snapshot with the etcdctl inside the node's etcd static pod, check it,
# keep the newest SNAPSHOT_RETAIN, copy it to SNAPSHOT_COPY_TO. As a step (TARGET_VERSION set) it snapshots only
# when an upgrade is pending; the systemd timer runs it with TARGET_VERSION empty and always snapshots.
set -euo pipefail
: "${SNAPSHOT_DIR:?}" "${SNAPSHOT_RETAIN:?}" "${SNAPSHOT_REASON:?}" "${SNAPSHOT_COPY_TO?}" "${TARGET_VERSION?}"
current=$(kube_cluster_version)
if [ -n "$TARGET_VERSION" ] && [ "$current" = "$TARGET_VERSION" ]; then
  ok "cluster at $TARGET_VERSION: no $SNAPSHOT_REASON snapshot needed"
  exit 0
fi
etcd=$(etcd_container)
# /var/lib/etcd is the etcd pod's hostPath: a snapshot written there inside the container lands on the node.
name="etcd-$SNAPSHOT_REASON-$(date -u +%Y%m%dT%H%M%SZ)-v$current.db"
etcd_ctl snapshot save "/var/lib/etcd/$name" >/dev/null
# etcdutl (in the same image) reads the file back: hash, revision, keys, size.
status=$(crictl exec "$etcd" etcdutl snapshot status "/var/lib/etcd/$name" -w simple) ||
  die "snapshot /var/lib/etcd/$name does not verify"
mkdir -p "$SNAPSHOT_DIR" && chmod 0700 "$SNAPSHOT_DIR"
mv "/var/lib/etcd/$name" "$SNAPSHOT_DIR/$name"
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
