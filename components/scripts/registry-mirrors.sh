#!/usr/bin/env bash
# Step: one hosts.toml per mirrored registry under containerd's config_path (read at every pull: no restart).
# Authorization headers arrive on stdin as `registry<TAB>value` lines, never in the command.
# With Spegel on: once Spegel has moved the registries' hosts.toml into SPEGEL_BACKUP_DIR (its first start), they are
# kept there, where each start of a Spegel pod reads them beneath its own host (spegel v0.7.4
# pkg/oci/containerd.go backupConfig, existingHosts); the files Spegel writes are left to Spegel.
set -euo pipefail
: "${MIRROR_REGISTRIES?}" "${CERTS_DIR:?}" "${SPEGEL_BACKUP_DIR?}" "${AUTHORIZATION_PLACEHOLDER:?}"
declare -A authorization=()
while IFS=$'\t' read -r registry value; do
  [ -n "$registry" ] && authorization[$registry]=$value
done
read -r -a registries <<<"$MIRROR_REGISTRIES"
marker=.mlcluster-managed
root=$CERTS_DIR
if [ -n "$SPEGEL_BACKUP_DIR" ] && [ -d "$SPEGEL_BACKUP_DIR" ]; then
  root=$SPEGEL_BACKUP_DIR
  ok "Spegel holds $CERTS_DIR: the mirrors beneath its own are kept in $root"
fi

for index in "${!registries[@]}"; do
  registry=${registries[$index]}
  dir=$root/$registry
  hosts_var=HOSTS_TOML_$index
  ca_var=CA_$index
  content=${!hosts_var}
  mode=0644
  if [[ $content == *"$AUTHORIZATION_PLACEHOLDER"* ]]; then
    [ -n "${authorization[$registry]:-}" ] || die "no authorization for $registry on stdin"
    # Quoted replacement: bash >= 5.2 (patsub_replacement) reads an unquoted & as the matched placeholder.
    content=${content//"$AUTHORIZATION_PLACEHOLDER"/"${authorization[$registry]}"}
    mode=0600
  fi
  mkdir -p "$dir"
  [ -f "$dir/$marker" ] || : >"$dir/$marker"
  if [ -n "${!ca_var:-}" ]; then
    if write_if_changed "$dir/ca.crt" "${!ca_var}"; then
      changed "$dir/ca.crt written"
    else
      ok "$dir/ca.crt up to date"
    fi
  fi
  if write_if_changed "$dir/hosts.toml" "$content" "$mode"; then
    changed "$dir/hosts.toml written"
  else
    ok "$dir/hosts.toml up to date"
  fi
done

# Registries mlcluster configured before but no longer: remove only what carries our marker.
for dir in "$root"/*/; do
  [ -f "$dir$marker" ] || continue
  registry=$(basename "$dir")
  if [[ " ${registries[*]} " != *" $registry "* ]]; then
    rm -rf "$dir"
    changed "mirror configuration for $registry removed"
  fi
done
ok "${#registries[@]} registry mirror configuration(s) managed"
