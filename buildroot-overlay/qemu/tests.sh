#!/usr/bin/env bash
# Negative tests of the emulated board: `run.sh --smoke` must fail, with a
# message that names what broke, for a broken overlay:
#   noexec       etc/init.d/S50aesd without its execute bits (mode 0644)
#   bad-toml     an unknown key in etc/aesd/aesd.toml (aesd --check-config
#                rejects it, S50aesd exits 6)
#   bad-value    workers = 0 in etc/aesd/aesd.toml (out of range)
#   no-initscript  no etc/init.d/S50aesd at all
# Each case boots the guest (a few seconds once build.sh's cache is warm).
# See --help.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/cross/env.sh
. "$repo/scripts/cross/env.sh"

TARGET="riscv32imac-unknown-linux-musl"
keep=0
timeout_s=150
aesload=""
usage() {
	cat <<EOF
Usage: buildroot-overlay/qemu/tests.sh [--keep] [--timeout SECS] [--aesload PATH] [-h|--help]

Runs buildroot-overlay/qemu/run.sh --smoke against broken copies of the
assembled overlay and checks that each run fails (exit 1) with the message
that names the problem:
  noexec         S50aesd mode 0644   -> "S50aesd is not executable"
  bad-toml       unknown key         -> "aesd --check-config rejected /etc/aesd/aesd.toml: ..."
  bad-value      workers = 0         -> "aesd --check-config rejected /etc/aesd/aesd.toml: ..."
  no-initscript  no S50aesd          -> "S50aesd never ran"
Builds first what run.sh needs (build.sh, the riscv32imac aesd, the overlay).

  --keep          keep the work folder (overlays and each run's output)
  --timeout SECS  run.sh --timeout for each case [$timeout_s]
  --aesload PATH  host aesload for run.sh [built with cargo build --release
                  --locked -p aesd-client]; the cases fail before any load
  -h, --help      this help

Prints PASS/FAIL and the time of each case, then "N passed, M failed".
Exit status: 0 every case passed, 1 a case failed, 2 bad usage, 3 the
setup (a build or assemble.sh) failed.
EOF
}
while (($#)); do
	case "$1" in
		--keep) keep=1 ;;
		--timeout)
			timeout_s="${2:?--timeout needs a value}"
			shift
			;;
		--aesload)
			aesload="${2:?--aesload needs a value}"
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
if [[ -n "$aesload" && ! -x "$aesload" ]]; then
	echo "tests.sh: --aesload $aesload is not an executable file" >&2
	exit 2
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/aesd-qemu-tests.XXXXXX")"
cleanup() {
	if ((keep)); then echo "tests.sh: work folder kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
setup_fail() {
	echo "tests.sh: setup failed: $*" >&2
	exit 3
}

echo "==> setup: build.sh, the riscv32imac aesd, the overlay, the host aesload" >&2
"$here/build.sh" || setup_fail "buildroot-overlay/qemu/build.sh"
"$repo/scripts/cross/setup.sh" >"$work/setup.log" 2>&1 || {
	tail -n 20 "$work/setup.log" >&2
	setup_fail "scripts/cross/setup.sh"
}
"$repo/scripts/cross/build-all.sh" --no-check "$TARGET" >"$work/build-all.log" 2>&1 ||
	{
		tail -n 20 "$work/build-all.log" >&2
		setup_fail "scripts/cross/build-all.sh $TARGET"
	}
profile="$(aesd_default_profile "$repo")"
[[ "$profile" == dev ]] && profile=debug
"$repo/buildroot-overlay/assemble.sh" --target "$TARGET" --bin "${CARGO_TARGET_DIR:-$repo/target}/$TARGET/$profile" \
	--out "$work/good" >"$work/assemble.log" 2>&1 || {
	cat "$work/assemble.log" >&2
	setup_fail "assemble.sh"
}
if [[ -z "$aesload" ]]; then
	(cd "$repo" && cargo build --release --locked -p aesd-client --bin aesload) >"$work/cargo-host.log" 2>&1 ||
		{
			tail -n 20 "$work/cargo-host.log" >&2
			setup_fail "cargo build -p aesd-client"
		}
	aesload="${CARGO_TARGET_DIR:-$repo/target}/release/aesload"
fi

passed=0
failed=0
# check NAME EXPECTED_ERE PREPARE...: copies the good overlay to NAME, runs
# PREPARE... in it, then run.sh --smoke on it; the case passes if run.sh
# exits 1 and its output matches EXPECTED_ERE.
check() {
	local name="$1" expected="$2"
	shift 2
	local dir="$work/$name" out="$work/$name.out" st=0 t0=$SECONDS
	cp -a "$work/good" "$dir"
	(cd "$dir" && "$@") || {
		echo "tests.sh: preparing case $name failed: $*" >&2
		exit 3
	}
	if diff -r "$work/good" "$dir" >/dev/null 2>&1 && [[ "$(stat -c %a "$work/good/etc/init.d/S50aesd")" == "$(stat -c %a "$dir/etc/init.d/S50aesd" 2>/dev/null)" ]]; then
		echo "tests.sh: preparing case $name changed nothing in the overlay: $*" >&2
		exit 3
	fi
	"$here/run.sh" --smoke --overlay "$dir" --aesload "$aesload" --timeout "$timeout_s" >"$out" 2>&1 || st=$?
	local why
	why="$(grep -m1 'FAILED:' "$out" | sed 's/^run.sh --smoke: FAILED: //' || true)"
	# run.sh keeps the work folder of a failed run; here failing is the point.
	local kept
	kept="$(sed -n 's/^\[emulated-board\] work folder kept: //p' "$out" | tail -n 1)"
	if ((st == 1)) && grep -qE -- "$expected" "$out"; then
		printf 'PASS  %-14s %3d s  exit 1: %s\n' "$name" $((SECONDS - t0)) "$why"
		passed=$((passed + 1))
		if ((keep == 0)) && [[ "$kept" == */aesd-qemu-run.* && -d "$kept" ]]; then rm -rf "$kept"; fi
	else
		printf 'FAIL  %-14s %3d s  exit %d, expected exit 1 and /%s/; got: %s (output: %s)\n' \
			"$name" $((SECONDS - t0)) "$st" "$expected" "${why:-no FAILED line}" "$out"
		failed=$((failed + 1))
		keep=1
	fi
}

echo "==> cases (each boots the emulated board)" >&2
check noexec 'FAILED: S50aesd is not executable \(mode 644' chmod 0644 etc/init.d/S50aesd
check bad-toml 'FAILED: aesd --check-config rejected /etc/aesd/aesd.toml.*no-such-key' \
	sh -c 'echo "no-such-key = 1" >>etc/aesd/aesd.toml'
check bad-value 'FAILED: aesd --check-config rejected /etc/aesd/aesd.toml.*workers' \
	sed -i 's/^workers = 2$/workers = 0/' etc/aesd/aesd.toml
check no-initscript 'FAILED: S50aesd never ran' rm etc/init.d/S50aesd

echo "$passed passed, $failed failed"
((failed == 0))
