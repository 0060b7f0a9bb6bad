# shellcheck shell=bash disable=SC2154 # sourced: globals of the sourcing script
# run.sh's output helpers, clock, and work folder: $run (mktemp), removed at
# exit unless --keep ($keep) or the run failed ($failed), after qemu is
# stopped (stop_qemu, qemu.sh) and the TAP network removed (net.sh).

say() { printf '[emulated-board] %s\n' "$*" >&2; }
now() { echo "$EPOCHREALTIME"; }
# since T0: seconds (one decimal) from T0 to now.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# open_work_folder: creates $run and sets the traps that clean it up.
open_work_folder() {
	run="$(mktemp -d "${TMPDIR:-/tmp}/aesd-qemu-run.XXXXXX")"
	failed=0
	trap cleanup EXIT
	trap 'echo "run.sh: unexpected failure at line $LINENO (exit $?)" >&2' ERR
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

cleanup() {
	local status=$?
	stop_qemu
	teardown_network
	if ((keep || failed)); then
		say "work folder kept: $run"
	else
		rm -rf "$run"
	fi
	exit "$status"
}
