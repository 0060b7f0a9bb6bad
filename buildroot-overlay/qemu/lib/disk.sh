# shellcheck shell=bash disable=SC2154,SC2034 # sourced: globals of the sourcing script
# The board's disk: an ext2 image attached as virtio-blk (board.sh), which
# the guest's S10disk mounts on /var/lib/aesd, where aesd keeps its sealed
# keyring (guest/etc/default/aesd). With --disk FILE ($disk_file) the image
# is FILE, made on first use and kept, so the board's keys survive its
# reboots and run.sh's runs; without it, a fresh image in the run's work
# folder, gone at exit. Reads $disk_file and $run; sets $disk and
# $disk_desc. A failed step exits 3 (build_fail, builds.sh).

# The size of a new image: the keyring takes a few KiB; ext2 needs room for
# its own tables, and the rest is spare for an audit log.
DISK_SIZE=16M
DISK_LABEL=aesd-keyring

disk=""
disk_desc=""

# new_disk FILE: an empty ext2 file system of DISK_SIZE in FILE.
new_disk() {
	if ! { truncate -s "$DISK_SIZE" "$1" && mke2fs -q -F -t ext2 -L "$DISK_LABEL" "$1"; } 2>"$run/mke2fs.err"; then
		cat "$run/mke2fs.err" >&2
		build_fail "could not make an ext2 image in $1 (mke2fs -t ext2)"
	fi
}

# prepare_disk: the image for this run.
prepare_disk() {
	apt_install e2fsprogs || build_fail "apt-get install e2fsprogs (mke2fs) failed"
	if [[ -z "$disk_file" ]]; then
		disk="$run/disk.img"
		new_disk "$disk"
		disk_desc="a new $DISK_SIZE ext2 image in the run's folder (the keyring is gone after this run; --disk FILE keeps it)"
	elif [[ -e "$disk_file" ]]; then
		disk="$(cd "$(dirname "$disk_file")" && pwd)/$(basename "$disk_file")"
		# The file system's type from its superblock, without mounting it.
		if ! blkid -p -s TYPE -o value "$disk" 2>/dev/null | grep -qx ext2; then
			echo "run.sh: --disk $disk_file is not an ext2 image (run.sh makes one when the file does not exist; mke2fs -t ext2 FILE makes one by hand)" >&2
			exit 2
		fi
		disk_desc="$disk (kept: the keyring from its earlier runs)"
	else
		disk="$(cd "$(dirname "$disk_file")" && pwd)/$(basename "$disk_file")"
		new_disk "$disk"
		disk_desc="$disk (new, kept after the run)"
	fi
	say "disk: $disk_desc"
}
