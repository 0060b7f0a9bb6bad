# shellcheck shell=bash disable=SC2154,SC2034 # sourced: globals of the sourcing script
# What the emulated board needs built, for run.sh and tests.sh: the kernel,
# OpenSBI and BusyBox (build.sh), the riscv32imac aesd assembled into an
# overlay, and the host aesload and aescrypt. A failed step shows its log's tail and
# exits 3 (build_fail). Reads $repo and $TARGET (board.sh).

# build_fail MSG: a build or setup step failed (exit 3).
build_fail() {
	failed=1
	printf '%s: %s\n' "${0##*/}" "$*" >&2
	exit 3
}

# log_tail LOG: the end of a build log, without cargo's "Compiling" lines.
log_tail() {
	grep -v '^ *Compiling' "$1" | tail -n 30 >&2
}

# build_board_images [build.sh ARG...]: kernel, OpenSBI, BusyBox into
# $AESD_QEMU_HOME/out (cached: a second run takes about a second).
build_board_images() {
	"$repo/buildroot-overlay/qemu/build.sh" "$@" || build_fail "buildroot-overlay/qemu/build.sh failed (see above)"
}

# build_board_overlay OUT LOGDIR: the riscv32imac aesd (scripts/cross/
# setup.sh + build-all.sh), assembled with the overlay into OUT.
build_board_overlay() {
	local out=$1 log=$2/cargo-riscv32.log profile
	"$repo/scripts/cross/setup.sh" >>"$log" 2>&1 ||
		{
			tail -n 30 "$log" >&2
			build_fail "scripts/cross/setup.sh failed"
		}
	"$repo/scripts/cross/build-all.sh" --no-check "$TARGET" >>"$log" 2>&1 ||
		{
			log_tail "$log"
			build_fail "scripts/cross/build-all.sh $TARGET failed"
		}
	profile="$(aesd_default_profile "$repo")"
	[[ "$profile" == dev ]] && profile=debug
	"$repo/buildroot-overlay/assemble.sh" --target "$TARGET" --bin "${CARGO_TARGET_DIR:-$repo/target}/$TARGET/$profile" \
		--out "$out" >"$2/assemble.log" 2>&1 ||
		{
			cat "$2/assemble.log" >&2
			build_fail "buildroot-overlay/assemble.sh failed"
		}
}

# build_host_aesload LOGDIR: cargo build --release of the host aesload; sets
# $aesload to it.
build_host_aesload() {
	local log=$1/cargo-host.log
	(cd "$repo" && cargo build --release --locked -p aesd-load --bin aesload) >"$log" 2>&1 ||
		{
			log_tail "$log"
			build_fail "building the host aesload failed"
		}
	aesload="${CARGO_TARGET_DIR:-$repo/target}/release/aesload"
}

# build_host_aescrypt LOGDIR: cargo build --release of the host aescrypt
# (--smoke's by-name jobs); sets $aescrypt to it.
build_host_aescrypt() {
	local log=$1/cargo-host.log
	(cd "$repo" && cargo build --release --locked -p aesd-client --bin aescrypt) >>"$log" 2>&1 ||
		{
			log_tail "$log"
			build_fail "building the host aescrypt failed"
		}
	aescrypt="${CARGO_TARGET_DIR:-$repo/target}/release/aescrypt"
}
