#!/usr/bin/env bash
# Builds what the emulated board boots, once, into a cache outside the
# repository (buildroot-overlay/qemu/run.sh calls it; see --help):
#   - an rv32 Linux kernel (Debian's linux-source-6.1, tinyconfig +
#     kernel.fragment) and the kernel's usr/gen_init_cpio for the initramfs
#   - an rv32 OpenSBI (Debian trixie's opensbi 1.6 orig tarball), fw_dynamic
#   - a static BusyBox 1.35 (Debian bookworm's orig tarball, defconfig +
#     busybox.fragment) built with zig's musl, like the board's binaries
# Each part is rebuilt only when its inputs change (stamp files hold a hash of
# them), and a second run exits in about a second.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$repo/scripts/lib.sh"
# shellcheck source=scripts/cross/env.sh
. "$repo/scripts/cross/env.sh"

# --- Pinned sources ---------------------------------------------------------
# The kernel is whatever linux-source-6.1 Debian 12 currently ships (its
# version is part of the kernel's stamp). The other two are fixed upstream
# tarballs, fetched from Debian's archive and checked against these hashes
# (which equal the ones in Debian's signed Sources index).
LINUX_PACKAGE="linux-source-6.1"
LINUX_TARBALL="/usr/src/linux-source-6.1.tar.xz"
OPENSBI_SUITE="trixie" # bookworm's opensbi 1.1 is not downloadable here
OPENSBI_DEBIAN_VERSION="1.6-1"
OPENSBI_ORIG="opensbi_1.6.orig.tar.gz"
OPENSBI_SHA256="d11702103f177a2914e94eec57ce5ed820296d874f6b6525c4482e55d71a3667"
BUSYBOX_SUITE="bookworm"
BUSYBOX_DEBIAN_VERSION="1:1.35.0-4+deb12u1"
BUSYBOX_ORIG="busybox_1.35.0.orig.tar.bz2"
BUSYBOX_SHA256="faeeb244c35a348a334f4a59e44626ee870fb07b6884d68c10ae8bc19f83a694"
MIRROR="${AESD_QEMU_MIRROR:-http://deb.debian.org/debian}"

# The ISA the firmware is compiled for: the board's (rv32imac, Zicsr and
# Zifencei spelled out for GCC 12).
OPENSBI_ISA="rv32imac_zicsr_zifencei"
CROSS="riscv64-linux-gnu-"

# Bump a recipe when its build commands below change: it is part of the stamp.
KERNEL_RECIPE="kernel v1: tinyconfig + kernel.fragment, olddefconfig, Image; gen_init_cpio"
OPENSBI_RECIPE="opensbi v1: PLATFORM=generic XLEN=32 fw_dynamic"
BUSYBOX_RECIPE="busybox v1: defconfig + busybox.fragment, oldconfig, busybox-cc.sh, busybox.links"

AESD_QEMU_HOME="${AESD_QEMU_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-qemu}"
jobs="${AESD_JOBS:-2}"
rebuild=0
deps_only=0
extra_fragment=""
kernel_only=0

usage() {
	cat <<EOF
Usage: buildroot-overlay/qemu/build.sh [--rebuild] [--jobs N] [--deps-only]
       [--extra-fragment FILE] [--kernel-only] [-h|--help]

Builds the emulated board's kernel, firmware and BusyBox into the cache
  \$AESD_QEMU_HOME (default \${XDG_CACHE_HOME:-\$HOME/.cache}/aesd-qemu, now
  $AESD_QEMU_HOME)
and leaves them in its out/ folder: Image (rv32 Linux), fw_dynamic.bin
(rv32 OpenSBI), busybox + busybox.links (static, rv32imac), gen_init_cpio.
Nothing goes into the repository. buildroot-overlay/qemu/run.sh runs it.

  --rebuild   rebuild all three from scratch (fresh sources), even if the
              stamps match
  --jobs N    parallel make jobs [\$AESD_JOBS or 2]
  --deps-only only install the Debian packages the build needs, then exit
              (scripts/test.sh does this first, then builds in the
              background while other steps run, so that no two apt-get
              runs meet)
  --extra-fragment FILE
              a second kernel fragment applied after kernel.fragment (its
              lines are checked the same way and are part of the stamp):
              soc/sim/build-board.sh builds the LiteX board's kernel so, with
              AESD_QEMU_HOME pointing at a cache of its own
  --kernel-only
              build (or check) the kernel and gen_init_cpio only
  -h, --help  this help

Every part is rebuilt when its inputs change: kernel.fragment, busybox.fragment,
busybox-cc.sh, the linux-source-6.1 version, the compilers, or the recipe.
Installs what it needs with apt (gcc-riscv64-linux-gnu, flex, bison, bc,
make, gcc, linux-source-6.1, ...). The two tarballs come from Debian's archive
through apt with a private deb-src list inside the cache (nothing is added to
/etc/apt; the list is deleted after the download) and must match pinned
SHA-256 hashes. Concurrent runs wait for each other (flock on the cache,
at most 3600 s).

Environment: AESD_QEMU_HOME (cache), AESD_JOBS (make -j), AESD_QEMU_MIRROR
(Debian mirror, default http://deb.debian.org/debian).
Limits: a cold cache needs about 1.6 GB of disk (mostly the kernel tree, kept
for incremental rebuilds) and took 10-13 minutes on 2 busy cores (kernel 7-11,
BusyBox 2, OpenSBI 0.5); a kernel.fragment edit rebuilds in about 15 s.

Exit status: 0 built or up to date, 1 a step failed (the message names it and
the end of its log is shown; full logs in \$AESD_QEMU_HOME/logs/), 2 bad usage.
EOF
}

trap 'echo "build.sh: unexpected failure at line $LINENO (exit $?)" >&2' ERR

while (($#)); do
	case "$1" in
		--rebuild) rebuild=1 ;;
		--jobs)
			jobs="${2:?--jobs needs a value}"
			shift
			;;
		--jobs=*) jobs="${1#*=}" ;;
		--deps-only) deps_only=1 ;;
		--extra-fragment)
			extra_fragment="${2:?--extra-fragment needs a file}"
			shift
			;;
		--kernel-only) kernel_only=1 ;;
		-h | --help)
			usage
			exit 0
			;;
		*)
			echo "build.sh: unknown argument $1 (try --help)" >&2
			exit 2
			;;
	esac
	shift
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || {
	echo "build.sh: --jobs needs a positive number, not '$jobs'" >&2
	exit 2
}

if [[ -n "$extra_fragment" ]]; then
	[[ -f "$extra_fragment" ]] || {
		echo "build.sh: --extra-fragment: no such file: $extra_fragment" >&2
		exit 2
	}
	extra_fragment="$(cd "$(dirname "$extra_fragment")" && pwd)/$(basename "$extra_fragment")"
fi
fragments=("$here/kernel.fragment")
[[ -z "$extra_fragment" ]] || fragments+=("$extra_fragment")

out="$AESD_QEMU_HOME/out"
logs="$AESD_QEMU_HOME/logs"
src="$AESD_QEMU_HOME/src"

log() { printf '[qemu-build] %s\n' "$*" >&2; }
die() {
	printf 'build.sh: %s\n' "$*" >&2
	exit 1
}

# run_logged NAME CMD...: runs CMD with its output appended to logs/NAME.log;
# on failure shows the end of the log and exits 1.
run_logged() {
	local name="$1"
	shift
	if ! "$@" >>"$logs/$name.log" 2>&1; then
		{
			echo "build.sh: $name: command failed: $*"
			echo "--- last 30 lines of $logs/$name.log:"
			grep -v 'zig: warning' "$logs/$name.log" | tail -n 30
		} >&2
		exit 1
	fi
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# key: prints the stamp (a hash) of the inputs on stdin.
key() { sha256sum | cut -d' ' -f1; }

# up_to_date NAME KEY FILE...: the stamp of NAME is KEY and every FILE exists.
up_to_date() {
	local name="$1" want="$2" f
	shift 2
	((rebuild == 0)) || return 1
	[[ -f "$out/$name.stamp" && "$(cat "$out/$name.stamp")" == "$want" ]] || return 1
	for f in "$@"; do [[ -s "$out/$f" ]] || return 1; done
}

# is_rv32_elf FILE: a little-endian ELF32 for RISC-V (e_machine 243).
is_rv32_elf() {
	local hdr
	hdr="$(od -An -v -t u1 -N 20 "$1" | tr -s ' \n' ' ')"
	[[ "$hdr" =~ ^\ 127\ 69\ 76\ 70\ 1\ 1\ .*\ 243\ 0\ $ ]]
}

# --- Tools --------------------------------------------------------------------
apt_install gcc-riscv64-linux-gnu binutils-riscv64-linux-gnu gcc libc6-dev make flex bison bc \
	xz-utils bzip2 "$LINUX_PACKAGE" apt debian-archive-keyring
[[ -f "$LINUX_TARBALL" ]] || die "$LINUX_TARBALL is missing although $LINUX_PACKAGE is installed"
((deps_only == 0)) || exit 0
if [[ "$("$AESD_ZIG" version 2>/dev/null || true)" != "$AESD_ZIG_VERSION" ]]; then
	die "zig $AESD_ZIG_VERSION not found at $AESD_ZIG (BusyBox is built with it): run scripts/cross/setup.sh"
fi

mkdir -p "$AESD_QEMU_HOME" "$out" "$logs" "$src"
# One build at a time per cache; parallel runs wait, then find it done.
exec 9>"$AESD_QEMU_HOME/.build.lock"
if ! flock -n 9; then
	log "another build holds $AESD_QEMU_HOME/.build.lock; waiting (at most 3600 s)"
	flock -w 3600 9 || die "timed out waiting for $AESD_QEMU_HOME/.build.lock"
fi

# --- Sources from Debian's archive ---------------------------------------------
# fetch_orig SUITE SRCPKG VERSION FILE SHA256: puts FILE (an upstream tarball
# of source package SRCPKG VERSION in Debian SUITE) into src/, checked.
# Uses apt with a private configuration in the cache: a deb-src line for
# SUITE, its own lists and cache; /etc/apt is not touched. The mirror may
# serve the orig tarball without the .dsc (trixie's opensbi here), so the
# file is fetched alone with apt-helper, against the hash from the index.
fetch_orig() {
	local suite="$1" pkg="$2" version="$3" file="$4" pinned="$5"
	local dest="$src/$file"
	if [[ -f "$dest" && "$(sha256_of "$dest")" == "$pinned" ]]; then
		return 0
	fi
	log "fetching $file (Debian $suite, source $pkg $version)"
	local aptdir="$AESD_QEMU_HOME/apt"
	rm -rf "$aptdir"
	mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial" "$aptdir/sources.list.d"
	printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
		"$MIRROR" "$suite" >"$aptdir/sources.list"
	local opts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o "Dir::Etc::SourceParts=$aptdir/sources.list.d"
		-o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache" -o Debug::NoLocking=1
		-o "APT::Sandbox::User=$(id -un)")
	run_logged fetch apt-get "${opts[@]}" update
	local found dir sha
	found="$(apt-cache "${opts[@]}" showsrc --only-source "$pkg" 2>>"$logs/fetch.log" | awk -v ver="$version" -v file="$file" '
		function flush() { if (v == ver && s != "") print d, s; v = ""; d = ""; s = ""; ck = 0 }
		/^$/ { flush(); next }
		/^Version: / { v = $2 }
		/^Directory: / { d = $2 }
		/^Checksums-Sha256:/ { ck = 1; next }
		/^[^ ]/ { ck = 0 }
		ck && $3 == file { s = $1 }
		END { flush() }' | head -n 1)"
	if [[ -n "$found" ]]; then
		read -r dir sha <<<"$found"
		[[ "$sha" == "$pinned" ]] ||
			die "Debian $suite lists $file with SHA-256 $sha, but build.sh pins $pinned: check and update the pin"
	else
		dir="pool/main/${pkg:0:1}/$pkg"
		log "Debian $suite no longer lists $pkg $version; trying $dir/$file with the pinned hash"
	fi
	rm -f "$dest.part"
	run_logged fetch /usr/lib/apt/apt-helper "${opts[@]}" download-file "$MIRROR/$dir/$file" "$dest.part" "SHA256:$pinned"
	mv "$dest.part" "$dest"
	# Remove the apt source line we added (and its lists).
	rm -rf "$aptdir"
}

gcc_version="$("${CROSS}gcc" --version | head -n 1)"
host_gcc_version="$(gcc --version | head -n 1)"

# --- Kernel -------------------------------------------------------------------
linux_version="$(dpkg-query -W -f='${Version}' "$LINUX_PACKAGE")"
kernel_key="$(printf '%s\n' "$KERNEL_RECIPE" "$LINUX_PACKAGE $linux_version" "$gcc_version" "$host_gcc_version" \
	"$(cat "${fragments[@]}")" | key)"
if up_to_date kernel "$kernel_key" Image gen_init_cpio; then
	log "kernel: up to date ($LINUX_PACKAGE $linux_version)"
else
	start=$SECONDS
	: >"$logs/kernel.log"
	tree="$AESD_QEMU_HOME/linux/linux-source-6.1"
	if ((rebuild)) || [[ "$(cat "$AESD_QEMU_HOME/linux/source.version" 2>/dev/null)" != "$linux_version" || ! -f "$tree/Makefile" ]]; then
		log "kernel: unpacking $LINUX_TARBALL ($LINUX_PACKAGE $linux_version, about 1.4 GB)"
		rm -rf "$AESD_QEMU_HOME/linux"
		mkdir -p "$AESD_QEMU_HOME/linux"
		run_logged kernel tar -xJf "$LINUX_TARBALL" -C "$AESD_QEMU_HOME/linux"
		[[ -f "$tree/Makefile" ]] || die "kernel: $LINUX_TARBALL did not unpack to $tree"
		echo "$linux_version" >"$AESD_QEMU_HOME/linux/source.version"
	fi
	log "kernel: configuring (tinyconfig + ${fragments[*]##*/}) and building Image with -j$jobs (log: $logs/kernel.log)"
	kmake=(make -C "$tree" ARCH=riscv "CROSS_COMPILE=$CROSS" "-j$jobs")
	run_logged kernel "${kmake[@]}" tinyconfig
	# (merge_config.sh keeps its temporary files in the current directory.)
	run_logged kernel env -C "$tree" scripts/kconfig/merge_config.sh -m .config "${fragments[@]}"
	run_logged kernel "${kmake[@]}" olddefconfig
	# Every line of the fragment must have survived olddefconfig.
	lost=()
	while IFS= read -r line; do
		if [[ "$line" =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
			grep -qxF "$line" "$tree/.config" || lost+=("$line")
		elif [[ "$line" =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
			if grep -q "^${BASH_REMATCH[1]}=" "$tree/.config"; then lost+=("$line"); fi
		fi
	done < <(cat "${fragments[@]}")
	if ((${#lost[@]})); then
		die "kernel: these lines of ${fragments[*]##*/} did not survive 'make olddefconfig' (a dependency is off, or something selects them): ${lost[*]}"
	fi
	run_logged kernel "${kmake[@]}" Image
	is_rv32_elf "$tree/vmlinux" || die "kernel: $tree/vmlinux is not an rv32 ELF"
	run_logged kernel gcc -O2 -o "$out/gen_init_cpio.new" "$tree/usr/gen_init_cpio.c"
	cp "$tree/arch/riscv/boot/Image" "$out/Image.new"
	cp "$tree/.config" "$out/kernel.config"
	mv "$out/gen_init_cpio.new" "$out/gen_init_cpio"
	mv "$out/Image.new" "$out/Image"
	echo "$kernel_key" >"$out/kernel.stamp"
	log "kernel: built in $((SECONDS - start)) s: $out/Image ($(stat -c %s "$out/Image") bytes)"
fi

((kernel_only == 0)) || exit 0

# --- OpenSBI --------------------------------------------------------------------
opensbi_key="$(printf '%s\n' "$OPENSBI_RECIPE" "$OPENSBI_SHA256" "$OPENSBI_ISA" "$gcc_version" | key)"
if up_to_date opensbi "$opensbi_key" fw_dynamic.bin; then
	log "opensbi: up to date (${OPENSBI_ORIG%.orig.tar.gz})"
else
	start=$SECONDS
	: >"$logs/opensbi.log"
	fetch_orig "$OPENSBI_SUITE" opensbi "$OPENSBI_DEBIAN_VERSION" "$OPENSBI_ORIG" "$OPENSBI_SHA256"
	log "opensbi: building fw_dynamic for rv32 ($OPENSBI_ISA) (log: $logs/opensbi.log)"
	rm -rf "$AESD_QEMU_HOME/opensbi"
	mkdir -p "$AESD_QEMU_HOME/opensbi"
	run_logged opensbi tar -xzf "$src/$OPENSBI_ORIG" -C "$AESD_QEMU_HOME/opensbi"
	sbi_tree="$(find "$AESD_QEMU_HOME/opensbi" -mindepth 1 -maxdepth 1 -type d | head -n 1)"
	[[ -f "$sbi_tree/Makefile" ]] || die "opensbi: $OPENSBI_ORIG did not unpack as expected"
	run_logged opensbi make -C "$sbi_tree" "-j$jobs" "O=$AESD_QEMU_HOME/opensbi/build" "CROSS_COMPILE=$CROSS" \
		PLATFORM=generic PLATFORM_RISCV_XLEN=32 "PLATFORM_RISCV_ISA=$OPENSBI_ISA"
	fw="$AESD_QEMU_HOME/opensbi/build/platform/generic/firmware"
	is_rv32_elf "$fw/fw_dynamic.elf" || die "opensbi: $fw/fw_dynamic.elf is not an rv32 ELF"
	cp "$fw/fw_dynamic.bin" "$out/fw_dynamic.bin.new"
	mv "$out/fw_dynamic.bin.new" "$out/fw_dynamic.bin"
	echo "$opensbi_key" >"$out/opensbi.stamp"
	log "opensbi: built in $((SECONDS - start)) s: $out/fw_dynamic.bin"
fi

# --- BusyBox --------------------------------------------------------------------
busybox_key="$(printf '%s\n' "$BUSYBOX_RECIPE" "$BUSYBOX_SHA256" "zig $AESD_ZIG_VERSION" "$host_gcc_version" \
	"$(cat "$here/busybox.fragment" "$here/busybox-cc.sh" "$repo/scripts/cross/zigcc.sh")" | key)"
if up_to_date busybox "$busybox_key" busybox busybox.links; then
	log "busybox: up to date (${BUSYBOX_ORIG%.orig.tar.bz2})"
else
	start=$SECONDS
	: >"$logs/busybox.log"
	fetch_orig "$BUSYBOX_SUITE" busybox "$BUSYBOX_DEBIAN_VERSION" "$BUSYBOX_ORIG" "$BUSYBOX_SHA256"
	log "busybox: building a static rv32imac BusyBox with zig cc -j$jobs (log: $logs/busybox.log)"
	rm -rf "$AESD_QEMU_HOME/busybox"
	mkdir -p "$AESD_QEMU_HOME/busybox"
	run_logged busybox tar -xjf "$src/$BUSYBOX_ORIG" -C "$AESD_QEMU_HOME/busybox"
	bb_tree="$(find "$AESD_QEMU_HOME/busybox" -mindepth 1 -maxdepth 1 -type d | head -n 1)"
	[[ -f "$bb_tree/Makefile" ]] || die "busybox: $BUSYBOX_ORIG did not unpack as expected"
	bmake=(make -C "$bb_tree" HOSTCC=gcc "CC=$here/busybox-cc.sh" "CROSS_COMPILE=$CROSS")
	run_logged busybox "${bmake[@]}" defconfig
	# Apply the fragment: drop each symbol's line, then append the wanted one.
	while IFS= read -r line; do
		if [[ "$line" =~ ^(CONFIG_[A-Za-z0-9_]+)= || "$line" =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
			sym="${BASH_REMATCH[1]}"
			sed -i -e "/^$sym=/d" -e "/^# $sym is not set\$/d" "$bb_tree/.config"
			echo "$line" >>"$bb_tree/.config"
		fi
	done <"$here/busybox.fragment"
	# BusyBox's kconfig has no olddefconfig: answer every new question with
	# its default.
	(yes '' || true) | run_logged busybox "${bmake[@]}" oldconfig
	lost=()
	while IFS= read -r line; do
		if [[ "$line" =~ ^CONFIG_[A-Za-z0-9_]+= ]]; then
			grep -qxF "$line" "$bb_tree/.config" || lost+=("$line")
		elif [[ "$line" =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
			if grep -q "^${BASH_REMATCH[1]}=" "$bb_tree/.config"; then lost+=("$line"); fi
		fi
	done <"$here/busybox.fragment"
	((${#lost[@]} == 0)) || die "busybox: these lines of busybox.fragment did not survive 'make oldconfig': ${lost[*]}"
	run_logged busybox "${bmake[@]}" "-j$jobs" busybox
	run_logged busybox "${bmake[@]}" busybox.links
	is_rv32_elf "$bb_tree/busybox" || die "busybox: $bb_tree/busybox is not an rv32 ELF"
	grep -qx /sbin/init "$bb_tree/busybox.links" || die "busybox: no init applet in busybox.links"
	cp "$bb_tree/busybox" "$out/busybox.new"
	cp "$bb_tree/busybox.links" "$out/busybox.links.new"
	cp "$bb_tree/.config" "$out/busybox.config"
	mv "$out/busybox.new" "$out/busybox"
	mv "$out/busybox.links.new" "$out/busybox.links"
	echo "$busybox_key" >"$out/busybox.stamp"
	log "busybox: built in $((SECONDS - start)) s: $out/busybox ($(stat -c %s "$out/busybox") bytes, $(wc -l <"$out/busybox.links") applets)"
fi
