# shellcheck shell=bash disable=SC2154,SC2016 # sourced: globals of the sourcing script; literal $ and backquotes in patterns
# Tests: S50aesd when things go wrong, in the sandbox (sandbox.sh) that
# s50aesd.sh set up: bad configurations, a missing binary or user, a stale
# pid file, start-up failures, secrets handed to the aesd user, the defaults
# file, log rotation and caps, stop escalating to SIGKILL, an aesd that never
# becomes ready, respawn after a crash. Run after s50aesd.sh, in order.

nothing_running() {
	local pids
	pids=$(sandbox_pids)
	[ -z "$pids" ] || die "left running in the sandbox: $pids"
}

# bad_config NAME TOML-LINE REASON-ERE: start with a config that has the line
# appended must fail with exit 6 and aesd's reason, leaving nothing behind.
bad_config() {
	local name=$1 line=$2 reason=$3
	{
		grep -v '^workers' "$sandbox/etc/aesd/aesd.toml"
		echo "$line"
	} >"$sandbox/etc/aesd/$name.toml"
	init_script "AESD_CONFIG=/etc/aesd/$name.toml" start
	echo "$out"
	expect_rc 6 "$rc" "start with $name.toml"
	expect_match '^Starting aesd: FAIL$' "$out" "start"
	expect_match "^aesd: not started: invalid configuration: " "$out" "message"
	expect_match "$reason" "$out" "aesd's reason"
	[ ! -e "$sandbox/var/run/aesd/aesd.pid" ] || die "pid file left behind"
	nothing_running
	grep -q "S50aesd: not started: invalid configuration" "$sandbox/var/log/aesd.log" || die "reason not in the log"
}

t_bad_config_workers() {
	bad_config zero-workers 'workers = 0' 'setting `workers`: must be 1 to 1024, got 0'
}

harness_test "bad config (workers = 0): start refused with the reason, exit 6" t_bad_config_workers

t_bad_config_unknown_key() {
	bad_config unknown-key 'wrokers = 2' 'unknown field `wrokers`'
}

harness_test "bad config (unknown key): start refused with the reason, exit 6" t_bad_config_unknown_key

t_missing_binary() {
	init_script AESD_BIN=/usr/bin/no-such-aesd start
	expect_rc 5 "$rc" "start"
	expect_match '^aesd: not started: /usr/bin/no-such-aesd is missing or not executable$' "$out" "message"
	nothing_running
}

harness_test "missing binary: start refused, exit 5" t_missing_binary

t_stale_pidfile() {
	# pid 1 is alive but is not aesd.
	mkdir -p "$sandbox/var/run/aesd"
	echo 1 >"$sandbox/var/run/aesd/aesd.pid"
	init_script status
	expect_rc 1 "$rc" "status with a stale pid file"
	expect_match '^aesd is dead, but /var/run/aesd/aesd.pid exists$' "$out" "status"
	init_script start
	expect_rc 0 "$rc" "start over a stale pid file"
	expect_match '^Starting aesd: OK$' "$out" "start"
	[ "$(sandbox_pid)" != 1 ] || die "pid file not replaced"
	[ "$(comm_of "$(sandbox_pid)")" = aesd ] || die "not aesd"
}

harness_test "stale pid file: status exit 1, start replaces it" t_stale_pidfile

# A second instance on the same port passes the config check but cannot
# bind: start must notice it died and report aesd's reason.
t_start_failure_reported() {
	init_script AESD_RUNDIR=/var/run/aesd-b AESD_LOGFILE=/var/log/aesd-b.log start
	echo "$out"
	expect_rc 1 "$rc" "second instance"
	expect_match '^Starting aesd: FAIL$' "$out" "start"
	expect_match 'exited during startup' "$out" "message"
	expect_match '(in use|AddrInUse)' "$out" "aesd's reason"
	[ ! -e "$sandbox/var/run/aesd-b/aesd.pid" ] || die "pid file of the failed instance left behind"
	[ ! -e "$sandbox/var/run/aesd-b.supervisor" ] || die "supervisor file of the failed instance left behind"
	init_script status
	expect_rc 0 "$rc" "the first instance"
	init_script stop
	expect_rc 0 "$rc" "stop"
	nothing_running
}

harness_test "startup failure (port in use) is detected and explained" t_start_failure_reported

# The secrets aesd reads, made by root (aesd --tls-self-signed, a token
# file, both mode 600): start hands them to the aesd user, and a job runs
# over TLS with the token.
t_secrets_handed_to_the_user() {
	local made pin uid
	rm -rf "$sandbox/etc/aesd/tls"
	made=$(sbx /usr/bin/aesd --tls-self-signed /etc/aesd/tls 2>&1)
	pin=$(sed -n 's/^pin: //p' <<<"$made")
	[[ $pin == sha256:* ]] || die "no pin printed:" "$made"
	head -c 24 /dev/urandom | base64 >"$sandbox/etc/aesd/token"
	chmod 600 "$sandbox/etc/aesd/token"
	[ "$(stat -c '%u %a' "$sandbox/etc/aesd/tls/aesd-key.pem")" = "0 600" ] || die "the key is not root's, mode 600"
	{
		cat "$sandbox/etc/aesd/aesd.toml"
		echo 'tls-cert = "/etc/aesd/tls/aesd-cert.pem"'
		echo 'tls-key = "/etc/aesd/tls/aesd-key.pem"'
		echo 'token-file = "/etc/aesd/token"'
	} >"$sandbox/etc/aesd/secret.toml"
	init_script AESD_CONFIG=/etc/aesd/secret.toml start
	echo "$out"
	expect_rc 0 "$rc" "start"
	uid=$(sandbox_id aesd)
	[ "$(stat -c '%u %a' "$sandbox/etc/aesd/tls/aesd-key.pem")" = "$uid 600" ] || die "key: $(stat -c '%u %a' "$sandbox/etc/aesd/tls/aesd-key.pem")"
	[ "$(stat -c '%u %a' "$sandbox/etc/aesd/token")" = "$uid 600" ] || die "token: $(stat -c '%u %a' "$sandbox/etc/aesd/token")"
	[ "$(stat -c %u "$sandbox/etc/aesd/tls/aesd-cert.pem")" = 0 ] || die "the certificate (public) changed hands"
	head -c 100000 /dev/urandom >"$test_tmp/tls.plain"
	aescrypt encrypt --server "127.0.0.1:$port" --tls-pin "$pin" --tls-server-name localhost \
		--token-file "$sandbox/etc/aesd/token" --password-file "$work/pw" -i "$test_tmp/tls.plain" -o "$test_tmp/tls.enc"
	openssl enc -d -aes-256-cbc -pbkdf2 -pass "file:$work/pw" -in "$test_tmp/tls.enc" -out "$test_tmp/tls.dec"
	cmp "$test_tmp/tls.plain" "$test_tmp/tls.dec"
	if grep -q 'readable by others' "$sandbox/var/log/aesd.log"; then
		die "aesd warned about its secrets:" "$(grep 'readable by others' "$sandbox/var/log/aesd.log")"
	fi
	init_script AESD_CONFIG=/etc/aesd/secret.toml stop
	expect_rc 0 "$rc" "stop"
	nothing_running
}

harness_test "S50aesd hands the TLS key and token to the aesd user (owner, mode 600); a TLS job with the token runs" t_secrets_handed_to_the_user

# The configuration is checked as the aesd user: a key it cannot reach (in
# a folder only root may enter) is refused before aesd starts, with aesd's
# reason and the user named.
t_check_as_the_user() {
	mkdir -p "$sandbox/etc/aesd/private"
	cp "$sandbox/etc/aesd/tls/aesd-key.pem" "$sandbox/etc/aesd/tls/aesd-cert.pem" "$sandbox/etc/aesd/private/"
	chmod 700 "$sandbox/etc/aesd/private"
	sed 's,/etc/aesd/tls/,/etc/aesd/private/,' "$sandbox/etc/aesd/secret.toml" >"$sandbox/etc/aesd/private.toml"
	init_script AESD_CONFIG=/etc/aesd/private.toml start
	echo "$out"
	expect_rc 6 "$rc" "start"
	expect_match 'Permission denied' "$out" "aesd's reason"
	expect_match 'checked as user aesd' "$out" "the user"
	nothing_running
	rm -rf "$sandbox/etc/aesd/private" "$sandbox/etc/aesd/private.toml"
}

harness_test "S50aesd checks the configuration as the aesd user: an unreadable key is refused (exit 6)" t_check_as_the_user

t_missing_user() {
	init_script AESD_USER=nosuchuser start
	echo "$out"
	expect_rc 6 "$rc" "start"
	expect_match '^aesd: not started: user nosuchuser does not exist' "$out" "message"
	nothing_running
}

harness_test "S50aesd with a user that does not exist: start refused naming it, exit 6" t_missing_user

t_defaults_file() {
	cat >"$sandbox/etc/default/aesd-test" <<'EOF'
AESD_ARGS="--max-queue 7 --log debug"
AESD_LOGFILE=/var/log/aesd-test.log
AESD_LOG=warn
EOF
	init_script AESD_DEFAULTS=/etc/default/aesd-test start
	expect_rc 0 "$rc" "start"
	local pid
	pid=$(sandbox_pid)
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- '--max-queue 7 --log debug' ||
		die "AESD_ARGS not passed: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
	tr '\0' '\n' <"/proc/$pid/environ" | grep -qx 'AESD_LOG=warn' || die "AESD_LOG not exported to aesd"
	# max-queue is 128 in aesd.toml: the flag wins.
	grep -q 'max_queue=7' "$sandbox/var/log/aesd-test.log" || die "log not in AESD_LOGFILE or flag not applied"
	init_script AESD_DEFAULTS=/etc/default/aesd-test stop
	expect_rc 0 "$rc" "stop"
	rm -f "$sandbox/etc/default/aesd-test"
}

harness_test "/etc/default file: AESD_ARGS, AESD_LOGFILE, exported AESD_* settings" t_defaults_file

t_log_rotation() {
	head -c 5000 /dev/zero | tr '\0' 'x' >"$sandbox/var/log/aesd.log"
	init_script AESD_LOG_MAX=4096 start
	expect_rc 0 "$rc" "start"
	[ "$(wc -c <"$sandbox/var/log/aesd.log.1")" = 5000 ] || die "old log not moved to aesd.log.1"
	grep -q 'listening' "$sandbox/var/log/aesd.log" || die "new log lacks 'listening'"
	[ "$(wc -c <"$sandbox/var/log/aesd.log")" -lt 4096 ] || die "new log too big"
	init_script stop
	expect_rc 0 "$rc" "stop"
}

harness_test "log rotation past AESD_LOG_MAX at start" t_log_rotation

# While aesd runs, its log is capped too: 300 port probes, each a debug line
# (about 100 bytes), against AESD_LOG_MAX=4096 checked every second.
t_log_cap_while_running() {
	rm -f "$sandbox/var/log/aesd.log" "$sandbox/var/log/aesd.log.1"
	local -a env=(AESD_LOG_MAX=4096 AESD_LOG_CHECK=1 "AESD_ARGS=--log debug")
	init_script "${env[@]}" start
	expect_rc 0 "$rc" "start"
	local i size
	for i in $(seq 1 300); do
		exec 3<>"/dev/tcp/127.0.0.1/$port" || die "probe $i"
		exec 3>&-
	done
	sleep 2.5
	[ -s "$sandbox/var/log/aesd.log.1" ] || die "the log was not moved aside while aesd ran"
	size=$(wc -c <"$sandbox/var/log/aesd.log")
	echo "log after 300 probes: $size bytes, aesd.log.1 $(wc -c <"$sandbox/var/log/aesd.log.1") bytes"
	[ "$size" -le 4096 ] || die "the log holds $size bytes"
	[ -e "$sandbox/var/run/aesd.logcap" ] || die "no watcher pid file"
	init_script "${env[@]}" stop
	expect_rc 0 "$rc" "stop"
	[ ! -e "$sandbox/var/run/aesd.logcap" ] || die "watcher pid file left behind"
	nothing_running
}

harness_test "log capped at AESD_LOG_MAX while aesd runs (AESD_LOG_CHECK)" t_log_cap_while_running

# An aesd that ignores SIGTERM: stop waits shutdown-grace (1 s, from
# --print-config) + AESD_STOP_MARGIN (1 s), then sends SIGKILL.
t_stop_escalates_to_kill() {
	mkdir -p "$sandbox/opt/fake"
	cat >"$sandbox/opt/fake/aesd" <<'EOF'
#!/bin/sh
case "$*" in
	*--check-config*) echo "fake: ok"; exit 0 ;;
	*--print-config*) echo "shutdown-grace = 1.0"; exit 0 ;;
esac
trap '' TERM
while [ $# -gt 0 ]; do
	[ "$1" = --pid-file ] && echo $$ >"$2"
	shift
done
while :; do sleep 1; done
EOF
	chmod 755 "$sandbox/opt/fake/aesd"
	local -a env=(AESD_BIN=/opt/fake/aesd AESD_STOP_MARGIN=1 AESD_LOGFILE=/var/log/fake.log)
	init_script "${env[@]}" start
	expect_rc 0 "$rc" "start"
	local pid started elapsed
	pid=$(sandbox_pid)
	[ "$(comm_of "$pid")" = aesd ] || die "fake runs as '$(comm_of "$pid")'"
	started=$(date +%s%N)
	init_script "${env[@]}" stop
	elapsed=$((($(date +%s%N) - started) / 1000000))
	echo "$out (${elapsed} ms)"
	expect_rc 0 "$rc" "stop"
	expect_match '^Stopping aesd: still running after 2s, sending SIGKILL: OK$' "$out" "stop"
	[ "$elapsed" -ge 1000 ] || die "SIGKILL after only ${elapsed} ms"
	gone "$pid" || die "fake aesd survived"
	[ ! -e "$sandbox/var/run/aesd/aesd.pid" ] || die "pid file left behind"
}

harness_test "S50aesd stop escalates to SIGKILL after grace + margin" t_stop_escalates_to_kill

# An aesd that runs but never becomes ready (writes no pid file): start gives
# up after AESD_START_WAIT, kills it and fails, leaving no pid files.
t_never_ready() {
	mkdir -p "$sandbox/opt/mute"
	cat >"$sandbox/opt/mute/aesd" <<'EOF'
#!/bin/sh
case "$*" in
	*--check-config* | *--print-config*) echo "fake: ok"; exit 0 ;;
esac
echo "mute aesd: starting, never ready" >&2
while :; do sleep 1; done
EOF
	chmod 755 "$sandbox/opt/mute/aesd"
	local -a env=(AESD_BIN=/opt/mute/aesd AESD_START_WAIT=1 AESD_LOGFILE=/var/log/mute.log)
	init_script "${env[@]}" start
	echo "$out"
	expect_rc 1 "$rc" "start"
	expect_match '^Starting aesd: FAIL$' "$out" "start"
	expect_match 'not ready \(no pid file\) within AESD_START_WAIT=1s, killed' "$out" "reason"
	expect_match 'mute aesd: starting, never ready' "$out" "last words"
	[ ! -e "$sandbox/var/run/aesd/aesd.pid" ] || die "pid file left behind"
	[ ! -e "$sandbox/var/run/aesd.supervisor" ] || die "supervisor file left behind"
	for _ in $(seq 1 20); do
		[ -z "$(sandbox_pids)" ] && return 0
		sleep 0.2
	done
	die "the mute aesd is still running"
}

harness_test "S50aesd start fails and kills an aesd not ready within AESD_START_WAIT" t_never_ready

# A panic aborts the release aesd (panic = "abort": SIGABRT); the supervisor
# starts it again, and stop still stops it for good.
t_respawn_after_a_crash() {
	init_script AESD_RESPAWN_DELAY=1 start
	expect_rc 0 "$rc" "start"
	local first second
	first=$(sandbox_pid)
	kill -ABRT "$first"
	for _ in $(seq 1 50); do
		second=$(sandbox_pid 2>/dev/null) || second=""
		if [[ -n "$second" && "$second" != "$first" ]] && [ "$(comm_of "$second")" = aesd ]; then
			break
		fi
		sleep 0.2
	done
	[[ -n "$second" && "$second" != "$first" ]] || die "no new aesd after the crash of $first:" "$(cat "$sandbox/var/log/aesd.log")"
	grep -q 'aesd crashed (exit status 134), starting it again in 1s' "$sandbox/var/log/aesd.log" ||
		die "the respawn is not logged:" "$(tail -n 5 "$sandbox/var/log/aesd.log")"
	echo "aesd $first aborted, respawned as $second"
	init_script stop
	expect_rc 0 "$rc" "stop"
	sleep 2
	[ -z "$(sandbox_pids)" ] || die "something was started again after stop: $(sandbox_pids)"
	[ ! -e "$sandbox/var/run/aesd.supervisor" ] || die "supervisor file left behind"
}

harness_test "S50aesd starts aesd again after a crash (SIGABRT, as a panic), stop stops it for good" t_respawn_after_a_crash

t_nothing_left() {
	# The fake's last `sleep 1` may linger for up to a second.
	for _ in $(seq 1 20); do
		[ -n "$(sandbox_pids)" ] || return 0
		sleep 0.2
	done
	nothing_running
}

harness_test "nothing left running in the sandbox" t_nothing_left
