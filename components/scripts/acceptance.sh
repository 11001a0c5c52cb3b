#!/usr/bin/env bash
# Step (on the first control plane): GPU acceptance. Reads on stdin the cluster objects, the Job templates, the
# node table (`<node> <gpus> <wave> <job> <record>`) and the multi-node groups (components/render/acceptance.py). A
# node is tested when the record it was last tested with differs from the table's (the program puts the previous
# record there unless a retest is due), so a retry tests only what is left; a group is tested when its members'
# records changed. Each node's Job is pinned to it and must finish within WAVE_TIMEOUT seconds, or the node is
# reported stuck by name. Prints one `mlcluster-acceptance:` line per node and group with the raw outputs (gzip +
# base64) that the program judges; the results stay in STATE_DIR for the next run.
set -euo pipefail
: "${NAMESPACE:?}" "${WAVE_TIMEOUT:?}" "${POLL_SECONDS:?}" "${LEVEL:?}"
STATE_DIR=${STATE_DIR:-/var/lib/mlcluster/acceptance}
KUBECTL=(timeout 120 kubectl --kubeconfig /etc/kubernetes/admin.conf)
# Progress to stderr (what the CLI shows); stdout (fd 3) carries only the results, which are data.
exec 3>&1 1>&2

# A fixed place (one acceptance step runs at a time per cluster): the calls it logs read the same on every run.
work="$STATE_DIR/run"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
# The sections of stdin, each into its own file.
awk -v dir="$work" '/^=== / { file = dir "/" $2; printf "" > file; next } file != "" { print > file }'
for section in objects.yaml job-multi-gpu.yaml job-one-gpu.yaml nodes groups; do
  [ -f "$work/$section" ] || die "the step's input has no $section section"
done
mkdir -p "$STATE_DIR/nodes" "$STATE_DIR/groups"

applied=$("${KUBECTL[@]}" apply -f "$work/objects.yaml") || die "could not apply the acceptance namespace, queue and runtime"
if grep -qv ' unchanged$' <<<"$applied"; then
  changed "acceptance objects: ${applied//$'\n'/; }"
else
  ok "acceptance objects unchanged"
fi

# A log that could not be read. After a Job that completed it is a failed read (the API or the node's kubelet):
# stop, so that a retry tests the node again instead of recording a healthy node as one that printed nothing.
# After a Job that failed or hung, its pod may never have started: the verdict then says the output is missing.
no_log() {
  local what=$1 state=$3 first
  first=$(head -n 1 "$work/log-error")
  [ "$state" != Complete ] || die "$what: could not read the $2 log of a finished test: $first"
  printf 'warning: %s: no %s log: %s\n' "$what" "$2" "$first"
}

pack() { if [ -s "$1" ]; then gzip -c <"$1" | base64 -w0 && echo; else echo '-'; fi; }

# `Complete`, `Failed` or `DeadlineExceeded` once the Job (or TrainJob) ended, '' while it runs or waits (a Job Kueue holds is
# `Suspended`; a finished one also carries SuccessCriteriaMet or FailureTarget on Kubernetes >= 1.31).
job_state() {
  local conditions reason
  conditions=$("${KUBECTL[@]}" -n "$NAMESPACE" get "$1" "$2" -o 'jsonpath={.status.conditions[?(@.status=="True")].type}') ||
    return 1
  case " $conditions " in
    *" Complete "*) echo Complete ;;
    *" Failed "*)
      # Past its deadline (the wave timeout) the Job is failed by the controller: the node's test hung.
      reason=$("${KUBECTL[@]}" -n "$NAMESPACE" get "$1" "$2" -o 'jsonpath={.status.conditions[?(@.type=="Failed")].reason}') ||
        return 1
      if [ "$reason" = DeadlineExceeded ]; then echo DeadlineExceeded; else echo Failed; fi
      ;;
    *) echo '' ;;
  esac
}

# The state of a running test, polled: a failed read is one more poll, until the deadline, where it stops the step
# (an API that cannot be read must not be reported as a node that hung).
polled_state() {
  local kind=$1 job=$2 elapsed=$3 state
  if state=$(job_state "$kind" "$job"); then
    printf '%s' "$state"
  elif [ "$elapsed" -ge "$WAVE_TIMEOUT" ]; then
    die "could not read the state of $kind $job"
  else
    printf 'warning: could not read the state of %s %s: polling again\n' "$kind" "$job" >&2
  fi
}

# A node's Job, started fresh: a finished Job's template cannot change, and its pods hold the old result.
start_node() {
  local node=$1 gpus=$2 job=$3 template
  template="$work/job-one-gpu.yaml"
  [ "$gpus" -gt 1 ] && template="$work/job-multi-gpu.yaml"
  sed -e "s/@JOB@/$job/g" -e "s/@NODE@/$node/g" -e "s/@GPUS@/$gpus/g" "$template" >"$work/$job.yaml"
  "${KUBECTL[@]}" -n "$NAMESPACE" delete job "$job" --ignore-not-found >/dev/null ||
    die "could not delete the previous acceptance Job of $node"
  "${KUBECTL[@]}" apply -f "$work/$job.yaml" >/dev/null || die "could not create the acceptance Job of $node"
  changed "$node: started $job ($gpus GPU(s), dcgmi diag at level $LEVEL)"
}

collect_node() {
  local node=$1 gpus=$2 job=$3 record=$4 status=$5 seconds=$6 state=$7 dir="$STATE_DIR/nodes/$1"
  mkdir -p "$dir"
  : >"$work/diag" && : >"$work/nccl"
  "${KUBECTL[@]}" -n "$NAMESPACE" logs "job/$job" -c dcgm-diag >"$work/diag" 2>"$work/log-error" ||
    no_log "$node" dcgm-diag "$state"
  if [ "$gpus" -gt 1 ]; then
    "${KUBECTL[@]}" -n "$NAMESPACE" logs "job/$job" -c nccl-loopback >"$work/nccl" 2>"$work/log-error" ||
      no_log "$node" nccl-loopback "$state"
  fi
  pack "$work/diag" >"$dir/diag.b64"
  pack "$work/nccl" >"$dir/nccl.b64"
  printf '%s\n' "$status" >"$dir/status"
  printf '%s\n' "$seconds" >"$dir/seconds"
  # The record last, so a step cut short before here tests the node again.
  printf '%s\n' "$record" >"$dir/record"
}

# Whether the result stored in directory $1 was reached with record $2 (then it says so, as $3, and stands).
tested_already() {
  local stored='' last=''
  [ -f "$1/record" ] && read -r stored <"$1/record"
  [ "$stored" = "$2" ] || return 1
  read -r last <"$1/status"
  ok "$3: tested with this record already ($last)"
}

# ---- per-node waves -----------------------------------------------------------------------------------------
declare -A wave_nodes=()
while read -r node gpus wave job record; do
  [ -n "$node" ] || continue
  tested_already "$STATE_DIR/nodes/$node" "$record" "$node" || wave_nodes[$wave]+="$node:$gpus:$job:$record "
done <"$work/nodes"

for wave in $(printf '%s\n' "${!wave_nodes[@]}" | sort -n); do
  read -r -a members <<<"${wave_nodes[$wave]}"
  waiting "wave $wave: ${#members[@]} node(s), up to $((WAVE_TIMEOUT / 60)) min"
  started=$SECONDS reported=$SECONDS
  declare -A running=()
  for member in "${members[@]}"; do
    IFS=: read -r node gpus job record <<<"$member"
    start_node "$node" "$gpus" "$job"
    running[$node]="$gpus:$job:$record"
  done
  while [ ${#running[@]} -gt 0 ]; do
    for node in "${!running[@]}"; do
      IFS=: read -r gpus job record <<<"${running[$node]}"
      elapsed=$((SECONDS - started))
      state=$(polled_state job "$job" "$elapsed")
      if [ -n "$state" ] || [ "$elapsed" -ge "$WAVE_TIMEOUT" ]; then
        status='done'
        [ -n "$state" ] && [ "$state" != DeadlineExceeded ] || status=stuck
        collect_node "$node" "$gpus" "$job" "$record" "$status" "$elapsed" "$state"
        if [ "$status" = stuck ]; then
          printf 'warning: %s: its acceptance Job %s did not finish within %s s: the node is reported stuck\n' \
            "$node" "$job" "$WAVE_TIMEOUT"
        fi
        changed "$node: tested ($state${state:+, }${elapsed}s)"
        unset "running[$node]"
      fi
    done
    [ ${#running[@]} -eq 0 ] || sleep "$POLL_SECONDS"
    # A line a minute: the wave is alive (and an idle SSH connection is not cut by a NAT or bastion timeout).
    if [ ${#running[@]} -gt 0 ] && [ $((SECONDS - reported)) -ge 60 ]; then
      reported=$SECONDS
      waiting "wave $wave: ${#running[@]} of ${#members[@]} node(s) still testing ($(((SECONDS - started) / 60)) min)"
    fi
  done
  unset running
done

# ---- multi-node groups --------------------------------------------------------------------------------------
while read -r group record members; do
  [ -n "$group" ] || continue
  dir="$STATE_DIR/groups/$group"
  tested_already "$dir" "$record" "group $group" && continue
  mkdir -p "$dir"
  job="all-reduce-$group"
  "${KUBECTL[@]}" -n "$NAMESPACE" delete trainjob "$job" --ignore-not-found >/dev/null ||
    die "could not delete the previous TrainJob $job"
  "${KUBECTL[@]}" apply -f "$work/group-$group.yaml" >/dev/null || die "could not create the TrainJob $job"
  changed "group $group: started $job across ${members//,/ }"
  started=$SECONDS
  while :; do
    state=$(polled_state trainjob "$job" $((SECONDS - started)))
    [ -z "$state" ] && [ $((SECONDS - started)) -lt "$WAVE_TIMEOUT" ] || break
    sleep "$POLL_SECONDS"
  done
  status='done'
  [ -n "$state" ] && [ "$state" != DeadlineExceeded ] || status=stuck
  : >"$work/launcher"
  # Trainer runs a TrainJob as a JobSet of the same name; JobSet labels the pods it creates with the JobSet's and
  # the replicated job's names (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go). A selector that
  # matches no pod is no error to kubectl (exit 0, "No resources found" on stderr): an empty log is checked too.
  if ! "${KUBECTL[@]}" -n "$NAMESPACE" logs \
    -l "jobset.sigs.k8s.io/jobset-name=$job,jobset.sigs.k8s.io/replicatedjob-name=launcher" \
    -c node --tail=-1 >"$work/launcher" 2>"$work/log-error"; then
    no_log "group $group" launcher "$state"
  elif [ ! -s "$work/launcher" ] && grep -q '^No resources found' "$work/log-error"; then
    no_log "group $group" launcher "$state"
  fi
  pack "$work/launcher" >"$dir/out.b64"
  printf '%s\n' "$status" >"$dir/status"
  printf '%s\n' "$record" >"$dir/record"
  changed "group $group: tested (${state:-timed out after ${WAVE_TIMEOUT}s})"
done <"$work/groups"

# ---- the results of every node and group in the table -------------------------------------------------------
while read -r node _ _ _ _; do
  [ -n "$node" ] || continue
  dir="$STATE_DIR/nodes/$node"
  if ! { read -r record <"$dir/record" && read -r status <"$dir/status" && read -r seconds <"$dir/seconds" &&
    read -r diag <"$dir/diag.b64" && read -r nccl <"$dir/nccl.b64"; }; then
    die "$node: its stored result is incomplete"
  fi
  printf 'mlcluster-acceptance: node %s %s %s %s %s %s\n' >&3 "$node" "$record" "$status" "$seconds" "$diag" "$nccl"
done <"$work/nodes"
while read -r group _ _; do
  [ -n "$group" ] || continue
  dir="$STATE_DIR/groups/$group"
  if ! { read -r status <"$dir/status" && read -r out <"$dir/out.b64"; }; then
    die "group $group: its stored result is incomplete"
  fi
  printf 'mlcluster-acceptance: group %s %s %s\n' >&3 "$group" "$status" "$out"
done <"$work/groups"
