#!/usr/bin/env bash
# The emulated board: boots qemu-system-riscv32 -machine virt with the Arty
# SoC's CPU (2 harts, rv32imac, no FPU) and 256 MiB, an rv32 Linux kernel,
# OpenSBI and an initramfs of BusyBox + our buildroot-overlay/ + the
# riscv32imac aesd, started by S50aesd at boot as on the board. The host
# reaches aesd and its metrics over a TAP device in a network namespace made
# for the run (--smoke as root), or through qemu's user networking (hostfwd
# on 127.0.0.1 only). The board has a disk (an ext2 image, --disk FILE
# keeps it) holding aesd's sealed keyring, administered from the host with
# the bao CLI. Interactive by default; --smoke is the CI test.
# See --help, and docs/emulated-board.md.
#
# Layout: this file holds the options and the order of the stages; lib/
# holds the stages, one concern each: board.sh (the board qemu runs),
# builds.sh (kernel/firmware/BusyBox, the riscv32imac aesd and overlay, the
# host aesload and aescrypt), initramfs.sh, disk.sh (the keyring's disk),
# net.sh (TAP in a namespace, or user network), ports.sh, qemu.sh (start,
# console, stop), smoke.sh (the --smoke checks), keyring.sh (its keyring
# checks with bao), interactive.sh, common.sh (output, work folder and
# cleanup). tests.sh shares builds.sh.
set -Eeuo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$repo/scripts/lib.sh"
# shellcheck source=scripts/cross/env.sh
. "$repo/scripts/cross/env.sh"
# shellcheck source=buildroot-overlay/qemu/lib/common.sh
. "$here/lib/common.sh"
# shellcheck source=buildroot-overlay/qemu/lib/board.sh
. "$here/lib/board.sh"
# shellcheck source=buildroot-overlay/qemu/lib/builds.sh
. "$here/lib/builds.sh"
# shellcheck source=buildroot-overlay/qemu/lib/initramfs.sh
. "$here/lib/initramfs.sh"
# shellcheck source=buildroot-overlay/qemu/lib/disk.sh
. "$here/lib/disk.sh"
# shellcheck source=buildroot-overlay/qemu/lib/net.sh
. "$here/lib/net.sh"
# shellcheck source=buildroot-overlay/qemu/lib/ports.sh
. "$here/lib/ports.sh"
# shellcheck source=buildroot-overlay/qemu/lib/qemu.sh
. "$here/lib/qemu.sh"
# shellcheck source=buildroot-overlay/qemu/lib/smoke.sh
. "$here/lib/smoke.sh"
# shellcheck source=buildroot-overlay/qemu/lib/keyring.sh
. "$here/lib/keyring.sh"
# shellcheck source=buildroot-overlay/qemu/lib/interactive.sh
. "$here/lib/interactive.sh"

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
10.0.2.2). S50aesd starts aesd at boot.

The disk: an ext2 image as virtio-blk, which the guest's S10disk mounts on
/var/lib/aesd before aesd starts; the emulated board's /etc/default/aesd
(replacing the overlay's example) puts aesd's sealed keyring there
(AESD_KEYRING=/var/lib/aesd/keyring) and its OpenBao HTTP API on the
board's address (AESD_HTTP_LISTEN=10.0.2.15:$GUEST_HTTP_PORT, plain HTTP). aesd starts
sealed: from the host, BAO_ADDR at the board, 'bao operator init' once,
'bao operator unseal' after every boot. Without --disk the image is new for
each run and deleted at exit (keys last one run); --disk FILE keeps it.

The network (--net): "tap" puts the board on a TAP device in a network
namespace made for this run (aesd-board-PID-N; its end of the TAP is
10.0.2.2/24, the guest 10.0.2.15), and runs qemu, aesload and curl in it, so
every connect reaches the guest's own TCP stack as on the board's LAN; it
needs root and is removed at exit. "user" is qemu's user network: the
guest's aesd ($GUEST_AESD_PORT), metrics ($GUEST_METRICS_PORT) and HTTP API ($GUEST_HTTP_PORT) ports forwarded to 127.0.0.1 only
(hostfwd); no privileges, but hostfwd listens with a backlog of 1 and drops
connects that arrive together (the large and thousand suites time out).

Builds what it needs first (buildroot-overlay/qemu/build.sh into
\$AESD_QEMU_HOME, now $AESD_QEMU_HOME; scripts/cross/setup.sh and
build-all.sh for the riscv32imac aesd; with --smoke the host aesload and
aescrypt).

Without --smoke: the guest's serial console (a root shell) on this
terminal, and the forwarded ports (or the namespace's commands) printed. Type 'poweroff' in the guest to
stop it, or press Ctrl-A then X to kill qemu.

  --smoke             boot, wait for S50aesd and aesd's /metrics, run an aesload
                      suite from the host (every transfer decrypted and compared
                      by aesload, openssl-compatible), scrape /metrics once, power
                      the guest off from its console; with the keyring too:
                      bao operator init (2 shares) and unseal from the host, a
                      transit key, a file encrypted by name (aescrypt) before the
                      poweroff; a second boot with the same disk: sealed (bao
                      status exit 2), a by-name job refused 'sealed', a wrong
                      share refused, unsealed with the shares, the file
                      decrypted to its bytes; poweroff. Exit 0 only if all
                      held. Needs a new keyring (no --disk, or a new FILE)
  --overlay DIR       use DIR, an assembled overlay (assemble.sh --out DIR,
                      with usr/bin/aesd), as is, modes included, instead of
                      building the riscv32imac aesd and assembling one
  --net auto|tap|user the board's network [auto: --smoke takes tap if it can
                      be made (root, /dev/net/tun, ip netns), else user and
                      says why; interactive runs and --port-* take user];
                      tap that cannot be made exits 4
  --port-aesd N       --net user: host port for the guest's aesd [interactive: 7878 if
                      free, --smoke: a free port]
  --port-metrics N    --net user: host port for the guest's /metrics [interactive: 9878 if
                      free, --smoke: a free port]
  --port-http N       --net user: host port for the guest's HTTP API (bao's
                      BAO_ADDR) [interactive: 8200 if free, --smoke: a free port]
  --disk FILE         the board's disk: an ext2 image holding /var/lib/aesd (the
                      sealed keyring), kept after the run, so the board keeps its
                      keys across reboots and runs; made (16 MiB, mke2fs -t ext2)
                      if FILE does not exist [a new image in the run's folder,
                      deleted at exit]. One qemu at a time per FILE
  --timeout SECS      --smoke: limit for boot + load + poweroff, after the
                      builds [300; with --load $LOAD_TIMEOUT: a study suite takes
                      minutes on the emulated CPU, e.g. thousand --scale
                      0.01 moves 551 MB at 1-3 MB/s]
  --load "ARGS"       --smoke: aesload arguments instead of the default suite
                      [$DEFAULT_LOAD]
  --aesload PATH      --smoke: the host aesload to use [built with cargo build
                      --release --locked -p aesd-load]
  --aescrypt PATH     --smoke: the host aescrypt to use [built with cargo build
                      --release --locked -p aesd-client]
  --json FILE         --smoke: also write aesload's JSON report to FILE
  --log FILE          --smoke: also copy the guest's console logs (both boots) to FILE
  --rebuild           rebuild kernel, OpenSBI and BusyBox from scratch
  --build-only        build and assemble everything, do not boot
  --jobs N            parallel build jobs [\$AESD_JOBS or 2]
  --keep              keep the run's work folder (initramfs, console log)
  -v, --verbose       --smoke: show the guest console while it runs
  -h, --help          this help

Limits (--smoke): the guest must finish its init scripts within $BOOT_LIMIT s of
qemu's start, answer on /metrics within $READY_LIMIT s after that, and power off
within $POWEROFF_LIMIT s of the request, at both boots; all of it within --timeout. The console log
of a failed run is kept (its path is printed) and its last lines are shown.
Ports given by hand must be free; automatic ones are retried up to 3 times if
qemu cannot bind them.

Environment: AESD_QEMU_HOME (cache of build.sh), AESD_JOBS, CARGO_TARGET_DIR,
AESD_BAO (--smoke's bao CLI [scripts/bao/.venv/bin/bao, which
scripts/bao-cli.sh --install-only makes]; missing: exit 3).

Exit status:
  0  --smoke: every check held; interactive: qemu exited normally
  1  --smoke: a check failed (the message says which: an init script, aesd's
     configuration, readiness, a transfer, the metrics, the keyring, the
     poweroff, a limit)
  2  bad usage (also: --disk FILE exists but is not an ext2 image)
  3  a build or setup step failed (kernel, OpenSBI, BusyBox, aesd, aesload,
     aescrypt, assemble.sh, the initramfs, the disk image; no bao CLI)
  4  qemu could not start (e.g. a port given by hand is in use, or the disk
     is open in another qemu), or --net tap could not make its namespace or
     TAP device
EOF
}

smoke=0
overlay=""
port_aesd=""
port_metrics=""
port_http=""
disk_file=""
aescrypt=""
net=auto
timeout_s=""
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
		--port-http)
			need "$@"
			port_http="$2"
			shift
			;;
		--disk)
			need "$@"
			disk_file="$2"
			shift
			;;
		--aescrypt)
			need "$@"
			aescrypt="$2"
			shift
			;;
		--net)
			need "$@"
			net="$2"
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
for p in "$port_aesd" "$port_metrics" "$port_http"; do
	if [[ -n "$p" ]] && { ! [[ "$p" =~ ^[1-9][0-9]{0,4}$ ]] || ((p > 65535)); }; then
		echo "run.sh: a port must be a number from 1 to 65535, not '$p'" >&2
		exit 2
	fi
done
case "$net" in
	auto | tap | user) ;;
	*)
		echo "run.sh: --net must be auto, tap or user, not '$net'" >&2
		exit 2
		;;
esac
if [[ "$net" == tap && -n "$port_aesd$port_metrics$port_http" ]]; then
	echo "run.sh: --port-aesd, --port-metrics and --port-http are host ports of --net user; with --net tap the guest's own ports ($GUEST_AESD_PORT, $GUEST_METRICS_PORT, $GUEST_HTTP_PORT) are used" >&2
	exit 2
fi
if [[ -n "$(printf '%s\n' "$port_aesd" "$port_metrics" "$port_http" | grep . | sort | uniq -d)" ]]; then
	echo "run.sh: --port-aesd, --port-metrics and --port-http must differ" >&2
	exit 2
fi
if [[ -n "$disk_file" && ! -d "$(dirname "$disk_file")" ]]; then
	echo "run.sh: --disk $disk_file: no such directory $(dirname "$disk_file")" >&2
	exit 2
fi
if [[ -n "$disk_file" && -e "$disk_file" && ! -f "$disk_file" ]]; then
	echo "run.sh: --disk $disk_file is not a regular file" >&2
	exit 2
fi
if [[ -z "$timeout_s" ]]; then
	if [[ "$load" == "$DEFAULT_LOAD" ]]; then timeout_s=300; else timeout_s=$LOAD_TIMEOUT; fi
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
for tool in "--aesload:$aesload" "--aescrypt:$aescrypt"; do
	if [[ -n "${tool#*:}" && ! -x "${tool#*:}" ]]; then
		echo "run.sh: ${tool%%:*} ${tool#*:} is not an executable file" >&2
		exit 2
	fi
done
export AESD_JOBS="$jobs"
given_aesd="$port_aesd"
given_metrics="$port_metrics"
given_http="$port_http"

open_work_folder

# --- Builds -----------------------------------------------------------------------
build_args=()
((rebuild)) && build_args+=(--rebuild)
build_board_images "${build_args[@]}" --jobs "$jobs"
images="$AESD_QEMU_HOME/out"
apt_install qemu-system-misc curl python3 gzip

if [[ -z "$overlay" ]]; then
	say "riscv32imac aesd: scripts/cross/setup.sh + build-all.sh (log: $run/cargo-riscv32.log)"
	build_board_overlay "$run/overlay" "$run"
	overlay="$run/overlay"
else
	overlay="$(cd "$overlay" && pwd)"
	say "using the overlay $overlay as is"
	[[ -f "$overlay/usr/bin/aesd" ]] || say "warning: $overlay has no usr/bin/aesd"
	[[ -f "$overlay/etc/init.d/S50aesd" ]] || say "warning: $overlay has no etc/init.d/S50aesd"
fi

if ((smoke)) && [[ -z "$aesload" ]]; then
	say "host aesload: cargo build --release --locked -p aesd-load (log: $run/cargo-host.log)"
	build_host_aesload "$run"
fi
if ((smoke)) && [[ -z "$aescrypt" ]]; then
	say "host aescrypt: cargo build --release --locked -p aesd-client (log: $run/cargo-host.log)"
	build_host_aescrypt "$run"
fi
((smoke == 0)) || find_bao

# --- Initramfs, then boot -----------------------------------------------------------
make_initramfs
if ((build_only)); then
	say "built: $images/{Image,fw_dynamic.bin}, $run/initramfs.cpio.gz"
	keep=1
	exit 0
fi

prepare_disk
check_given_ports
choose_network
if ((smoke == 0)); then run_interactive; fi
smoke_test
