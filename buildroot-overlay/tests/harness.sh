# shellcheck shell=bash
# The test harness of buildroot-overlay/tests/run.sh and
# buildroot-overlay/qemu/tests.sh. Source it, then:
#
#   harness_init PREFIX          work folder $harness_work (mktemp, physical
#                                path) and the EXIT/INT/TERM traps
#   harness_test NAME FUNCTION [ARG...]
#                                registers a test
#   harness_run                  runs the tests in registration order, prints
#                                the summary; returns 1 if a test failed
#
# A test runs FUNCTION ARG... in a subshell with errexit, stdin from
# /dev/null, its output captured, and $test_tmp set to a fresh folder of its
# own inside $harness_work. Exit status 0 passes, 77 skips (the last output
# line says why), anything else fails. Tests may leave state for later ones
# in $harness_work (e.g. a daemon started by one and stopped by the next).
# harness_note TEXT, inside a test, adds TEXT to the test's result line;
# harness_skip REASON ends it as skipped.
#
# Output: "ok   NAME", "skip NAME: WHY", or "FAIL NAME" followed by the
# test's output (indented); " (N s)" after NAME when it took a second or
# more. The last line is "N passed, M failed" (", K skipped" if any).
#
# Settings (set them before harness_run): harness_keep=1 keeps the work
# folder; harness_verbose=1 also prints the output of passing tests.
# The work folder is also kept when a test failed; its path is printed.
#
# Hooks, optional functions of the test script:
#   harness_after_failure   runs after a failed test (e.g. kills what it left
#                           running, so that one failure does not cascade)
#   harness_cleanup         runs at exit, before the work folder is removed

harness_keep=0
harness_verbose=0
harness_work=""
harness_passed=0
harness_failed=0
harness_skipped=0
harness_names=()
harness_commands=()

# harness_init PREFIX: creates the work folder ${TMPDIR:-/tmp}/PREFIX.XXXXXX.
harness_init() {
	harness_work=$(cd "$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")" && pwd -P)
	trap harness_exit EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

harness_exit() {
	local rc=$?
	trap - EXIT INT TERM
	if declare -F harness_cleanup >/dev/null; then harness_cleanup || true; fi
	if [ "$harness_keep" = 1 ] || [ "$harness_failed" -gt 0 ]; then
		echo "work folder kept: $harness_work" >&2
	else
		rm -rf "$harness_work"
	fi
	exit "$rc"
}

# harness_test NAME FUNCTION [ARG...]: registers a test.
harness_test() {
	local name=$1
	shift
	harness_names+=("$name")
	harness_commands+=("$(printf '%q ' "$@")")
}

# harness_note TEXT: (inside a test) shown on the test's result line.
harness_note() {
	printf '%s\n' "$*" >"$test_tmp/.note"
}

# harness_skip REASON: (inside a test) ends it as skipped, saying why.
harness_skip() {
	echo "$*"
	exit 77
}

# harness_run: runs every registered test, then prints the summary.
harness_run() {
	local i
	for i in "${!harness_names[@]}"; do
		harness_run_one "$i"
	done
	if [ "$harness_skipped" -gt 0 ]; then
		echo "$harness_passed passed, $harness_failed failed, $harness_skipped skipped"
	else
		echo "$harness_passed passed, $harness_failed failed"
	fi
	[ "$harness_failed" = 0 ]
}

# harness_run_one INDEX: runs the test registered at INDEX.
harness_run_one() {
	local name=${harness_names[$1]} rc started label note=""
	test_tmp=$harness_work/tests/$(printf '%02d' "$(($1 + 1))")
	mkdir -p "$test_tmp"
	local log=$test_tmp/output.log
	started=$SECONDS
	set +e
	(
		set -e
		eval "${harness_commands[$1]}"
	) >"$log" 2>&1 </dev/null
	rc=$?
	set -e
	label=$name
	if [ $((SECONDS - started)) -ge 1 ]; then label="$label ($((SECONDS - started)) s)"; fi
	if [ -s "$test_tmp/.note" ]; then note=": $(cat "$test_tmp/.note")"; fi
	if [ "$rc" = 0 ]; then
		harness_passed=$((harness_passed + 1))
		echo "ok   $label$note"
		if [ "$harness_verbose" = 1 ] && [ -s "$log" ]; then sed 's/^/       /' "$log"; fi
	elif [ "$rc" = 77 ]; then
		harness_skipped=$((harness_skipped + 1))
		echo "skip $name: $(tail -n 1 "$log")"
	else
		harness_failed=$((harness_failed + 1))
		echo "FAIL $label$note"
		sed 's/^/       /' "$log"
		if declare -F harness_after_failure >/dev/null; then harness_after_failure; fi
	fi
}

# --- assertions -----------------------------------------------------------------

# die MESSAGE...: prints the lines on stderr and fails.
die() {
	printf '%s\n' "$*" >&2
	return 1
}

# expect_rc WANT GOT WHAT
expect_rc() {
	[ "$2" = "$1" ] || die "$3: exit status $2, expected $1"
}

# expect_match ERE TEXT WHAT
expect_match() {
	grep -qE -- "$1" <<<"$2" || die "$3: /$1/ not found in:" "$2"
}

# expect_no_match ERE TEXT WHAT
expect_no_match() {
	if grep -qE -- "$1" <<<"$2"; then die "$3: /$1/ unexpectedly found in:" "$2"; fi
}
