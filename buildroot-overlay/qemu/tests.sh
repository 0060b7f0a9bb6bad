#!/usr/bin/env bash
# Negative tests of the emulated board: `run.sh --smoke` must fail, with a
# message that names what broke, for a broken overlay:
#   noexec       etc/init.d/S50aesd without its execute bits (mode 0644)
#   bad-toml     an unknown key in etc/aesd/aesd.toml (aesd --check-config
#                rejects it, S50aesd exits 6)
#   bad-value    workers = 0 in etc/aesd/aesd.toml (out of range)
#   no-initscript  no etc/init.d/S50aesd at all
#   http-loopback  aesd's HTTP API on the guest's loopback (http-listen in
#                aesd.toml): the host's bao cannot reach the keyring
# and for a disk image that is not ext2 (not-ext2-disk: exit 2, no boot).
# Each other case boots the guest (a few seconds once build.sh's cache is
# warm).
# See --help.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$repo/scripts/lib.sh"
# shellcheck source=scripts/cross/env.sh
. "$repo/scripts/cross/env.sh"
# shellcheck source=buildroot-overlay/tests/harness.sh
. "$repo/buildroot-overlay/tests/harness.sh"
# shellcheck source=buildroot-overlay/qemu/lib/board.sh
. "$here/lib/board.sh"
# shellcheck source=buildroot-overlay/qemu/lib/builds.sh
. "$here/lib/builds.sh"

timeout_s=150
aesload=""
aescrypt=""
usage() {
	cat <<EOF
Usage: buildroot-overlay/qemu/tests.sh [--keep] [--timeout SECS] [--aesload PATH]
       [--aescrypt PATH] [-h|--help]

Runs buildroot-overlay/qemu/run.sh --smoke against broken copies of the
assembled overlay (and a bad --disk) and checks that each run fails (exit 1;
the disk: 2) with the message that names the problem:
  noexec         S50aesd mode 0644   -> "S50aesd is not executable"
  bad-toml       unknown key         -> "aesd --check-config rejected /etc/aesd/aesd.toml: ..."
  bad-value      workers = 0         -> "aesd --check-config rejected /etc/aesd/aesd.toml: ..."
  no-initscript  no S50aesd          -> "S50aesd never ran"
  http-loopback  aesd.toml http-listen = "127.0.0.1:8200"
                                     -> "bao status could not reach the board's HTTP API"
  not-ext2-disk  --disk FILE of zeros -> exit 2, "is not an ext2 image" (no boot)
Builds first what run.sh needs (build.sh, the riscv32imac aesd, the overlay);
run.sh --smoke also needs the bao CLI (\$AESD_BAO or scripts/bao/.venv/bin/bao).

  --keep          keep the work folder (overlays and each run's output);
                  it is also kept when a case fails
  --timeout SECS  run.sh --timeout for each case [$timeout_s]
  --aesload PATH  host aesload for run.sh [built with cargo build --release
                  --locked -p aesd-load]; the cases fail before any load
  --aescrypt PATH host aescrypt for run.sh [built with cargo build --release
                  --locked -p aesd-client]; the cases fail before it is used
  -h, --help      this help

Prints ok/FAIL, the time and run.sh's exit and reason for each case, then
"N passed, M failed" (buildroot-overlay/tests/harness.sh).
Exit status: 0 every case passed, 1 a case failed, 2 bad usage, 3 the
setup (a build or assemble.sh) failed.
EOF
}
while (($#)); do
	case "$1" in
		--keep) harness_keep=1 ;;
		--timeout)
			timeout_s="${2:?--timeout needs a value}"
			shift
			;;
		--aesload)
			aesload="${2:?--aesload needs a value}"
			shift
			;;
		--aescrypt)
			aescrypt="${2:?--aescrypt needs a value}"
			shift
			;;
		-h | --help)
			usage
			exit 0
			;;
		*)
			echo "tests.sh: unknown argument $1 (try --help)" >&2
			exit 2
			;;
	esac
	shift
done
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || {
	echo "tests.sh: --timeout needs a positive number" >&2
	exit 2
}
for tool in "--aesload:$aesload" "--aescrypt:$aescrypt"; do
	if [[ -n "${tool#*:}" && ! -x "${tool#*:}" ]]; then
		echo "tests.sh: ${tool%%:*} ${tool#*:} is not an executable file" >&2
		exit 2
	fi
done

harness_init aesd-qemu-tests
work=$harness_work

step "setup: build.sh, the riscv32imac aesd, the overlay, the host aesload and aescrypt"
build_board_images --jobs "${AESD_JOBS:-2}"
build_board_overlay "$work/good" "$work"
if [[ -z "$aesload" ]]; then build_host_aesload "$work"; fi
if [[ -z "$aescrypt" ]]; then build_host_aescrypt "$work"; fi

# broken_overlay_fails EXPECTED_ERE PREPARE...: (a test) copies the good
# overlay into the test's folder, runs PREPARE... in it, then run.sh --smoke
# on it; passes if run.sh exits 1 and its output matches EXPECTED_ERE.
broken_overlay_fails() {
	local expected="$1"
	shift
	local dir="$test_tmp/overlay" out="$test_tmp/run.out" st=0 why kept
	cp -a "$work/good" "$dir"
	(cd "$dir" && "$@") || die "preparing the case failed: $*"
	if diff -r "$work/good" "$dir" >/dev/null 2>&1 && [[ "$(stat -c %a "$work/good/etc/init.d/S50aesd")" == "$(stat -c %a "$dir/etc/init.d/S50aesd" 2>/dev/null)" ]]; then
		die "preparing the case changed nothing in the overlay: $*"
	fi
	"$here/run.sh" --smoke --overlay "$dir" --aesload "$aesload" --aescrypt "$aescrypt" --timeout "$timeout_s" >"$out" 2>&1 || st=$?
	why="$(grep -m1 'FAILED:' "$out" | sed 's/^run.sh --smoke: FAILED: //' || true)"
	harness_note "exit $st: ${why:-no FAILED line}"
	if ((st != 1)) || ! grep -qE -- "$expected" "$out"; then
		tail -n 20 "$out" >&2
		die "expected exit 1 and /$expected/ in run.sh's output ($out)"
	fi
	# run.sh keeps the work folder of a failed run; here failing is the point.
	kept="$(sed -n 's/^\[emulated-board\] work folder kept: //p' "$out" | tail -n 1)"
	if ((harness_keep == 0)) && [[ "$kept" == */aesd-qemu-run.* && -d "$kept" ]]; then rm -rf "$kept"; fi
}

harness_test noexec broken_overlay_fails 'FAILED: S50aesd is not executable \(mode 644' chmod 0644 etc/init.d/S50aesd
harness_test bad-toml broken_overlay_fails 'FAILED: aesd --check-config rejected /etc/aesd/aesd.toml.*no-such-key' \
	sh -c 'echo "no-such-key = 1" >>etc/aesd/aesd.toml'
harness_test bad-value broken_overlay_fails 'FAILED: aesd --check-config rejected /etc/aesd/aesd.toml.*workers' \
	sed -i 's/^workers = 2$/workers = 0/' etc/aesd/aesd.toml
harness_test no-initscript broken_overlay_fails 'FAILED: S50aesd never ran' rm etc/init.d/S50aesd
harness_test http-loopback broken_overlay_fails 'FAILED: bao status could not reach the board.s HTTP API' \
	sh -c 'echo "http-listen = \"127.0.0.1:8200\"" >>etc/aesd/aesd.toml'

# not_ext2_disk_refused: (a test) run.sh --smoke --disk FILE, FILE not an
# ext2 image, exits 2 saying so, and leaves FILE as it was.
not_ext2_disk_refused() {
	local img="$test_tmp/not-ext2.img" out="$test_tmp/run.out" st=0
	head -c 1048576 /dev/zero >"$img"
	"$here/run.sh" --smoke --overlay "$work/good" --aesload "$aesload" --aescrypt "$aescrypt" --disk "$img" >"$out" 2>&1 || st=$?
	harness_note "exit $st: $(grep -m1 'run.sh: --disk' "$out" || true)"
	if ((st != 2)) || ! grep -q 'is not an ext2 image' "$out"; then
		tail -n 20 "$out" >&2
		die "expected exit 2 and 'is not an ext2 image' in run.sh's output ($out)"
	fi
	cmp -s "$img" <(head -c 1048576 /dev/zero) || die "run.sh changed the refused disk image $img"
}
harness_test not-ext2-disk not_ext2_disk_refused

step "cases (each boots the emulated board, but not-ext2-disk)"
harness_run
