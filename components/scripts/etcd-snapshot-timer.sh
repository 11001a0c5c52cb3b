#!/usr/bin/env bash
# Step (every control plane): the systemd timer that runs the etcd-snapshot script on its schedule, and the
# restore script an operator runs by hand (docs/cluster-care.md), with every control plane filled in.
set -euo pipefail
: "${SNAPSHOTS_ENABLED:?}" "${SNAPSHOT_SCRIPT:?}" "${SNAPSHOT_SCRIPT_TEXT:?}" "${UNIT:?}" "${SERVICE_UNIT:?}" "${TIMER_UNIT:?}"
: "${RESTORE_SCRIPT:?}" "${RESTORE_SCRIPT_TEXT:?}"
# Also without the timer: snapshots taken by hand or before upgrades are restored with it.
write_if_changed "$RESTORE_SCRIPT" "$RESTORE_SCRIPT_TEXT" 0700 && changed "$RESTORE_SCRIPT written"
service=/etc/systemd/system/$UNIT.service
timer=/etc/systemd/system/$UNIT.timer
if [ "$SNAPSHOTS_ENABLED" != true ]; then
  if [ -f "$timer" ]; then
    systemctl disable --now "$UNIT.timer"
    rm -f "$timer" "$service"
    systemctl daemon-reload
    changed "etcd snapshot timer removed"
  else
    ok "no etcd snapshot timer"
  fi
  exit 0
fi
reload=false
write_if_changed "$SNAPSHOT_SCRIPT" "$SNAPSHOT_SCRIPT_TEXT" 0700 && changed "$SNAPSHOT_SCRIPT written"
write_if_changed "$service" "$SERVICE_UNIT" && reload=true
write_if_changed "$timer" "$TIMER_UNIT" && reload=true
if [ "$reload" = true ]; then
  systemctl daemon-reload
  changed "$UNIT units written"
fi
if systemctl is-enabled --quiet "$UNIT.timer" && systemctl is-active --quiet "$UNIT.timer"; then
  if [ "$reload" = true ]; then
    systemctl restart "$UNIT.timer"
    changed "$UNIT.timer restarted with the new schedule"
  else
    ok "$UNIT.timer enabled and running"
  fi
else
  systemctl enable --now "$UNIT.timer"
  changed "$UNIT.timer enabled"
fi
