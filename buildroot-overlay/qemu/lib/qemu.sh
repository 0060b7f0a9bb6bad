# shellcheck shell=bash disable=SC2154,SC2034 # sourced: globals of the sourcing script
# Running the board in --smoke mode: qemu-system-riscv32 in the background
# with its serial console on a FIFO (fd 7, written by us) and a log file
# ($console, set by the caller), on the TAP network (in its namespace) or on
# the user network's free ports (retried when qemu cannot bind them), the
# console read back, and qemu stopped. Reads $run, $verbose, the network
# (net.sh) and the ports (ports.sh); sets $qemu_pid, $t_qemu and $tail_pid.

qemu_pid=""
tail_pid=""

# The console with \r removed.
console_text() { tr -d '\r' <"$console" 2>/dev/null || true; }
# console_has TEXT: the console contains TEXT (grep reads it all: no SIGPIPE).
console_has() { console_text | grep -aF -- "$1" >/dev/null; }
# marker REGEX: the first "aesd-qemu: " marker line matching REGEX, minus the prefix.
marker() { { console_text | grep -aoE "aesd-qemu: $1.*" || true; } | head -n 1 | sed 's/^aesd-qemu: //'; }
# marker_exit REGEX: the exit status (its digits) that marker REGEX's line
# gives after "exit=" (the rcS's init markers say the uptime after it).
marker_exit() { marker "$1" | sed 's/.*exit=\([0-9]*\).*/\1/'; }
qemu_alive() { [[ -n "$qemu_pid" ]] && kill -0 "$qemu_pid" 2>/dev/null; }

# start_qemu: qemu in the background, console on the FIFO and in $console.
start_qemu() {
	local -a args
	: >"$console"
	mapfile -t args < <(qemu_args)
	"${net_exec[@]}" qemu-system-riscv32 "${args[@]}" -display none -monitor none -serial stdio \
		<"$run/console.in" >"$console" 2>"$run/qemu.err" &
	qemu_pid=$!
}

# boot_qemu: picks the ports and starts qemu, up to 3 times while qemu cannot
# bind automatic ports; exits 4 if it cannot (or a port given by hand is taken).
boot_qemu() {
	local attempt=1 given
	[[ -p "$run/console.in" ]] || mkfifo "$run/console.in"
	exec 7<>"$run/console.in"
	while :; do
		[[ "$net_kind" == tap ]] || pick_ports
		say "booting: -cpu $CPU -smp $SMP -m $MEM; aesd on $board_host:$port_aesd, metrics on $board_host:$port_metrics, HTTP API on $board_host:$port_http"
		t_qemu="$(now)"
		start_qemu
		sleep 0.5
		if qemu_alive || ! grep -q 'host forwarding rule' "$run/qemu.err"; then break; fi
		wait "$qemu_pid" 2>/dev/null || true
		qemu_pid=""
		# A port given by hand was taken meanwhile, or three automatic tries failed.
		for given in "$given_aesd" "$given_metrics" "$given_http"; do
			if [[ -n "$given" ]] && grep -q "127.0.0.1:$given-" "$run/qemu.err"; then
				echo "run.sh: qemu could not listen on 127.0.0.1:$given: $(cat "$run/qemu.err")" >&2
				exit 4
			fi
		done
		((attempt < 3)) || {
			echo "run.sh: qemu could not bind free ports after 3 attempts: $(cat "$run/qemu.err")" >&2
			exit 4
		}
		attempt=$((attempt + 1))
	done
	if ! qemu_alive && grep -qi 'failed to get .*lock' "$run/qemu.err"; then
		echo "run.sh: the disk $disk is in use (another qemu has it open): $(cat "$run/qemu.err")" >&2
		exit 4
	fi
	if ((verbose)); then
		tail -n +1 -f "$console" >&2 &
		tail_pid=$!
	fi
}

# stop_qemu: (at exit) stops qemu if it still runs, and the console's tail.
stop_qemu() {
	if qemu_alive; then
		stop_pids "$qemu_pid"
		wait "$qemu_pid" 2>/dev/null || true
	fi
	if [[ -n "$tail_pid" ]]; then kill "$tail_pid" 2>/dev/null || true; fi
	exec 7>&-
}
