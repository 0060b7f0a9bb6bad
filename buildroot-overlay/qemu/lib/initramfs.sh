# shellcheck shell=bash disable=SC2154 # sourced: globals of the sourcing script
# The emulated board's initramfs, $run/initramfs.cpio.gz: a Buildroot-like
# skeleton, BusyBox and its applet links, the overlay as is (modes included:
# a broken overlay stays broken), then the emulated board's own files
# (qemu/guest/), whose only overlaps with the overlay are
# etc/network/interfaces and etc/default/aesd (the board's address, and its
# keyring on the disk), and the users of buildroot-overlay/users.table.
# Reads $run, $images (build.sh's out/), $overlay and $repo; a failed step
# exits 3 (build_fail, builds.sh).

# make_initramfs: lays out $run/rootfs and packs it.
make_initramfs() {
	local root="$run/rootfs"
	mkdir -p "$root"
	(
		cd "$root"
		mkdir -p bin sbin usr/bin usr/sbin etc/init.d proc sys dev tmp run var/log root mnt \
			etc/network/if-pre-up.d etc/network/if-up.d etc/network/if-down.d etc/network/if-post-down.d
		chmod 1777 tmp
		chmod 0700 root
		ln -s ../run var/run
		install -m 0755 "$images/busybox" bin/busybox
		while IFS= read -r link; do
			[[ "$link" == /bin/busybox || -e ".$link" || -L ".$link" ]] && continue
			mkdir -p ".${link%/*}"
			ln -s /bin/busybox ".$link"
		done <"$images/busybox.links"
	) || build_fail "could not lay out the initramfs skeleton in $root"
	cp -a "$overlay/." "$root/" || build_fail "could not copy the overlay $overlay"
	if [[ -f "$overlay/etc/network/interfaces" ]]; then
		say "etc/network/interfaces: the overlay's (board example) is replaced by the emulated board's (10.0.2.15/24, gateway 10.0.2.2)"
	fi
	if [[ -f "$overlay/etc/default/aesd" ]]; then
		say "etc/default/aesd: the overlay's is replaced by the emulated board's (AESD_KEYRING=/var/lib/aesd/keyring on the disk, AESD_HTTP_LISTEN=10.0.2.15:8200)"
	fi
	(
		cd "$repo/buildroot-overlay/qemu/guest"
		find . -type d -printf '%P\n' | while IFS= read -r d; do
			[[ -n "$d" ]] && install -d -m 0755 "$root/$d"
		done
		find . -type f -printf '%P\n' | while IFS= read -r f; do
			case "$f" in
				init | etc/init.d/*) install -m 0755 "$f" "$root/$f" ;;
				*) install -m 0644 "$f" "$root/$f" ;;
			esac
		done
	) || build_fail "could not copy buildroot-overlay/qemu/guest into the initramfs"
	# The aesd user, from the users table an image without the BR2_EXTERNAL
	# package names in BR2_ROOTFS_USERS_TABLES (Buildroot's mkusers adds it).
	bash "$repo/buildroot-overlay/tests/mkusers.sh" "$repo/buildroot-overlay/users.table" "$root" ||
		build_fail "could not add the users of buildroot-overlay/users.table to the initramfs"
	say "users: $(awk -F: '$3 >= 100 && $3 < 65534 { printf "%s%s (uid %s)", sep, $1, $3; sep = ", " }' "$root/etc/passwd") from buildroot-overlay/users.table"
	pack_initramfs "$root"
}

# pack_initramfs ROOT: gen_init_cpio's list of ROOT (every entry owned by
# root, with its mode on disk), packed and gzipped.
pack_initramfs() {
	local root=$1 odd
	odd="$(cd "$root" && find . -mindepth 1 \( -name '*[[:space:]]*' -o \( ! -type d ! -type f ! -type l \) \) -printf '/%P ')"
	[[ -z "$odd" ]] || build_fail "the initramfs cannot hold these (white space in the name, or not a file, folder or symlink): $odd"
	{
		(cd "$root" && find . -mindepth 1 -printf '%y %m %P %l\n' | LC_ALL=C sort -k3) |
			while read -r type mode path target; do
				case "$type" in
					d) printf 'dir /%s 0%s 0 0\n' "$path" "$mode" ;;
					f) printf 'file /%s %s/%s 0%s 0 0\n' "$path" "$root" "$path" "$mode" ;;
					l) printf 'slink /%s %s 0777 0 0\n' "$path" "$target" ;;
				esac
			done
		echo "nod /dev/console 0600 0 0 c 5 1"
	} >"$run/initramfs.list" || build_fail "could not list the initramfs"
	"$images/gen_init_cpio" "$run/initramfs.list" 2>"$run/gen_init_cpio.log" | gzip -6 >"$run/initramfs.cpio.gz" ||
		{
			cat "$run/gen_init_cpio.log" >&2
			build_fail "gen_init_cpio failed"
		}
	say "initramfs: $(stat -c %s "$run/initramfs.cpio.gz") bytes ($(wc -l <"$run/initramfs.list") entries)"
}
