#!/usr/bin/env bash
# Assembles a ready-to-use root filesystem overlay for aesd: the files of
# buildroot-overlay/rootfs/ plus the cross-built aesd binary at /usr/bin/aesd,
# with the modes the board needs. Optionally packs it as a .tar.gz whose
# entries are owned by root (extract it with `tar -xzf FILE -C /`).
#
#   buildroot-overlay/assemble.sh [--target TRIPLE] [--bin DIR] [--out DIR] [--tar FILE]
#
# See --help. Exit status: 0 done, 1 a problem with the binary or the output,
# 2 bad usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
rootfs="$here/rootfs"

target="riscv32imac-unknown-linux-musl"
bin_dir=""
out=""
tarball=""

usage() {
	cat <<EOF
Usage: buildroot-overlay/assemble.sh [--target TRIPLE] [--bin DIR] [--out DIR] [--tar FILE]

Assembles the aesd root filesystem overlay: buildroot-overlay/rootfs/ plus the
aesd binary installed as /usr/bin/aesd (0755), the init script
/etc/init.d/S50aesd (0755) and the other files (0644).

  --target TRIPLE  Rust target of the binary [riscv32imac-unknown-linux-musl]
                   (the Arty A7 SoC; aarch64-unknown-linux-musl for a Pi 4,
                   x86_64-unknown-linux-musl for tests on a PC)
  --bin DIR        directory holding the built 'aesd'
                   [\${CARGO_TARGET_DIR:-<repo>/target}/TRIPLE/release, else the
                   newest other non-debug profile directory there with an aesd]
  --out DIR        where to assemble the overlay [<repo>/target/aesd-overlay/TRIPLE];
                   a non-empty DIR must be an earlier assembly (it is replaced)
  --tar FILE       also pack the overlay as FILE (.tar.gz, root-owned entries;
                   SOURCE_DATE_EPOCH, if set, fixes the mtimes)
  -h, --help       this help

The binary must be an ELF for TRIPLE's architecture and statically linked
(the board's libc is not the one it was built against).
EOF
}

die() {
	echo "assemble.sh: $*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case "$1" in
		--target)
			target=${2:?--target needs a value}
			shift 2
			;;
		--target=*)
			target=${1#*=}
			shift
			;;
		--bin)
			bin_dir=${2:?--bin needs a value}
			shift 2
			;;
		--bin=*)
			bin_dir=${1#*=}
			shift
			;;
		--out)
			out=${2:?--out needs a value}
			shift 2
			;;
		--out=*)
			out=${1#*=}
			shift
			;;
		--tar)
			tarball=${2:?--tar needs a value}
			shift 2
			;;
		--tar=*)
			tarball=${1#*=}
			shift
			;;
		-h | --help)
			usage
			exit 0
			;;
		*)
			echo "assemble.sh: unknown argument: $1" >&2
			usage >&2
			exit 2
			;;
	esac
done

cargo_target_dir=${CARGO_TARGET_DIR:-$repo/target}
if [ -z "$bin_dir" ]; then
	# The release profile's directory, else another profile's (a cross-build
	# may use its own profile) holding an aesd, the newest first.
	bin_dir="$cargo_target_dir/$target/release"
	if [ ! -f "$bin_dir/aesd" ]; then
		other=""
		for candidate in "$cargo_target_dir/$target"/*/aesd; do
			case "$candidate" in */debug/aesd) continue ;; esac
			if [ -f "$candidate" ] && { [ -z "$other" ] || [ "$candidate" -nt "$other" ]; }; then
				other=$candidate
			fi
		done
		if [ -n "$other" ]; then
			bin_dir=$(dirname "$other")
			echo "assemble.sh: no release build; using $other" >&2
		fi
	fi
fi
[ -n "$out" ] || out="$repo/target/aesd-overlay/$target"
binary="$bin_dir/aesd"

# Prints the command that builds aesd for $target.
build_hint() {
	if command -v rustc >/dev/null 2>&1 && rustc --print target-list 2>/dev/null | grep -qx "$target"; then
		echo "  rustup target add $target"
		echo "  cargo build --release -p aesd-server --target $target"
		return
	fi
	# Not a built-in Rust target (riscv32imac-unknown-linux-musl is not one):
	# it is built by the project's cross-build from a target specification.
	local script spec
	# The project's cross-build script: scripts/cross/*build*, else any
	# script under scripts/ whose path names cross, riscv or the target.
	script=$(find "$repo/scripts" -maxdepth 2 -type f -path "*cross*" -name "*build*" 2>/dev/null | sort | head -n 1 || true)
	if [ -z "$script" ]; then
		script=$(find "$repo/scripts" -maxdepth 2 -type f ! -name setup.sh \( -path "*cross*" -o -name "*riscv*" -o -name "*$target*" \) 2>/dev/null | sort | head -n 1 || true)
	fi
	if [ -n "$script" ]; then
		echo "  ${script#"$repo"/}    (the project's cross-build; see its --help)"
	fi
	spec=$(find "$repo" -path "$repo/target" -prune -o -name "$target.json" -print 2>/dev/null | head -n 1 || true)
	if [ -n "$spec" ]; then
		echo "  cargo +nightly build --release -p aesd-server --target ${spec#"$repo"/} -Z build-std=std,panic_abort"
	elif [ -z "$script" ]; then
		echo "  cargo +nightly build --release -p aesd-server --target <spec>/$target.json -Z build-std=std,panic_abort"
		echo "  ($target is not a built-in Rust target: it needs the project's target"
		echo "   specification and cross-build setup; see docs/targets.md)"
	fi
}

# Reads N little-endian bytes of FILE at OFFSET as an unsigned number.
le() {
	local file=$1 offset=$2 count=$3 value=0 i
	local -a bytes
	read -r -a bytes < <(od -An -v -t u1 -j "$offset" -N "$count" "$file")
	[ "${#bytes[@]}" -eq "$count" ] || return 1
	for ((i = count - 1; i >= 0; i--)); do
		value=$((value * 256 + bytes[i]))
	done
	echo "$value"
}

# Prints "CLASS MACHINE INTERP" of an ELF file: 32|64, e_machine number,
# yes|no for a PT_INTERP program header (a dynamically linked program).
elf_info() {
	local file=$1 magic class machine phoff phentsize phnum i type interp=no
	magic=$(od -An -v -t x1 -N 4 "$file" | tr -d ' \n')
	[ "$magic" = "7f454c46" ] || return 1
	class=$(le "$file" 4 1)
	[ "$(le "$file" 5 1)" = 1 ] || return 1 # little-endian only
	machine=$(le "$file" 18 2)
	if [ "$class" = 1 ]; then
		class=32 phoff=$(le "$file" 28 4) phentsize=$(le "$file" 42 2) phnum=$(le "$file" 44 2)
	else
		class=64 phoff=$(le "$file" 32 8) phentsize=$(le "$file" 54 2) phnum=$(le "$file" 56 2)
	fi
	for ((i = 0; i < phnum; i++)); do
		type=$(le "$file" $((phoff + i * phentsize)) 4)
		if [ "$type" = 3 ]; then
			interp=yes
		fi
	done
	echo "$class $machine $interp"
}

# Prints "CLASS MACHINE" expected for the target triple's architecture.
expected_elf() {
	case "${target%%-*}" in
		riscv32*) echo "32 243" ;;
		riscv64*) echo "64 243" ;;
		x86_64) echo "64 62" ;;
		aarch64) echo "64 183" ;;
		arm* | thumb*) echo "32 40" ;;
		i?86) echo "32 3" ;;
		*) return 1 ;;
	esac
}

if [ ! -f "$binary" ]; then
	{
		echo "assemble.sh: no aesd binary for $target at $binary"
		echo "Build it with:"
		build_hint
		echo "or point --bin at the directory that holds it."
	} >&2
	exit 1
fi
[ -x "$binary" ] || die "$binary is not executable"

info=$(elf_info "$binary") || die "$binary is not a little-endian ELF executable"
read -r class machine interp <<<"$info"
if want=$(expected_elf); then
	[ "$class $machine" = "$want" ] ||
		die "$binary is an ELF$class for machine $machine, not for $target (expects ELF${want% *}, machine ${want#* }): wrong --bin or --target?"
else
	echo "assemble.sh: warning: unknown architecture in $target, ELF machine not checked" >&2
fi
[ "$interp" = no ] ||
	die "$binary is dynamically linked (it has a program interpreter); the board needs a static build (a *-linux-musl target)"

[ -f "$rootfs/etc/init.d/S50aesd" ] || die "missing $rootfs (run from a complete checkout)"

# The output: a new or empty directory, or an earlier assembly (replaced).
if [ -e "$out" ]; then
	[ -d "$out" ] || die "--out $out exists and is not a directory"
	if [ -n "$(ls -A "$out")" ]; then
		if [ ! -f "$out/usr/bin/aesd" ] || [ ! -f "$out/etc/init.d/S50aesd" ]; then
			die "--out $out is not empty and is not an earlier aesd overlay; give a new or empty directory"
		fi
		rm -rf "${out:?}"
	fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Copies rootfs/: directories 0755, init scripts 0755, everything else 0644.
(
	cd "$rootfs"
	find . -type d -print0 | while IFS= read -r -d '' dir; do
		install -d -m 0755 "$out/$dir"
	done
	find . -type f -print0 | while IFS= read -r -d '' file; do
		case "$file" in
			./etc/init.d/*) mode=0755 ;;
			*) mode=0644 ;;
		esac
		install -m "$mode" "$file" "$out/$file"
	done
)
install -d -m 0755 "$out/usr" "$out/usr/bin"
install -m 0755 "$binary" "$out/usr/bin/aesd"

echo "Assembled the aesd overlay for $target in $out:"
(cd "$out" && find . -mindepth 1 | sort | while IFS= read -r path; do
	printf '  %s %s\n' "$(stat -c %a "$path")" "${path#./}"
done)

if [ -n "$tarball" ]; then
	mkdir -p "$(dirname "$tarball")"
	tar_args=(--sort=name --owner=0 --group=0 --numeric-owner)
	if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
		tar_args+=(--mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime)
	fi
	tar "${tar_args[@]}" -czf "$tarball" -C "$out" .
	echo "Packed it as $tarball (extract on the target with: tar -xzf $(basename "$tarball") -C /)"
fi
