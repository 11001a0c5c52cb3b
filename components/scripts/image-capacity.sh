#!/usr/bin/env bash
# Step (read-only): do the images this node pre-pulls fit containerd's root, below the image GC threshold?
set -euo pipefail
: "${CONTAINERD_ROOT:?}" "${REQUIRED_BYTES:?}" "${HIGH_THRESHOLD_PERCENT:?}"
path=$CONTAINERD_ROOT
while [ ! -e "$path" ]; do
  path=$(dirname "$path")
done
read -r size used available < <(df -B1 --output=size,used,avail "$path" | tail -n 1)
gib() { awk -v b="$1" 'BEGIN { printf "%.1f GiB", b / 1073741824 }'; }
after=$((used + REQUIRED_BYTES))
percent_after=$(awk -v a="$after" -v s="$size" 'BEGIN { printf "%.1f", 100 * a / s }')
summary="pre-pulled images need $(gib "$REQUIRED_BYTES"); $path has $(gib "$available") free of $(gib "$size")"
if [ "$REQUIRED_BYTES" -gt "$available" ]; then
  die "$summary: the images cannot fit (give the node an imageDisk or pre-pull fewer images)"
fi
if awk -v p="$percent_after" -v h="$HIGH_THRESHOLD_PERCENT" 'BEGIN { exit !(p >= h) }'; then
  printf 'warning: %s: usage would reach %s%%, at or above the image GC high threshold (%s%%), so the kubelet would start deleting images\n' \
    "$summary" "$percent_after" "$HIGH_THRESHOLD_PERCENT"
else
  ok "$summary: usage would reach $percent_after% (image GC starts at $HIGH_THRESHOLD_PERCENT%)"
fi
