# shellcheck shell=bash disable=SC2154,SC2016 # sourced: globals of the sourcing script; literal $ and backquotes in patterns
# Tests: S50aesd for real, in the sandbox (sandbox.sh): start / status /
# restart / stop, with real jobs sent by aescrypt from the host over
# 127.0.0.1 and checked with openssl (the failure cases are in
# s50aesd-failures.sh). The tests run in order and share the sandbox:
# t_start's aesd is the one t_restart and t_stop see.

t_sandbox() {
	[ -d "$overlay_out/usr/bin" ] || die "no assembled overlay (assemble test failed)"
	rm -rf "$sandbox"
	mkdir -p "$sandbox"/{bin,sbin,usr/bin,usr/sbin,proc,dev,tmp,var/run,var/log,opt,etc}
	chmod 1777 "$sandbox/tmp"
	# The users of a Buildroot image (skeleton), plus the aesd package's.
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$sandbox/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$sandbox/etc/group"
	bash "$here/mkusers.sh" "$overlay_dir/users.table" "$sandbox"
	[ -n "$(sandbox_id aesd)" ] || die "users.table made no aesd user"
	cp "$(command -v busybox)" "$sandbox/bin/busybox"
	: >"$sandbox/dev/null"
	sbx /bin/busybox --install -s /bin
	cp -a "$overlay_out/." "$sandbox/"
	sed -i -e "s/^listen = .*/listen = \"127.0.0.1:$port\"/" \
		-e "s/^metrics-listen = .*/metrics-listen = \"127.0.0.1:0\"/" "$sandbox/etc/aesd/aesd.toml"
	for tool in sh start-stop-daemon sed tail grep date sleep kill cat wc mv cp mkdir id chown chmod; do
		[ -e "$sandbox/bin/$tool" ] || die "busybox in the sandbox lacks $tool"
	done
	sbx /usr/bin/aesd --check-config /etc/aesd/aesd.toml
}

harness_test "sandbox: busybox-static chroot + assembled overlay (port $port)" t_sandbox

t_status_initially_stopped() {
	init_script status
	expect_rc 3 "$rc" "status"
	expect_match '^aesd is stopped$' "$out" "status"
}

harness_test "S50aesd status before start: stopped, exit 3" t_status_initially_stopped

t_start() {
	init_script start
	echo "$out"
	expect_rc 0 "$rc" "start"
	expect_match '^Starting aesd: OK$' "$out" "start"
	local pid
	pid=$(sandbox_pid)
	[[ $pid =~ ^[0-9]+$ ]] || die "pid file holds '$pid'"
	[ "$(comm_of "$pid")" = aesd ] || die "pid $pid is '$(comm_of "$pid")', not aesd"
	[ "$(readlink "/proc/$pid/root")" = "$sandbox" ] || die "pid $pid is not in the sandbox"
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--config /etc/aesd/aesd.toml" || die "cmdline: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
	grep -q "listening listen=127.0.0.1:$port" "$sandbox/var/log/aesd.log" || die "log:" "$(cat "$sandbox/var/log/aesd.log")"
	echo "$pid" >"$work/pid.started"
}

harness_test "S50aesd start: OK, pid file names aesd" t_start

# aesd runs as the aesd user (all four uids and gids), without
# capabilities; it owns its run directory, while the supervisor, the log
# and the supervisor's files stay root's.
t_runs_as_its_user() {
	local pid uid gid supervisor
	pid=$(sandbox_pid)
	uid=$(sandbox_id aesd)
	gid=$(awk -F: '$1 == "aesd" { print $4 }' "$sandbox/etc/passwd")
	[ "$uid" -gt 0 ] || die "no aesd user"
	[ "$(status_field "$pid" Uid)" = "$uid $uid $uid $uid" ] || die "aesd's uids: $(status_field "$pid" Uid), want $uid"
	[ "$(status_field "$pid" Gid)" = "$gid $gid $gid $gid" ] || die "aesd's gids: $(status_field "$pid" Gid), want $gid"
	[ "$(status_field "$pid" CapEff)" = 0000000000000000 ] || die "aesd has capabilities: $(status_field "$pid" CapEff)"
	[ "$(stat -c '%u %a' "$sandbox/var/run/aesd")" = "$uid 755" ] || die "run dir: $(stat -c '%u %a' "$sandbox/var/run/aesd")"
	[ "$(stat -c %u "$sandbox/var/run/aesd/aesd.pid")" = "$uid" ] || die "the pid file is not aesd's own"
	[ "$(stat -c %u "$sandbox/var/log/aesd.log")" = 0 ] || die "the log is not root's"
	supervisor=$(cat "$sandbox/var/run/aesd.supervisor")
	[ "$(stat -c %u "$sandbox/var/run/aesd.supervisor")" = 0 ] || die "the supervisor's pid file is not root's"
	[ "$(status_field "$supervisor" Uid)" = "0 0 0 0" ] || die "the supervisor is not root's"
	echo "aesd pid $pid runs as uid $uid gid $gid, no capabilities; supervisor $supervisor as root"
}

harness_test "S50aesd runs aesd as user aesd (Buildroot users table), no capabilities; run dir aesd's, log root's" t_runs_as_its_user

t_open_file_limit() {
	local pid
	pid=$(sandbox_pid)
	grep -Eq '^Max open files +4096 +4096 ' "/proc/$pid/limits" ||
		die "aesd's open-file limit is not AESD_NOFILE's 4096:" "$(grep 'open files' "/proc/$pid/limits")"
	if grep -q 'max-connections .* lowered' "$sandbox/var/log/aesd.log"; then
		die "aesd lowered max-connections:" "$(grep lowered "$sandbox/var/log/aesd.log")"
	fi
}

harness_test "S50aesd starts aesd with AESD_NOFILE (4096) open files: max-connections fits" t_open_file_limit

t_start_when_running() {
	local pid
	pid=$(cat "$work/pid.started")
	init_script start
	expect_rc 0 "$rc" "second start"
	expect_match "^Starting aesd: already running \(pid $pid\)$" "$out" "second start"
	[ "$(sandbox_pid)" = "$pid" ] || die "pid file changed"
}

harness_test "S50aesd start again: already running, same pid" t_start_when_running

t_status_running() {
	local pid
	pid=$(cat "$work/pid.started")
	init_script status
	expect_rc 0 "$rc" "status"
	expect_match "^aesd is running \(pid $pid\)$" "$out" "status"
}

harness_test "S50aesd status: running (pid N), exit 0" t_status_running

# job SIZE NAME: encrypts SIZE random bytes through the sandbox's aesd with
# aescrypt and decrypts the result with openssl.
job() {
	local size=$1 name=$2
	head -c "$size" /dev/urandom >"$test_tmp/$name.plain"
	aescrypt encrypt --server "127.0.0.1:$port" --password-file "$work/pw" -i "$test_tmp/$name.plain" -o "$test_tmp/$name.enc" -v
	openssl enc -d -aes-256-cbc -pbkdf2 -pass "file:$work/pw" -in "$test_tmp/$name.enc" -out "$test_tmp/$name.dec"
	cmp "$test_tmp/$name.plain" "$test_tmp/$name.dec"
}

t_jobs() {
	# 3 MB, not a multiple of the block size: encrypted by aesd, decrypted by openssl.
	job 3000001 big
	# And the other way: encrypted by openssl, decrypted by aesd.
	openssl enc -aes-256-cbc -pbkdf2 -salt -pass "file:$work/pw" -in "$test_tmp/big.plain" -out "$test_tmp/big.ossl"
	aescrypt decrypt --server "127.0.0.1:$port" --password-file "$work/pw" -i "$test_tmp/big.ossl" -o "$test_tmp/big.back"
	cmp "$test_tmp/big.plain" "$test_tmp/big.back"
	[ "$(grep -c 'job done' "$sandbox/var/log/aesd.log")" -ge 2 ] || die "the log has no 'job done' lines"
}

harness_test "jobs through the daemon: aesd->openssl and openssl->aesd" t_jobs

t_restart() {
	local old new
	old=$(cat "$work/pid.started")
	init_script restart
	echo "$out"
	expect_rc 0 "$rc" "restart"
	expect_match '^Stopping aesd: OK$' "$out" "restart"
	expect_match '^Starting aesd: OK$' "$out" "restart"
	new=$(sandbox_pid)
	[ "$new" != "$old" ] || die "same pid $new after restart"
	gone "$old" || die "old aesd $old still running"
	[ "$(comm_of "$new")" = aesd ] || die "new pid $new is not aesd"
	job 100000 after-restart
	echo "$new" >"$work/pid.started"
}

harness_test "S50aesd restart: new pid, still serving" t_restart

t_stop() {
	local pid
	pid=$(cat "$work/pid.started")
	init_script stop
	expect_rc 0 "$rc" "stop"
	expect_match '^Stopping aesd: OK$' "$out" "stop"
	gone "$pid" || die "aesd $pid still running"
	[ ! -e "$sandbox/var/run/aesd/aesd.pid" ] || die "pid file left behind"
	grep -q 'SIGTERM received' "$sandbox/var/log/aesd.log" || die "aesd did not log SIGTERM"
}

harness_test "S50aesd stop: SIGTERM, process and pid file gone" t_stop

t_status_after_stop() {
	init_script status
	expect_rc 3 "$rc" "status"
	expect_match '^aesd is stopped$' "$out" "status"
	[ ! -e "$sandbox/var/run/aesd/aesd.pid" ] || die "pid file exists"
}

harness_test "S50aesd status after stop: stopped, exit 3" t_status_after_stop

t_stop_when_stopped() {
	init_script stop
	expect_rc 0 "$rc" "stop"
	expect_match '^Stopping aesd: not running$' "$out" "stop"
}

harness_test "S50aesd stop when stopped: exit 0" t_stop_when_stopped

# stop while a job is in flight: aesd gets SIGTERM, lets the job finish
# (within shutdown-grace), and stop returns once aesd has exited.
t_stop_waits_for_job() {
	init_script start
	expect_rc 0 "$rc" "start"
	local pid client started elapsed
	pid=$(sandbox_pid)
	head -c 200000 /dev/urandom >"$test_tmp/slow.a"
	head -c 200000 /dev/urandom >"$test_tmp/slow.b"
	cat "$test_tmp/slow.a" "$test_tmp/slow.b" >"$test_tmp/slow.plain"
	{
		cat "$test_tmp/slow.a"
		sleep 3
		cat "$test_tmp/slow.b"
	} | aescrypt encrypt --server "127.0.0.1:$port" --password-file "$work/pw" -i - -o "$test_tmp/slow.enc" &
	client=$!
	echo "$client" >>"$host_pids_file"
	sleep 1
	started=$(date +%s%N)
	init_script stop
	elapsed=$((($(date +%s%N) - started) / 1000000))
	echo "$out (${elapsed} ms)"
	expect_rc 0 "$rc" "stop"
	expect_match '^Stopping aesd: OK$' "$out" "stop"
	wait "$client" || die "the in-flight job failed"
	[ "$elapsed" -ge 1000 ] || die "stop returned after ${elapsed} ms, before the job could finish"
	openssl enc -d -aes-256-cbc -pbkdf2 -pass "file:$work/pw" -in "$test_tmp/slow.enc" -out "$test_tmp/slow.dec"
	cmp "$test_tmp/slow.plain" "$test_tmp/slow.dec"
	gone "$pid" || die "aesd still running"
	grep -q 'shutting down: 30.0 s grace for running jobs (.*) active=1' "$sandbox/var/log/aesd.log" ||
		die "aesd did not report one active job at shutdown:" "$(tail -n 5 "$sandbox/var/log/aesd.log")"
}

harness_test "S50aesd stop lets an in-flight job finish" t_stop_waits_for_job
