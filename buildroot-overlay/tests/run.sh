#!/usr/bin/env bash
# Tests of buildroot-overlay/ (run buildroot-overlay/tests/setup.sh first):
#   - shellcheck on every script (S50aesd and /etc/default/aesd as POSIX sh);
#   - the shipped configurations pass `aesd --check-config`; the sysctl file
#     names real keys and BusyBox's sysctl parses it;
#   - assemble.sh builds the expected tree and tarball with the expected modes
#     and refuses wrong, dynamic or missing binaries;
#   - the Buildroot package's install commands (run with stand-ins for
#     Buildroot) and the Kconfig files + defconfig fragment (kconfiglib);
#   - the systemd unit (systemd-analyze verify, offline security score);
#   - S50aesd for real: a chroot built from Debian's busybox-static plus the
#     assembled overlay with a static x86_64 musl aesd, driven through
#     start / status / restart / stop and failure cases, with real jobs sent
#     by aescrypt from the host over 127.0.0.1 and checked with openssl.
# Only loopback addresses are used. Every process started in the sandbox or
# in the background is killed on exit, also on failure or interruption.
#
#   buildroot-overlay/tests/run.sh [--profile P] [--no-build] [--keep] [-v]
#     --profile P the cargo profile of the static x86_64 musl binaries:
#                 release (the default), dev, or overlay-test (what
#                 scripts/test.sh uses: no fat-LTO link, unoptimised
#                 dependencies; the init script is what is tested)
#     --no-build  use the existing target/x86_64-unknown-linux-musl/<profile>
#                 binaries instead of running cargo build first
#     --keep      keep the work directory (sandbox, logs) for inspection;
#                 it is also kept when a test fails
#     -v          also print the output of passing tests
#
# Honours CARGO_TARGET_DIR. The last line is "N passed, M failed"; the exit
# status is 0 only when nothing failed.
#
# Layout: harness.sh runs the tests (registration, counting, a temp folder
# per test, the summary); cases/*.sh define and register them, in the order
# they run; sandbox.sh is the chroot the S50aesd tests use.
# shellcheck disable=SC2016 # literal $ and backquotes in patterns on purpose
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
overlay_dir=$(cd "$here/.." && pwd)
repo=$(cd "$overlay_dir/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$repo/scripts/lib.sh"
# shellcheck source=buildroot-overlay/tests/harness.sh
. "$here/harness.sh"
# shellcheck source=buildroot-overlay/tests/sandbox.sh
. "$here/sandbox.sh"
musl=x86_64-unknown-linux-musl
target_dir=${CARGO_TARGET_DIR:-$repo/target}
profile=release
venv=${XDG_CACHE_HOME:-$HOME/.cache}/aesd-buildroot-overlay/venv

build=1
while (($#)); do
	arg=$1
	case "$arg" in
		--profile)
			profile=${2:?--profile needs release, dev or overlay-test}
			shift
			;;
		--no-build) build=0 ;;
		--keep) harness_keep=1 ;;
		-v | --verbose) harness_verbose=1 ;;
		-h | --help)
			sed -n '2,29p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
			exit 0
			;;
		*)
			echo "run.sh: unknown argument: $arg" >&2
			exit 2
			;;
	esac
	shift
done
case "$profile" in
	release) bin_dir=$target_dir/$musl/release ;;
	dev) bin_dir=$target_dir/$musl/debug ;;
	overlay-test) bin_dir=$target_dir/$musl/overlay-test ;;
	*)
		echo "run.sh: --profile must be release, dev or overlay-test, not '$profile'" >&2
		exit 2
		;;
esac

harness_init aesd-overlay-test
# State shared by the tests, in the work folder.
work=$harness_work
sandbox=$work/root
overlay_out=$work/overlay
host_pids_file=$work/host.pids
: >"$host_pids_file"

# At exit: stop everything started in the sandbox or in the background.
harness_cleanup() {
	local pids
	mapfile -t pids < <(
		sandbox_pids
		cat "$host_pids_file" 2>/dev/null
	)
	if [ "${#pids[@]}" -gt 0 ]; then
		stop_pids "${pids[@]}"
	fi
}

# After a failed test: nothing it started in the sandbox survives it.
harness_after_failure() {
	reset_sandbox
}

# setup_failed MESSAGE: the tests cannot run.
setup_failed() {
	echo "run.sh: $*" >&2
	echo "0 passed, 1 failed"
	exit 1
}

missing=()
for tool in shellcheck busybox openssl unshare make od tar; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
	setup_failed "missing ${missing[*]}: run buildroot-overlay/tests/setup.sh first"
fi

if [ "$build" = 1 ]; then
	echo "building static aesd + aescrypt ($musl, $profile)..."
	start_time=$SECONDS
	if ! (cd "$repo" && cargo build --profile "$profile" --locked --target "$musl" -p aesd-server -p aesd-client) >"$work/build.log" 2>&1; then
		tail -n 30 "$work/build.log"
		setup_failed "cargo build failed"
	fi
	echo "built in $((SECONDS - start_time)) s"
fi
for binary in aesd aescrypt; do
	[ -x "$bin_dir/$binary" ] || setup_failed "no $bin_dir/$binary (drop --no-build)"
done
printf 'aesd test password %s\n' "$RANDOM$RANDOM" >"$work/pw"
chmod 600 "$work/pw"
port=$(free_port)

# shellcheck source=buildroot-overlay/tests/cases/shellcheck.sh
. "$here/cases/shellcheck.sh"
# shellcheck source=buildroot-overlay/tests/cases/configs.sh
. "$here/cases/configs.sh"
# shellcheck source=buildroot-overlay/tests/cases/assemble.sh
. "$here/cases/assemble.sh"
# shellcheck source=buildroot-overlay/tests/cases/br2-external.sh
. "$here/cases/br2-external.sh"
# shellcheck source=buildroot-overlay/tests/cases/systemd.sh
. "$here/cases/systemd.sh"
# shellcheck source=buildroot-overlay/tests/cases/s50aesd.sh
. "$here/cases/s50aesd.sh"
# shellcheck source=buildroot-overlay/tests/cases/s50aesd-failures.sh
. "$here/cases/s50aesd-failures.sh"

harness_run
