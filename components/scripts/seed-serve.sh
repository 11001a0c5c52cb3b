#!/usr/bin/env bash
# Step: the air-gap seed host serves the checked bundle (bundle-verify ran first): its images from a CNCF
# distribution registry, its packages as an apt and a yum repository, its charts and files over HTTP. Each image is
# loaded with skopeo keeping its manifest digest, then read back from the registry and compared with the lockfile.
set -euo pipefail
: "${BUNDLE_DIR:?}" "${SEED_IMAGES?}" "${SEED_ADDRESS:?}" "${REGISTRY_PORT:?}" "${FILES_PORT:?}"
: "${REGISTRY_CONFIG:?}" "${REGISTRY_CONFIG_PATH:?}" "${REGISTRY_STORAGE:?}" "${REGISTRY_UNIT:?}"
: "${REGISTRY_UNIT_TEXT:?}" "${FILES_UNIT:?}" "${FILES_UNIT_TEXT:?}" "${SEED_TOOLS:?}" "${DEB_REPOSITORY:?}"
: "${RPM_REPOSITORY:?}" "${IMAGE_LAYOUT:?}"
detect_os
[ "$OS_FAMILY" = deb ] ||
  die "the seed host runs $OS_ID ($OS_FAMILY family): the seed needs Debian's or Ubuntu's docker-registry and apt-utils packages; name a Debian or Ubuntu node as airGap.seed"

# The tools, from the OS's own repository (the site's OS mirror or install media): command<TAB>package lines.
missing=()
while IFS=$'\t' read -r tool package; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$package")
done <<<"$SEED_TOOLS"
if [ "${#missing[@]}" -gt 0 ]; then
  pkg_refresh
  pkg_install "${missing[@]}" || die "cannot install ${missing[*]} from this host's OS repository: the seed needs them (docs/air-gap.md)"
  changed "installed ${missing[*]}"
else
  ok "docker-registry, skopeo, apt-ftparchive, createrepo_c and python3 present"
fi

# $1 unit name, $2 unit text: written, reloaded and (re)started when it changed; started when it is not running.
serve_unit() {
  if write_if_changed "/etc/systemd/system/$1.service" "$2"; then
    systemctl daemon-reload
    systemctl enable "$1" >/dev/null
    systemctl restart "$1"
    changed "$1 (re)started"
  elif ! systemctl is-active --quiet "$1"; then
    systemctl enable --now "$1" >/dev/null
    changed "$1 started"
  else
    ok "$1 running"
  fi
}

# $1 URL: waits up to 30 s for an HTTP 200.
wait_http() {
  local tries=0
  until curl -fsS -o /dev/null "$1"; do
    tries=$((tries + 1))
    [ "$tries" -lt 60 ] || die "$1 does not answer after 30 s (journalctl -u ${2:-the unit})"
    sleep 0.5
  done
}

# The registry.
mkdir -p "$REGISTRY_STORAGE" "$(dirname "$REGISTRY_CONFIG_PATH")"
registry_config_changed=false
write_if_changed "$REGISTRY_CONFIG_PATH" "$REGISTRY_CONFIG" && registry_config_changed=true
if $registry_config_changed && systemctl is-active --quiet "$REGISTRY_UNIT"; then
  systemctl restart "$REGISTRY_UNIT"
  changed "$REGISTRY_UNIT restarted for its new configuration"
fi
serve_unit "$REGISTRY_UNIT" "$REGISTRY_UNIT_TEXT"
registry=http://$SEED_ADDRESS:$REGISTRY_PORT
wait_http "$registry/v2/" "$REGISTRY_UNIT"

manifest_types=application/vnd.oci.image.manifest.v1+json,application/vnd.oci.image.index.v1+json
manifest_types+=,application/vnd.docker.distribution.manifest.v2+json,application/vnd.docker.distribution.manifest.list.v2+json

# $1 repository:tag on the seed: the digest the registry serves for it, nothing when it has none (404).
served_digest() {
  local repository=${1%:*} tag=${1##*:} response code
  response=$(curl -sS -I -H "Accept: $manifest_types" -w 'http_code=%{http_code}\n' \
    "$registry/v2/$repository/manifests/$tag") || die "the seed registry did not answer for $1"
  code=$(sed -n 's/^http_code=//p' <<<"$response")
  case $code in
    200) sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: *sha256:\([0-9a-f]\{64\}\).*/\1/p' <<<"$response" ;;
    404) ;;
    *) die "the seed registry answered HTTP $code for $1" ;;
  esac
}

loaded=0
present=0
while IFS=$'\t' read -r name target digest; do
  [ -n "$name" ] || continue
  served=$(served_digest "$target")
  if [ "$served" = "$digest" ]; then
    present=$((present + 1))
    continue
  fi
  run_long skopeo copy --quiet --preserve-digests --dest-tls-verify=false \
    "oci:$BUNDLE_DIR/$IMAGE_LAYOUT:$name" "docker://$SEED_ADDRESS:$REGISTRY_PORT/$target" ||
    die "image $name: skopeo could not load it from the bundle into the seed registry"
  served=$(served_digest "$target")
  [ "$served" = "$digest" ] ||
    die "image $name: the seed registry serves sha256:${served:-nothing} for $target, the lockfile says sha256:$digest"
  loaded=$((loaded + 1))
done <<<"$SEED_IMAGES"
if [ "$loaded" -gt 0 ]; then
  changed "$loaded image(s) loaded into the seed registry ($present already there), each at its lockfile digest"
else
  ok "$present image(s) in the seed registry at their lockfile digests"
fi

# The apt repository: a flat repository (Packages and Release beside the packages), rebuilt when the packages change.
deb_dir=$BUNDLE_DIR/$DEB_REPOSITORY
if compgen -G "$deb_dir/*.deb" >/dev/null; then
  packages=$(cd "$deb_dir" && apt-ftparchive packages .)
  count=$(grep -c '^Package:' <<<"$packages")
  if write_if_changed "$deb_dir/Packages" "$packages"; then
    # Release names Packages by its hashes: written after it, from it.
    release=$(cd "$deb_dir" && apt-ftparchive -o APT::FTPArchive::Release::Origin=mlcluster-seed release .)
    if write_if_changed "$deb_dir/Release" "$release"; then
      changed "apt repository index written ($count packages)"
    else
      changed "apt repository Packages written ($count packages)"
    fi
  else
    ok "apt repository index up to date"
  fi
else
  ok "no Debian packages in the bundle"
fi

# The yum repository: createrepo_c's metadata, rebuilt when the set of packages (by digest) changes.
rpm_dir=$BUNDLE_DIR/$RPM_REPOSITORY
if compgen -G "$rpm_dir/*.rpm" >/dev/null; then
  rpms=$(cd "$rpm_dir" && sha256sum ./*.rpm)
  count=$(wc -l <<<"$rpms")
  indexed=""
  if [ -f "$rpm_dir/repodata/repomd.xml" ] && [ -f "$rpm_dir/.mlcluster-indexed" ]; then
    indexed=$(cat "$rpm_dir/.mlcluster-indexed")
  fi
  if [ "$indexed" = "$rpms" ]; then
    ok "yum repository metadata up to date ($count packages)"
  else
    run_long createrepo_c --quiet "$rpm_dir" >/dev/null
    printf '%s\n' "$rpms" >"$rpm_dir/.mlcluster-indexed"
    changed "yum repository metadata written ($count packages)"
  fi
else
  ok "no RPM packages in the bundle"
fi

# The file server, then what it serves read back over HTTP; both ports open to the nodes in the host's firewall.
serve_unit "$FILES_UNIT" "$FILES_UNIT_TEXT"
firewall_open "$REGISTRY_PORT/tcp" "$FILES_PORT/tcp"
files=http://$SEED_ADDRESS:$FILES_PORT
wait_http "$files/" "$FILES_UNIT"
if [ -f "$deb_dir/Packages" ]; then
  served_index=$(curl -fsS "$files/$DEB_REPOSITORY/Packages" | sha256sum)
  on_disk=$(sha256sum <"$deb_dir/Packages")
  [ "$served_index" = "$on_disk" ] || die "the file server does not serve $DEB_REPOSITORY/Packages as it is on disk"
fi
ok "seed serves images at $registry and packages, charts and files at $files"
