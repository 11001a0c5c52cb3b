#!/usr/bin/env bash
# Step: the dedicated image disk. A block device is formatted only when blkid finds nothing on it (never a
# disk that has a filesystem or a partition table), mounted by UUID through fstab, and containerd is made to
# require the mount, so images never land on the OS disk. A directory (IMAGE_DISK_PATH) is used as it is.
set -euo pipefail
: "${IMAGE_DISK_DEVICE?}" "${IMAGE_DISK_PATH?}" "${IMAGE_DISK_FILESYSTEM:?}" "${IMAGE_DISK_MOUNT:?}"

# containerd's root must carry containerd's SELinux labels (container_var_lib_t, its snapshots container_file_t:
# container-selinux container.fc) or containerd cannot create containers on an enforcing host. A new filesystem
# has no labels, and a root elsewhere than /var/lib/containerd gets them through a file-context equivalence.
containerd_labels() {
  local root=$1 mode
  mode=$(selinux_mode)
  [ "$mode" != Disabled ] || return 0
  if [ "$root" != /var/lib/containerd ]; then
    command -v semanage >/dev/null 2>&1 ||
      die "SELinux is on and containerd's root is $root: semanage (policycoreutils-python-utils) is needed to give it containerd's labels"
    local equivalences
    equivalences=$(semanage fcontext -l -C) || die "semanage fcontext -l -C failed: $equivalences"
    if [[ $'\n'$equivalences$'\n' == *$'\n'"$root = /var/lib/containerd"$'\n'* ]]; then
      ok "SELinux: $root is labelled as /var/lib/containerd"
    else
      run_long semanage fcontext -a -e /var/lib/containerd "$root" || die "semanage fcontext -a -e failed for $root"
      changed "SELinux: $root labelled as /var/lib/containerd from now on"
    fi
  fi
  selinux_relabel "$root"
}

if [ -n "$IMAGE_DISK_PATH" ]; then
  [ -d "$IMAGE_DISK_PATH" ] || die "image directory $IMAGE_DISK_PATH does not exist (mount the disk there first)"
  image_fs=$(stat -c %d "$IMAGE_DISK_PATH")
  root_fs=$(stat -c %d /)
  if [ "$image_fs" = "$root_fs" ]; then
    printf 'warning: %s is on the same filesystem as /: images will fill the OS disk\n' "$IMAGE_DISK_PATH" >&2
  fi
  ok "image directory $IMAGE_DISK_PATH"
  containerd_labels "$IMAGE_DISK_PATH"
  exit 0
fi

device=$IMAGE_DISK_DEVICE
mount_point=$IMAGE_DISK_MOUNT
# The mount point becomes one fstab field and one systemd directive value below, whoever rendered this step.
case $mount_point in
  /*[[:space:][:cntrl:]%\\\"\']*|*/../*|*/..|*/./*|*//*) die "mount point ${mount_point@Q} is not a plain absolute path" ;;
  /*) ;;
  *) die "mount point ${mount_point@Q} is not an absolute path" ;;
esac
[ -b "$device" ] || die "$device is not a block device"
elsewhere=$(findmnt -rn -S "$device" -o TARGET 2>/dev/null | grep -vxF "$mount_point" || true)
[ -z "$elsewhere" ] || die "$device is mounted on $elsewhere: it is not a spare disk for images"

# blkid exits 2 when it finds nothing: the only case in which the device is formatted.
probe_status=0
probe=$(blkid -p -o export "$device") || probe_status=$?
[ "$probe_status" -eq 0 ] || [ "$probe_status" -eq 2 ] || die "blkid -p $device failed ($probe_status)"
fs_type=$(sed -n 's/^TYPE=//p' <<<"$probe")
if [ -n "$fs_type" ]; then
  ok "$device already has a $fs_type filesystem (not formatted)"
elif grep -q '^PTTYPE=' <<<"$probe"; then
  die "$device has a partition table and no filesystem: give a partition (e.g. ${device}p1) or wipe it yourself"
else
  if ! command -v "mkfs.$IMAGE_DISK_FILESYSTEM" >/dev/null 2>&1; then
    tools=$([ "$IMAGE_DISK_FILESYSTEM" = xfs ] && echo xfsprogs || echo e2fsprogs)
    detect_os
    [ "$OS_FAMILY" = rpm ] || pkg_refresh
    pkg_install "$tools"
    changed "$tools installed"
  fi
  run_long mkfs -t "$IMAGE_DISK_FILESYSTEM" "$device"
  changed "$device formatted as $IMAGE_DISK_FILESYSTEM"
fi

uuid=$(blkid -o value -s UUID "$device")
[ -n "$uuid" ] || die "blkid reports no UUID for $device"

# nofail: a missing disk must not stop the host from booting; containerd requires the mount instead (below).
fstab_line="UUID=$uuid $mount_point $(blkid -o value -s TYPE "$device") defaults,nofail 0 2"
fstab=""
if [ -f /etc/fstab ]; then fstab=$(awk -v mp="$mount_point" '$2 != mp' /etc/fstab); fi
if write_if_changed /etc/fstab "${fstab:+$fstab
}$fstab_line"; then
  changed "/etc/fstab mounts UUID=$uuid on $mount_point"
else
  ok "/etc/fstab mounts UUID=$uuid on $mount_point"
fi

unit_dropin=/etc/systemd/system/containerd.service.d/50-mlcluster-image-disk.conf
if write_if_changed "$unit_dropin" "[Unit]
RequiresMountsFor=$mount_point"; then
  systemctl daemon-reload
  changed "containerd requires $mount_point"
else
  ok "containerd requires $mount_point"
fi

if mountpoint -q "$mount_point"; then
  ok "$mount_point mounted"
else
  mkdir -p "$mount_point"
  held=$(ls -A "$mount_point")
  if [ -n "$held" ]; then
    die "$mount_point already holds data that mounting $device would hide: stop containerd and move it first"
  fi
  mount "$mount_point"
  changed "$device mounted on $mount_point"
fi
containerd_labels "$mount_point"
