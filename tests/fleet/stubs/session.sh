#!/usr/bin/env bash
# sshd's ForceCommand on every fleet host: records each SSH session (the mlcluster step it runs, start,
# end, exit status) and then runs the client's command exactly as sshd would, stdin untouched.
set -uo pipefail
log=/etc/mlcluster-fleet/state/sessions.jsonl
command=${SSH_ORIGINAL_COMMAND:-}
step=unknown
if [[ $command =~ mlcluster-([A-Za-z0-9_-]+)$ ]]; then
  step=${BASH_REMATCH[1]}
elif [[ $command == */sftp-server ]]; then
  # The SFTP subsystem (ForceCommand applies to it too): a file copy, such as the node's copy of the scripts.
  step=sftp
fi
start=$(date +%s.%N)
printf '{"event":"start","step":"%s","user":"%s","pid":%d,"t":%s}\n' "$step" "$USER" "$$" "$start" >>"$log"
bash -c "$command"
rc=$?
printf '{"event":"end","step":"%s","user":"%s","pid":%d,"t":%s,"rc":%d}\n' "$step" "$USER" "$$" "$(date +%s.%N)" "$rc" >>"$log"
exit "$rc"
