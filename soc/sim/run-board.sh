#!/usr/bin/env bash
# Boots the simulated board (soc/sim/build-board.sh builds it) in a network
# namespace of its own (aesd-rtl-PID: tap0 192.168.1.100/24 on the host side,
# the board 192.168.1.50, nothing routed anywhere else), waits until aesd
# accepts jobs (the console's "RTL-READY cycles N" line, from
# /etc/init.d/S99ready), prints the cycles from reset, then either runs
# COMMAND inside the namespace and stops, or keeps the board running until
# interrupted (its console: VARIANT/console.log; type into VARIANT/console.in).
#
# Usage: soc/sim/run-board.sh [--cores 1|2] [--no-aes] [--dram] [--build]
#                             [--boot-wait SECONDS] [-- COMMAND...]
#   --cores, --no-aes, --dram  the variant (as soc/sim/build-board.sh's)
#   --build      run soc/sim/build-board.sh first
#   --boot-wait  seconds of the simulator's CPU time to wait for aesd accepting
#                (default 5400; at most four times that of wall time)
# Example: soc/sim/run-board.sh -- soc/sim/probe.py 192.168.1.50 echo 65536
# Wall time: about 0.5 M simulated cycles per wall second; the board's own
# initramfs reaches /init after about 11 min and aesd starts well after it
# (docs/board-rtl.md).
# Exit status: COMMAND's; 0 interrupted; 1 the boot failed; 2 bad usage.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=soc/sim/lib/board.sh
. "$here/lib/board.sh"

cores=1
aes=1
dram=0
build=0
boot_wait=5400
while (($#)); do
  case "$1" in
    --cores)
      cores="${2:-}"
      shift
      ;;
    --no-aes) aes=0 ;;
    --dram) dram=1 ;;
    --build) build=1 ;;
    --boot-wait)
      boot_wait="${2:-}"
      shift
      ;;
    --)
      shift
      break
      ;;
    -h | --help)
      sed -n '2,19s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "run-board.sh: unknown argument $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
[[ "$boot_wait" =~ ^[1-9][0-9]*$ ]] || {
  echo "run-board.sh: --boot-wait needs a positive number of seconds, not '$boot_wait'" >&2
  exit 2
}
[[ "$cores" == 1 || "$cores" == 2 ]] || {
  echo "run-board.sh: --cores must be 1 or 2, not '$cores'" >&2
  exit 2
}
variant="$(board_variant_dir "$cores" "$aes" "$dram")"
if ((build)); then
  args=(--cores "$cores")
  ((aes)) || args+=(--no-aes)
  ((dram == 0)) || args+=(--dram)
  "$here/build-board.sh" "${args[@]}" >/dev/null
fi

trap board_stop EXIT
trap 'exit 0' INT TERM
start=$SECONDS
board_start "$variant"
echo "booting $variant in namespace $board_ns (console: $board_console)" >&2
board_wait_ready "$boot_wait" || exit 1
echo "aesd accepting at $board_ready_cycles guest cycles ($((SECONDS - start)) s of wall time)" >&2
if (($#)); then
  board_exec "$@"
  exit
fi
echo "running; interrupt to stop" >&2
wait "$board_pid"
