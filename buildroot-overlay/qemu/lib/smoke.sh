# shellcheck shell=bash disable=SC2154,SC2034 # sourced: globals of the sourcing script
# The --smoke test, in order: boot, the init scripts' results, aesd's
# readiness, the keyring set up with bao (keyring.sh), an aesload suite from
# the host, one scrape of /metrics, the poweroff from the guest's console;
# then a second boot with the same disk: the keyring sealed, unsealed with
# bao, boot 1's file decrypted; poweroff; the report. Each check that fails
# calls fail (exit 1) with what broke and the console's tail. Reads the
# options ($timeout_s, $load, $aesload, $json_out, $log_out), $run, and the
# board and qemu state (board.sh, qemu.sh).

DEFAULT_LOAD="--clients 8 --chunk 4 --sizes 64K,1M,2M --iter 1000"
# --timeout's default with --load: a study suite takes minutes on the
# emulated CPU (thousand --scale 0.01 moves 551 MB at 1.3-3.4 MB/s: 164 s of
# load on a quieter machine, 411 s at load 6-8, which 300 s cut off).
LOAD_TIMEOUT=3600
# Fixed limits of the smoke test, within --timeout (seconds).
BOOT_LIMIT=120
READY_LIMIT=30
POWEROFF_LIMIT=60

# smoke_test: the whole test; returns only if every check held.
smoke_test() {
	console="$run/console.log"
	t_begin="$(now)"
	deadline=$((SECONDS + timeout_s))
	boot_qemu
	wait_booted
	check_init_scripts
	wait_for_aesd_ready
	t_booted1="$t_booted"
	t_serving1="$t_serving"
	keyring_first_boot
	run_load
	check_metrics
	power_off
	keyring_on_disk
	# The reboot: the same disk, a console log of its own.
	console="$run/console.reboot.log"
	boot_qemu
	wait_booted
	check_init_scripts
	wait_for_aesd_ready
	keyring_after_reboot
	power_off
	report
}

# fail MSG...: a smoke check failed: print why, the console's tail, exit 1.
fail() {
	failed=1
	{
		printf '\nrun.sh --smoke: FAILED: %s\n' "$*"
		if [[ -s "$console" ]]; then
			echo "--- last 40 lines of the guest console ($console):"
			tr -d '\r' <"$console" | tail -n 40
			echo "---"
		fi
	} >&2
	[[ -z "$log_out" ]] || save_console_logs || true
	exit 1
}

# save_console_logs: the console logs of both boots (the second's if there
# was one) into --log FILE.
save_console_logs() {
	local f logs=()
	for f in "$run/console.log" "$run/console.reboot.log"; do
		[[ ! -f "$f" ]] || logs+=("$f")
	done
	cat "${logs[@]}" >"$log_out"
}

# remaining LIMIT: seconds left for a phase limited to LIMIT and by --timeout.
remaining() {
	local left=$((deadline - SECONDS))
	((left < $1)) || left=$1
	((left > 0)) || left=0
	echo "$left"
}

# S50aesd's own words: the console lines between its "Starting aesd:" and
# rcS's marker for it.
s50_output() {
	console_text | awk '/Starting aesd:/ { on = 1 } /aesd-qemu: init S50aesd start exit=/ { on = 0 } on'
}

# Boot: wait for the end of rcS (or qemu's death, or the limit).
wait_booted() {
	limit="$(remaining "$BOOT_LIMIT")"
	until [[ -n "$(marker 'rcS done')" ]]; do
		if ! qemu_alive; then
			wait "$qemu_pid" 2>/dev/null && st=0 || st=$?
			qemu_pid=""
			fail "qemu exited (status $st) before the guest finished booting: $(tail -n 5 "$run/qemu.err")"
		fi
		if [[ "$(since "$t_qemu" | cut -d. -f1)" -ge "$limit" ]]; then
			if [[ -z "$(marker 'init ')" ]]; then
				fail "the guest did not reach its init scripts within $limit s (kernel or firmware problem?)"
			fi
			last="$({ console_text | grep -aoE 'aesd-qemu: init [^ ]+ start exit=[0-9]+' || true; } | tail -n 1 | sed 's/^aesd-qemu: init //')"
			fail "the guest's init scripts did not finish within $limit s (the last one that did: ${last:-none}; the next one hangs)"
		fi
		sleep 0.2
	done
	t_booted="$(since "$t_qemu")"
	isa="$(marker 'isa ' | sed 's/^isa //')"
	harts="$(marker 'harts ' | sed 's/^harts //')"
	say "guest booted in $t_booted s (guest uptime $(marker 'rcS done' | sed 's/.*uptime=//') s); /proc/cpuinfo isa: $isa; harts: $harts"
}

# What the init scripts did: S50aesd's exit status, S02sysctl's, S40network's.
check_init_scripts() {
	if [[ -z "$(marker 'init S50aesd ')" ]]; then
		fail "S50aesd never ran: the overlay has no etc/init.d/S50aesd (or it is not an S??* file), so nothing started aesd"
	fi
	noexec="$(marker 'init S50aesd not-executable')"
	s50="$(marker_exit 'init S50aesd start exit=')"
	if [[ -n "$noexec" ]]; then
		fail "S50aesd is not executable (mode ${noexec##*mode=} in the overlay): busybox init's rcS could not run it (exit $s50), so aesd was never started; install it with mode 0755 (assemble.sh does)"
	fi
	case "$s50" in
		0)
			# aesd runs as its own user (S50aesd, users.table), not root.
			who="$(marker 'aesd uid ')"
			read -r _ _ ruid euid suid fsuid _ user <<<"$who"
			want="${user#aesd=}"
			[[ -n "$want" && "$want" != 0 && "$ruid $euid $suid $fsuid" == "$want $want $want $want" ]] ||
				fail "aesd does not run as the aesd user: the guest says '${who:-nothing}' (want uid ${want:-?} four times)"
			say "S50aesd start: OK; aesd runs as user aesd (uid $want)"
			;;
		6)
			# aesd's reason: the rest of its line and the lines after it, without
			# the TOML excerpt (gutter lines such as "90 | key = 1"), joined.
			reason="$(s50_output | awk '
				sub(/.*aesd: not started: invalid configuration: /, "") { on = 1 }
				on && !/^[[:space:]]*[0-9]*[[:space:]]*\|/ { printf "%s%s", sep, $0; sep = "; " }')"
			fail "aesd --check-config rejected /etc/aesd/aesd.toml (S50aesd exit 6, aesd not started): ${reason:-see the console}"
			;;
		5) fail "S50aesd exit 5: the aesd binary is missing or not executable (/usr/bin/aesd in the overlay)" ;;
		1) fail "S50aesd exit 1: aesd exited during startup; S50aesd said: $(s50_output | tr '\n' ' ')" ;;
		126 | 127) fail "S50aesd could not be executed (exit $s50; a missing interpreter or a bad script): $(s50_output | tr '\n' ' ')" ;;
		*) fail "S50aesd start failed with exit $s50: $(s50_output | tr '\n' ' ')" ;;
	esac
	for script in S02sysctl S10disk S40network; do
		st="$(marker_exit "init $script start exit=")"
		if [[ -n "$st" && "$st" != 0 ]]; then
			case "$script" in
				S02sysctl) fail "S02sysctl failed (exit $st): the guest kernel rejected a key of the overlay's /etc/sysctl.d/*.conf (see the console)" ;;
				S10disk) fail "S10disk failed (exit $st): the keyring's disk is not mounted on /var/lib/aesd: $(console_text | grep -a '^S10disk: ' | tr '\n' ' ')" ;;
				*) fail "$script failed (exit $st): the guest's network is not up (see the console)" ;;
			esac
		fi
	done
}

# Readiness from the host side of the board's network: /metrics answers
# with aesd's metrics. (A hostfwd port accepts connections even when nothing
# listens in the guest, so a bare connect proves nothing.)
wait_for_aesd_ready() {
	metrics_url="http://$board_host:$port_metrics/metrics"
	limit="$(remaining "$READY_LIMIT")"
	t_ready0="$(now)"
	until "${net_exec[@]}" curl -fsS --noproxy '*' --max-time 3 "$metrics_url" -o "$run/metrics.ready" 2>/dev/null && grep -q '^aesd_build_info' "$run/metrics.ready"; do
		qemu_alive || fail "qemu exited while waiting for aesd's /metrics"
		if [[ "$(since "$t_ready0" | cut -d. -f1)" -ge "$limit" ]]; then
			fail "aesd's $metrics_url (guest port $GUEST_METRICS_PORT) did not answer within $limit s although S50aesd reported OK"
		fi
		sleep 0.3
	done
	t_serving="$(since "$t_qemu")"
	say "aesd serving: /metrics answered $t_serving s after qemu started"
}

# The load, from the host. aesload decrypts and compares every transfer.
run_load() {
	limit="$(remaining "$timeout_s")"
	((limit > 0)) || fail "--timeout $timeout_s s reached before the load"
	read -r -a load_args <<<"$load"
	say "aesload --server $board_host:$port_aesd $load (limit $limit s)"
	st=0
	timeout "$limit" "${net_exec[@]}" "$aesload" --server "$board_host:$port_aesd" "${load_args[@]}" --quiet \
		--json "$run/aesload.json" --metrics-url "$metrics_url" >"$run/aesload.txt" 2>"$run/aesload.err" || st=$?
	if [[ -n "$json_out" && -f "$run/aesload.json" ]]; then cp "$run/aesload.json" "$json_out"; fi
	{
		echo
		echo "=== aesload report: EMULATED board (qemu-system-riscv32 TCG on this host, not the Arty's figures) ==="
		cat "$run/aesload.txt"
		echo "=== end of the emulated board's report ==="
	}
	if ((st == 124)); then fail "aesload did not finish within $limit s (--timeout)"; fi
	if ((st != 0)); then
		fail "aesload exit $st: not every transfer verified through the emulated board: $(tail -n 12 "$run/aesload.err" | tr '\n' ' ')"
	fi
	summary="$(
		python3 - "$run/aesload.json" <<-'EOF'
			import json, sys
			d = json.load(open(sys.argv[1]))
			s = d["summary"]
			print(s["verified"], s["transfers"], s["bytes_processed"], "%.2f" % s["duration_s"],
			      "%.2f" % (s["throughput_bytes_per_sec"] / 1e6))
		EOF
	)" || fail "could not read aesload's JSON report"
	read -r verified transfers bytes duration mbps <<<"$summary"
	((transfers > 0 && verified == transfers)) || fail "aesload verified $verified of $transfers transfers"
	say "aesload (emulated): $verified/$transfers transfers verified, $bytes bytes in $duration s = $mbps MB/s"
}

# One scrape of /metrics after the load: aesd counted the jobs.
check_metrics() {
	"${net_exec[@]}" curl -fsS --noproxy '*' --max-time 10 "$metrics_url" -o "$run/metrics.txt" 2>"$run/curl.err" ||
		fail "scraping $metrics_url after the load failed: $(cat "$run/curl.err")"
	jobs_ok="$(awk '/^aesd_jobs_total\{/ && /outcome="ok"/ { n += $NF } END { printf "%d", n }' "$run/metrics.txt")"
	build_info="$(grep -m1 '^aesd_build_info' "$run/metrics.txt" || true)"
	workers="$(awk '/^aesd_workers / { print $2 }' "$run/metrics.txt")"
	rss="$(awk '/^process_resident_memory_bytes / { printf "%d", $2 }' "$run/metrics.txt")"
	[[ -n "$build_info" ]] || fail "/metrics has no aesd_build_info"
	# qemu's virt CPU has no VexRiscv AES instruction: aesd must run software AES
	# and say so (aes-backend = "auto" in the overlay's aesd.toml).
	aes_backend="$(grep -m1 -o '^aesd_aes_backend_info{backend="[a-z-]*"}' "$run/metrics.txt" || true)"
	[[ "$aes_backend" == 'aesd_aes_backend_info{backend="fixsliced"}' ]] ||
		fail "/metrics says ${aes_backend:-no aesd_aes_backend_info}; want the software fallback (fixsliced) on a CPU without the AES instruction"
	((jobs_ok >= transfers)) || fail "/metrics counts $jobs_ok ok jobs (aesd_jobs_total), fewer than the $transfers verified transfers"
	say "metrics: $build_info; $aes_backend; aesd_jobs_total ok = $jobs_ok; aesd_workers = ${workers:-?}; resident ${rss:-?} bytes"
}

# Power off from the guest's console, as a user would: rcK stops aesd.
power_off() {
	console_has 'Emulated aesd board:' || sleep 1
	t_off0="$(now)"
	printf '\npoweroff\n' >&7
	limit="$(remaining "$POWEROFF_LIMIT")"
	while qemu_alive; do
		if [[ "$(since "$t_off0" | cut -d. -f1)" -ge "$limit" ]]; then
			fail "the guest did not power off within $limit s of 'poweroff'"
		fi
		sleep 0.2
	done
	wait "$qemu_pid" 2>/dev/null && st=0 || st=$?
	qemu_pid=""
	t_off="$(since "$t_off0")"
	((st == 0)) || fail "qemu exited with status $st at poweroff: $(tail -n 5 "$run/qemu.err")"
	stop="$(marker_exit 'stop S50aesd exit=')"
	[[ "$stop" == 0 ]] || fail "S50aesd stop at poweroff: exit ${stop:-missing} (aesd not stopped cleanly)"
	stop="$(marker_exit 'stop S10disk exit=')"
	[[ "$stop" == 0 ]] || fail "S10disk stop at poweroff: exit ${stop:-missing} (the keyring's disk not unmounted cleanly)"
	console_has 'reboot: Power down' || fail "qemu exited without the kernel's 'reboot: Power down'"
	[[ -z "$tail_pid" ]] || kill "$tail_pid" 2>/dev/null || true
	[[ -z "$log_out" ]] || save_console_logs
}

# report: the summary of a passed run.
report() {
	cat <<-EOF

		run.sh --smoke: PASSED (emulated board: qemu-system-riscv32 virt, -cpu $CPU, -smp $SMP, -m $MEM)
		  boot:      init scripts done $t_booted1 s after qemu started; /metrics answering at $t_serving1 s
		  cpuinfo:   isa $isa ($harts harts)
		  aesload:   $verified/$transfers transfers verified, $bytes bytes, $mbps MB/s (EMULATED, $(net_desc))
		  metrics:   aesd_jobs_total ok = $jobs_ok, resident ${rss:-?} bytes
		  keyring:   on the disk, $disk_desc
		             boot 1 ($t_keyring1 s): bao operator init, unseal, a transit key, a file encrypted by name, transit/encrypt with bao and hvac
		  reboot:    init scripts done $t_booted s after qemu started again; /metrics answering at $t_serving s
		             keyring ($t_keyring2 s): sealed, by-name job refused, a wrong share refused, unsealed, the file and the Transit ciphertexts decrypted to the same bytes
		  poweroff:  S50aesd stopped aesd, S10disk unmounted the disk, guest powered off in $t_off s
		  total:     $(since "$t_begin") s from the first boot to the second poweroff
	EOF
}
