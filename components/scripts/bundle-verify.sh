#!/usr/bin/env bash
# Step: on the seed host, every item of the air-gap bundle against the lockfile's digest, before anything is served.
# A missing or altered item stops the step and names it. An image is its manifest (the lockfile's digest), then
# each blob the manifest names (config and layers), in the bundle's OCI image layout.
set -euo pipefail
: "${BUNDLE_DIR:?}" "${BUNDLE_ITEMS:?}"
[ -d "$BUNDLE_DIR" ] || die "no bundle at $BUNDLE_DIR: copy the fetched bundle there first (docs/air-gap.md)"

# $1 digest (hex), $2 path in the bundle, $3 the lockfile item it belongs to
check_blob() {
  local actual
  [ -f "$BUNDLE_DIR/$2" ] || die "bundle item $3: $2 is missing"
  actual=$(sha256sum "$BUNDLE_DIR/$2" | cut -d' ' -f1)
  [ "$actual" = "$1" ] || die "bundle item $3: $2 has sha256 $actual, the lockfile says $1"
}

checked=0
blobs_checked=0
while IFS=$'\t' read -r digest path item; do
  [ -n "$digest" ] || continue
  check_blob "$digest" "$path" "$item"
  if [[ $item == "image "* ]]; then
    mapfile -t named < <(lines_matching -o 'sha256:[0-9a-f]\{64\}' "$BUNDLE_DIR/$path" | sort -u)
    for blob in "${named[@]}"; do
      check_blob "${blob#sha256:}" "images/blobs/sha256/${blob#sha256:}" "$item"
      blobs_checked=$((blobs_checked + 1))
    done
  fi
  checked=$((checked + 1))
done <<<"$BUNDLE_ITEMS"
ok "bundle at $BUNDLE_DIR: $checked items match the lockfile ($blobs_checked image blobs)"
