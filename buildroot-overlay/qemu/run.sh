#!/usr/bin/env bash
# The emulated board: boots qemu-system-riscv32 -machine virt with the Arty
# SoC's CPU (2 harts, rv32imac, no FPU) and 256 MiB, an rv32 Linux kernel,
# OpenSBI and an initramfs of BusyBox + our buildroot-overlay/ + the
# riscv32imac aesd, started by S50aesd at boot as on the board. The host
# reaches aesd and its metrics through qemu's user networking (hostfwd on
# 127.0.0.1 only). Interactive by default; --smoke is the CI test.
# See --help, and docs/emulated-board.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$repo/scripts/lib.sh"
# shellcheck source=scripts/cross/env.sh
. "$repo/scripts/cross/env.sh"

TARGET="riscv32imac-unknown-linux-musl"
# The board's CPU: rv32 with C, without F/D, and without what QEMU 7.2's rv32
# enables by default that the VexRiscvSMP lacks (H, Sstc, Zb*, Zihintpause).
CPU="rv32,c=on,f=off,d=off,h=off,sstc=off,zba=off,zbb=off,zbc=off,zbs=off,Zihintpause=off"
SMP=2
MEM=256M
GUEST_AESD_PORT=7878
GUEST_METRICS_PORT=9878
DEFAULT_LOAD="--clients 8 --chunk 4 --sizes 64K,1M,2M --iter 1000"
# Fixed limits of the smoke test, within --timeout (seconds).
BOOT_LIMIT=120
READY_LIMIT=30
POWEROFF_LIMIT=60

AESD_QEMU_HOME="${AESD_QEMU_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-qemu}"
export AESD_QEMU_HOME

usage() {
	cat <<EOF
Usage: buildroot-overlay/qemu/run.sh [--smoke] [OPTIONS]

Boots the emulated board: qemu-system-riscv32 -machine virt, -cpu rv32 with
C on and F, D, H, Sstc, Zba, Zbb, Zbc, Zbs, Zihintpause off (the VexRiscvSMP's
rv32imac), -smp $SMP, -m $MEM; OpenSBI, an rv32 Linux 6.1 and an initramfs
made of a static BusyBox (busybox init, Buildroot-style rcS), the overlay
assembled by buildroot-overlay/assemble.sh with the riscv32imac aesd, and the
emulated board's own files (buildroot-overlay/qemu/guest/; its
etc/network/interfaces replaces the overlay's example: 10.0.2.15/24, gateway
10.0.2.2, qemu's user network). S50aesd starts aesd at boot. The host reaches
the guest's aesd ($GUEST_AESD_PORT) and metrics ($GUEST_METRICS_PORT) ports on 127.0.0.1 only.

Builds what it needs first (buildroot-overlay/qemu/build.sh into
\$AESD_QEMU_HOME, now $AESD_QEMU_HOME; scripts/cross/setup.sh and
build-all.sh for the riscv32imac aesd; with --smoke the host aesload).

Without --smoke: the guest's serial console (a root shell) on this
terminal, and the forwarded ports printed. Type 'poweroff' in the guest to
stop it, or press Ctrl-A then X to kill qemu.

  --smoke             boot, wait for S50aesd and aesd's /metrics, run an aesload
                      suite from the host (every transfer decrypted and compared
                      by aesload, openssl-compatible), scrape /metrics once, power
                      the guest off from its console; exit 0 only if all held
  --overlay DIR       use DIR, an assembled overlay (assemble.sh --out DIR,
                      with usr/bin/aesd), as is, modes included, instead of
                      building the riscv32imac aesd and assembling one
  --port-aesd N       host port for the guest's aesd [interactive: 7878 if
                      free, --smoke: a free port]
  --port-metrics N    host port for the guest's /metrics [interactive: 9878 if
                      free, --smoke: a free port]
  --timeout SECS      --smoke: limit for boot + load + poweroff, after the
                      builds [300]
  --load "ARGS"       --smoke: aesload arguments instead of the default suite
                      [$DEFAULT_LOAD]
  --aesload PATH      --smoke: the host aesload to use [built with cargo build
                      --release --locked -p aesd-client]
  --json FILE         --smoke: also write aesload's JSON report to FILE
  --log FILE          --smoke: also copy the guest's console log to FILE
  --rebuild           rebuild kernel, OpenSBI and BusyBox from scratch
  --build-only        build and assemble everything, do not boot
  --jobs N            parallel build jobs [\$AESD_JOBS or 2]
  --keep              keep the run's work folder (initramfs, console log)
  -v, --verbose       --smoke: show the guest console while it runs
  -h, --help          this help

Limits (--smoke): the guest must finish its init scripts within $BOOT_LIMIT s of
qemu's start, answer on /metrics within $READY_LIMIT s after that, and power off
within $POWEROFF_LIMIT s of the request; all of it within --timeout. The console log
of a failed run is kept (its path is printed) and its last lines are shown.
Ports given by hand must be free; automatic ones are retried up to 3 times if
qemu cannot bind them.

Environment: AESD_QEMU_HOME (cache of build.sh), AESD_JOBS, CARGO_TARGET_DIR.

Exit status:
  0  --smoke: every check held; interactive: qemu exited normally
  1  --smoke: a check failed (the message says which: an init script, aesd's
     configuration, readiness, a transfer, the metrics, the poweroff, a limit)
  2  bad usage
  3  a build or setup step failed (kernel, OpenSBI, BusyBox, aesd, aesload,
     assemble.sh, the initramfs)
  4  qemu could not start (e.g. a port given by hand is in use)
EOF
}

smoke=0
overlay=""
port_aesd=""
port_metrics=""
timeout_s=300
load="$DEFAULT_LOAD"
aesload=""
json_out=""
log_out=""
rebuild=0
build_only=0
jobs="${AESD_JOBS:-2}"
keep=0
verbose=0

need() { [[ $# -ge 2 && -n "$2" ]] || {
	echo "run.sh: $1 needs a value (try --help)" >&2
	exit 2
}; }
while (($#)); do
	case "$1" in
		--smoke) smoke=1 ;;
		--overlay)
			need "$@"
			overlay="$2"
			shift
			;;
		--port-aesd)
			need "$@"
			port_aesd="$2"
			shift
			;;
		--port-metrics)
			need "$@"
			port_metrics="$2"
			shift
			;;
		--timeout)
			need "$@"
			timeout_s="$2"
			shift
			;;
		--load)
			need "$@"
			load="$2"
			shift
			;;
		--aesload)
			need "$@"
			aesload="$2"
			shift
			;;
		--json)
			need "$@"
			json_out="$2"
			shift
			;;
		--log)
			need "$@"
			log_out="$2"
			shift
			;;
		--rebuild) rebuild=1 ;;
		--build-only) build_only=1 ;;
		--jobs)
			need "$@"
			jobs="$2"
			shift
			;;
		--keep) keep=1 ;;
		-v | --verbose) verbose=1 ;;
		-h | --help)
			usage
			exit 0
			;;
		*)
			echo "run.sh: unknown argument $1 (try --help)" >&2
			exit 2
			;;
	esac
	shift
done
for p in "$port_aesd" "$port_metrics"; do
	if [[ -n "$p" ]] && { ! [[ "$p" =~ ^[1-9][0-9]{0,4}$ ]] || ((p > 65535)); }; then
		echo "run.sh: a port must be a number from 1 to 65535, not '$p'" >&2
		exit 2
	fi
done
if [[ -n "$port_aesd" && "$port_aesd" == "$port_metrics" ]]; then
	echo "run.sh: --port-aesd and --port-metrics must differ" >&2
	exit 2
fi
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || {
	echo "run.sh: --timeout needs a positive number of seconds, not '$timeout_s'" >&2
	exit 2
}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || {
	echo "run.sh: --jobs needs a positive number, not '$jobs'" >&2
	exit 2
}
if [[ -n "$overlay" && ! -d "$overlay" ]]; then
	echo "run.sh: --overlay $overlay is not a directory" >&2
	exit 2
fi
if [[ -n "$aesload" && ! -x "$aesload" ]]; then
	echo "run.sh: --aesload $aesload is not an executable file" >&2
	exit 2
fi
export AESD_JOBS="$jobs"

# --- Output helpers -------------------------------------------------------------
say() { printf '[emulated-board] %s\n' "$*" >&2; }
# build_fail MSG: a build or setup step failed (exit 3).
build_fail() {
	failed=1
	printf 'run.sh: %s\n' "$*" >&2
	exit 3
}
now() { echo "$EPOCHREALTIME"; }
# since T0: seconds (one decimal) from T0 to now.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# --- Work folder and cleanup ------------------------------------------------------
run="$(mktemp -d "${TMPDIR:-/tmp}/aesd-qemu-run.XXXXXX")"
qemu_pid=""
failed=0
cleanup() {
	local status=$?
	if [[ -n "$qemu_pid" ]] && kill -0 "$qemu_pid" 2>/dev/null; then
		kill -TERM "$qemu_pid" 2>/dev/null || true
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$qemu_pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$qemu_pid" 2>/dev/null || true
		wait "$qemu_pid" 2>/dev/null || true
	fi
	if [[ -n "${tail_pid:-}" ]]; then kill "$tail_pid" 2>/dev/null || true; fi
	exec 7>&-
	if ((keep || failed)); then
		say "work folder kept: $run"
	else
		rm -rf "$run"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'echo "run.sh: unexpected failure at line $LINENO (exit $?)" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# --- Builds -----------------------------------------------------------------------
build_args=()
((rebuild)) && build_args+=(--rebuild)
"$here/build.sh" "${build_args[@]}" --jobs "$jobs" || build_fail "buildroot-overlay/qemu/build.sh failed (see above)"
images="$AESD_QEMU_HOME/out"
apt_install qemu-system-misc curl python3 gzip

target_dir="${CARGO_TARGET_DIR:-$repo/target}"
if [[ -z "$overlay" ]]; then
	say "riscv32imac aesd: scripts/cross/setup.sh + build-all.sh (log: $run/cargo-riscv32.log)"
	"$repo/scripts/cross/setup.sh" >>"$run/cargo-riscv32.log" 2>&1 ||
		{
			tail -n 30 "$run/cargo-riscv32.log" >&2
			build_fail "scripts/cross/setup.sh failed"
		}
	"$repo/scripts/cross/build-all.sh" --no-check "$TARGET" >>"$run/cargo-riscv32.log" 2>&1 ||
		{
			grep -v '^ *Compiling' "$run/cargo-riscv32.log" | tail -n 30 >&2
			build_fail "scripts/cross/build-all.sh $TARGET failed"
		}
	profile="$(aesd_default_profile "$repo")"
	[[ "$profile" == dev ]] && profile=debug
	"$repo/buildroot-overlay/assemble.sh" --target "$TARGET" --bin "$target_dir/$TARGET/$profile" \
		--out "$run/overlay" >"$run/assemble.log" 2>&1 ||
		{
			cat "$run/assemble.log" >&2
			build_fail "buildroot-overlay/assemble.sh failed"
		}
	overlay="$run/overlay"
else
	overlay="$(cd "$overlay" && pwd)"
	say "using the overlay $overlay as is"
	[[ -f "$overlay/usr/bin/aesd" ]] || say "warning: $overlay has no usr/bin/aesd"
	[[ -f "$overlay/etc/init.d/S50aesd" ]] || say "warning: $overlay has no etc/init.d/S50aesd"
fi

if ((smoke)) && [[ -z "$aesload" ]]; then
	say "host aesload: cargo build --release --locked -p aesd-client (log: $run/cargo-host.log)"
	(cd "$repo" && cargo build --release --locked -p aesd-client --bin aesload) >"$run/cargo-host.log" 2>&1 ||
		{
			grep -v '^ *Compiling' "$run/cargo-host.log" | tail -n 30 >&2
			build_fail "building the host aesload failed"
		}
	aesload="$target_dir/release/aesload"
fi

# --- Initramfs --------------------------------------------------------------------
# A Buildroot-like skeleton, BusyBox and its applet links, the overlay as is
# (modes included: a broken overlay stays broken), then the emulated board's
# own files, whose only overlap with the overlay is etc/network/interfaces.
root="$run/rootfs"
mkdir -p "$root"
(
	cd "$root"
	mkdir -p bin sbin usr/bin usr/sbin etc/init.d proc sys dev tmp run var/log root mnt \
		etc/network/if-pre-up.d etc/network/if-up.d etc/network/if-down.d etc/network/if-post-down.d
	chmod 1777 tmp
	chmod 0700 root
	ln -s ../run var/run
	install -m 0755 "$images/busybox" bin/busybox
	while IFS= read -r link; do
		[[ "$link" == /bin/busybox || -e ".$link" || -L ".$link" ]] && continue
		mkdir -p ".${link%/*}"
		ln -s /bin/busybox ".$link"
	done <"$images/busybox.links"
) || build_fail "could not lay out the initramfs skeleton in $root"
cp -a "$overlay/." "$root/" || build_fail "could not copy the overlay $overlay"
if [[ -f "$overlay/etc/network/interfaces" ]]; then
	say "etc/network/interfaces: the overlay's (board example) is replaced by the emulated board's (10.0.2.15/24, qemu user networking)"
fi
(
	cd "$here/guest"
	find . -type d -printf '%P\n' | while IFS= read -r d; do
		[[ -n "$d" ]] && install -d -m 0755 "$root/$d"
	done
	find . -type f -printf '%P\n' | while IFS= read -r f; do
		case "$f" in
			init | etc/init.d/*) install -m 0755 "$f" "$root/$f" ;;
			*) install -m 0644 "$f" "$root/$f" ;;
		esac
	done
) || build_fail "could not copy buildroot-overlay/qemu/guest into the initramfs"

# gen_init_cpio's list: every entry owned by root, with its mode on disk.
odd="$(cd "$root" && find . -mindepth 1 \( -name '*[[:space:]]*' -o \( ! -type d ! -type f ! -type l \) \) -printf '/%P ')"
[[ -z "$odd" ]] || build_fail "the initramfs cannot hold these (white space in the name, or not a file, folder or symlink): $odd"
{
	(cd "$root" && find . -mindepth 1 -printf '%y %m %P %l\n' | LC_ALL=C sort -k3) |
		while read -r type mode path target; do
			case "$type" in
				d) printf 'dir /%s 0%s 0 0\n' "$path" "$mode" ;;
				f) printf 'file /%s %s/%s 0%s 0 0\n' "$path" "$root" "$path" "$mode" ;;
				l) printf 'slink /%s %s 0777 0 0\n' "$path" "$target" ;;
			esac
		done
	echo "nod /dev/console 0600 0 0 c 5 1"
} >"$run/initramfs.list" || build_fail "could not list the initramfs"
"$images/gen_init_cpio" "$run/initramfs.list" 2>"$run/gen_init_cpio.log" | gzip -6 >"$run/initramfs.cpio.gz" ||
	{
		cat "$run/gen_init_cpio.log" >&2
		build_fail "gen_init_cpio failed"
	}
say "initramfs: $(stat -c %s "$run/initramfs.cpio.gz") bytes ($(wc -l <"$run/initramfs.list") entries)"

if ((build_only)); then
	say "built: $images/{Image,fw_dynamic.bin}, $run/initramfs.cpio.gz"
	keep=1
	exit 0
fi

# --- Ports ------------------------------------------------------------------------
# port_free N: nothing listens on 127.0.0.1:N (a bind succeeds).
port_free() {
	python3 - "$1" <<'EOF' 2>/dev/null
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
EOF
}
# Ports given by hand must be free now (qemu would fail to bind them).
given_aesd="$port_aesd"
given_metrics="$port_metrics"
for given in "$given_aesd" "$given_metrics"; do
	if [[ -n "$given" ]] && ! port_free "$given"; then
		echo "run.sh: 127.0.0.1:$given (--port-aesd/--port-metrics) is already in use; choose another port or leave the option out" >&2
		exit 4
	fi
done
# pick_ports: chooses the ports not given by hand.
pick_ports() {
	if [[ -z "$given_aesd" ]]; then
		if ((smoke == 0)) && port_free 7878; then port_aesd=7878; else port_aesd="$(free_port)"; fi
	fi
	if [[ -z "$given_metrics" ]]; then
		if ((smoke == 0)) && port_free 9878 && [[ "$port_aesd" != 9878 ]]; then port_metrics=9878; else port_metrics="$(free_port)"; fi
		while [[ "$port_metrics" == "$port_aesd" ]]; do port_metrics="$(free_port)"; done
	fi
}

qemu_args() {
	printf '%s\n' -name aesd-emulated-board -machine virt -cpu "$CPU" -smp "$SMP" -m "$MEM" \
		-bios "$images/fw_dynamic.bin" -kernel "$images/Image" -initrd "$run/initramfs.cpio.gz" \
		-append "console=ttyS0 panic=-1" \
		-netdev "user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:$port_aesd-:$GUEST_AESD_PORT,hostfwd=tcp:127.0.0.1:$port_metrics-:$GUEST_METRICS_PORT" \
		-device virtio-net-device,netdev=net0 -device virtio-rng-device -no-reboot
}

# --- Interactive ------------------------------------------------------------------
if ((smoke == 0)); then
	pick_ports
	mapfile -t args < <(qemu_args)
	cat >&2 <<EOF

Emulated board (qemu-system-riscv32 virt, $SMP harts rv32imac, $MEM), overlay $overlay
  aesd:     127.0.0.1:$port_aesd  ->  guest $GUEST_AESD_PORT
            aesload --server 127.0.0.1:$port_aesd --clients 10 --chunk 5 --sizes 256K,1M --iter 1000
  metrics:  http://127.0.0.1:$port_metrics/metrics  ->  guest $GUEST_METRICS_PORT
            (Prometheus: put 127.0.0.1:$port_metrics in deploy/prometheus/prometheus.yml's targets)
  console:  below; a root shell once booted. 'poweroff' stops the guest; Ctrl-A then X kills qemu.

EOF
	status=0
	qemu-system-riscv32 "${args[@]}" -nographic || status=$?
	if ((status != 0)); then
		echo "run.sh: qemu-system-riscv32 exited with status $status" >&2
		exit 4
	fi
	exit 0
fi

# --- Smoke test -------------------------------------------------------------------
console="$run/console.log"
t_begin="$(now)"
deadline=$((SECONDS + timeout_s))

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
	if [[ -n "$log_out" && -f "$console" ]]; then cp "$console" "$log_out" || true; fi
	exit 1
}

# The console with \r removed.
console_text() { tr -d '\r' <"$console" 2>/dev/null || true; }
# console_has TEXT: the console contains TEXT (grep reads it all: no SIGPIPE).
console_has() { console_text | grep -aF -- "$1" >/dev/null; }
# marker REGEX: the first "aesd-qemu: " marker line matching REGEX, minus the prefix.
marker() { { console_text | grep -aoE "aesd-qemu: $1.*" || true; } | head -n 1 | sed 's/^aesd-qemu: //'; }
qemu_alive() { [[ -n "$qemu_pid" ]] && kill -0 "$qemu_pid" 2>/dev/null; }
# remaining LIMIT: seconds left for a phase limited to LIMIT and by --timeout.
remaining() {
	local left=$((deadline - SECONDS))
	((left < $1)) || left=$1
	((left > 0)) || left=0
	echo "$left"
}

# Start qemu: console on stdin (a FIFO we write to) and stdout (a file).
mkfifo "$run/console.in"
exec 7<>"$run/console.in"
start_qemu() {
	: >"$console"
	mapfile -t args < <(qemu_args)
	qemu-system-riscv32 "${args[@]}" -display none -monitor none -serial stdio \
		<"$run/console.in" >"$console" 2>"$run/qemu.err" &
	qemu_pid=$!
}
tail_pid=""
attempt=1
while :; do
	pick_ports
	say "booting: -cpu $CPU -smp $SMP -m $MEM; aesd on 127.0.0.1:$port_aesd, metrics on 127.0.0.1:$port_metrics"
	t_qemu="$(now)"
	start_qemu
	sleep 0.5
	if qemu_alive || ! grep -q 'host forwarding rule' "$run/qemu.err"; then break; fi
	wait "$qemu_pid" 2>/dev/null || true
	qemu_pid=""
	# A port given by hand was taken meanwhile, or three automatic tries failed.
	for given in "$given_aesd" "$given_metrics"; do
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
if ((verbose)); then
	tail -n +1 -f "$console" >&2 &
	tail_pid=$!
fi

# 1. Boot: wait for the end of rcS (or qemu's death, or the limit).
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

# 2. What the init scripts did. S50aesd's own words are the console lines
# between its "Starting aesd:" and rcS's marker for it.
s50_output() {
	console_text | awk '/Starting aesd:/ { on = 1 } /aesd-qemu: init S50aesd start exit=/ { on = 0 } on'
}
if [[ -z "$(marker 'init S50aesd ')" ]]; then
	fail "S50aesd never ran: the overlay has no etc/init.d/S50aesd (or it is not an S??* file), so nothing started aesd"
fi
noexec="$(marker 'init S50aesd not-executable')"
s50="$(marker 'init S50aesd start exit=' | sed 's/.*exit=//')"
if [[ -n "$noexec" ]]; then
	fail "S50aesd is not executable (mode ${noexec##*mode=} in the overlay): busybox init's rcS could not run it (exit $s50), so aesd was never started; install it with mode 0755 (assemble.sh does)"
fi
case "$s50" in
	0) say "S50aesd start: OK" ;;
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
for script in S02sysctl S40network; do
	st="$(marker "init $script start exit=" | sed 's/.*exit=//')"
	if [[ -n "$st" && "$st" != 0 ]]; then
		case "$script" in
			S02sysctl) fail "S02sysctl failed (exit $st): the guest kernel rejected a key of the overlay's /etc/sysctl.d/*.conf (see the console)" ;;
			*) fail "$script failed (exit $st): the guest's network is not up (see the console)" ;;
		esac
	fi
done

# 3. Readiness from the host, through hostfwd: /metrics answers with aesd's
# metrics. (A hostfwd port accepts connections even when nothing listens in
# the guest, so a bare connect proves nothing.)
metrics_url="http://127.0.0.1:$port_metrics/metrics"
limit="$(remaining "$READY_LIMIT")"
t_ready0="$(now)"
until curl -fsS --max-time 3 "$metrics_url" -o "$run/metrics.ready" 2>/dev/null && grep -q '^aesd_build_info' "$run/metrics.ready"; do
	qemu_alive || fail "qemu exited while waiting for aesd's /metrics"
	if [[ "$(since "$t_ready0" | cut -d. -f1)" -ge "$limit" ]]; then
		fail "aesd's $metrics_url (guest port $GUEST_METRICS_PORT) did not answer within $limit s although S50aesd reported OK"
	fi
	sleep 0.3
done
t_serving="$(since "$t_qemu")"
say "aesd serving: /metrics answered $t_serving s after qemu started"

# 4. The load, from the host. aesload decrypts and compares every transfer.
limit="$(remaining "$timeout_s")"
((limit > 0)) || fail "--timeout $timeout_s s reached before the load"
read -r -a load_args <<<"$load"
say "aesload --server 127.0.0.1:$port_aesd $load (limit $limit s)"
st=0
timeout "$limit" "$aesload" --server "127.0.0.1:$port_aesd" "${load_args[@]}" --quiet \
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
	python3 - "$run/aesload.json" <<'EOF'
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

# 5. One scrape of /metrics after the load: aesd counted the jobs.
curl -fsS --max-time 10 "$metrics_url" -o "$run/metrics.txt" 2>"$run/curl.err" ||
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

# 6. Power off from the guest's console, as a user would: rcK stops aesd.
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
stop="$(marker 'stop S50aesd exit=' | sed 's/.*exit=//')"
[[ "$stop" == 0 ]] || fail "S50aesd stop at poweroff: exit ${stop:-missing} (aesd not stopped cleanly)"
console_has 'reboot: Power down' || fail "qemu exited without the kernel's 'reboot: Power down'"
[[ -z "$tail_pid" ]] || kill "$tail_pid" 2>/dev/null || true
if [[ -n "$log_out" ]]; then cp "$console" "$log_out"; fi

cat <<EOF

run.sh --smoke: PASSED (emulated board: qemu-system-riscv32 virt, -cpu $CPU, -smp $SMP, -m $MEM)
  boot:      init scripts done $t_booted s after qemu started; /metrics answering at $t_serving s
  cpuinfo:   isa $isa ($harts harts)
  aesload:   $verified/$transfers transfers verified, $bytes bytes, $mbps MB/s (EMULATED, host -> guest via hostfwd)
  metrics:   aesd_jobs_total ok = $jobs_ok, resident ${rss:-?} bytes
  poweroff:  S50aesd stopped aesd, guest powered off in $t_off s
  total:     $(since "$t_begin") s from boot to poweroff
EOF
