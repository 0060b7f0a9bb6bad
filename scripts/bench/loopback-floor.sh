#!/usr/bin/env bash
# The floor under aesd's CPU per byte on this host: what a server that
# does nothing but stream every byte back over loopback TCP costs in its own
# CPU, beside `openssl speed` of the two ciphers aesd's host goals compare
# with, in one run.
#
# Builds scripts/bench/loopback-floor.c, starts its echo server (a thread per
# connection) in each MODE, runs its client as a separate process (not
# counted: CONNECTIONS connections at once, each sending BYTES in 65 600-byte
# writes, aesload's frame size, and reading everything back, checked), and
# divides the bytes by the server's user + system CPU time (all its threads,
# getrusage, which the server prints when it is stopped). Modes: copy (read into user memory, write back: the least
# any server that encrypts must do), touch (copy, and xor every byte in
# place, like a cipher's pass over the data), splice (socket to socket inside
# the kernel, no user copy). With --sockbuf, copy is measured again with
# fixed 4 MiB SO_SNDBUF and SO_RCVBUF (autotuning off on that side); a run
# that stalls (no progress for 60 s) is reported, not failed.
#
# Usage: bash scripts/bench/loopback-floor.sh [OPTIONS]
#   --bytes N         bytes per connection (default 200000000)
#   --connections N   connections at once (default 10)
#   --repeat N        runs of each mode (default 1)
#   --sockbuf         also measure fixed socket buffers
#   --quick           2 MB per connection, one run, no openssl speed (CI)
#   --figure MODE     only MODE (copy, touch or splice), REPEAT runs, and
#                     print only their median in ns per byte (for
#                     cbc-host.sh and age-host.sh --floor)
#   -h, --help        this help
# Exit status: 0 done; 1 a build, run or check failed; 2 bad usage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
# shellcheck source=scripts/bench/lib.sh
. "$root/scripts/bench/lib.sh"

die_usage() {
  echo "loopback-floor.sh: $* (try --help)" >&2
  exit 2
}

bytes=200000000
connections=10
repeat=1
sockbuf=0
quick=0
figure=""
while (($#)); do
  case "$1" in
    --bytes | --connections | --repeat)
      (($# >= 2)) || die_usage "$1 needs a value"
      [[ "$2" =~ ^[1-9][0-9]*$ ]] || die_usage "$1 takes a positive number"
      case "$1" in
        --bytes) bytes="$2" ;;
        --connections) connections="$2" ;;
        --repeat) repeat="$2" ;;
      esac
      shift
      ;;
    --sockbuf) sockbuf=1 ;;
    --quick) quick=1 ;;
    --figure)
      (($# >= 2)) || die_usage "--figure needs a mode"
      [[ "$2" =~ ^(copy|touch|splice)$ ]] || die_usage "--figure takes copy, touch or splice"
      figure="$2"
      shift
      ;;
    -h | --help)
      sed -n '2,29s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *) die_usage "unknown argument $1" ;;
  esac
  shift
done
if ((quick)); then
  bytes=2000000
  repeat=1
fi

apt_install gcc libc6-dev openssl python3
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then stop_pids "$server_pid"; fi
  rm -rf "$work"
}
trap cleanup EXIT
loopback_floor_build "$work/loopback-floor"

results="$work/results"
: >"$results"
# One run: MODE SNDBUF RCVBUF; appends "MODE SNDBUF RCVBUF BYTES USER_US
# SYSTEM_US" to the results (BYTES "stalled" when the client made no
# progress for 60 s).
measure() {
  local mode="$1" sndbuf="$2" rcvbuf="$3" port total cpu status=0
  port="$(free_port)"
  "$work/loopback-floor" server "$port" "$mode" 65536 "$sndbuf" "$rcvbuf" >"$work/cpu" &
  server_pid=$!
  wait_port "$port" 10
  total="$(timeout 60 "$work/loopback-floor" client "$port" "$connections" "$bytes" 65600 "$mode")" || status=$?
  kill -TERM "$server_pid"
  wait "$server_pid" || {
    echo "loopback-floor.sh: the $mode server failed" >&2
    exit 1
  }
  server_pid=""
  cpu="$(cat "$work/cpu")"
  [[ "$cpu" =~ ^[0-9]+\ [0-9]+$ ]] || {
    echo "loopback-floor.sh: no CPU time from the $mode server" >&2
    exit 1
  }
  if ((status == 124)) && [[ "$sndbuf$rcvbuf" != 00 ]]; then
    total=stalled
  elif ((status != 0)); then
    echo "loopback-floor.sh: the $mode client failed (status $status)" >&2
    exit 1
  elif [[ "$total" != $((bytes * connections)) ]]; then
    echo "loopback-floor.sh: $mode moved $total bytes, not $((bytes * connections))" >&2
    exit 1
  fi
  echo "$mode $sndbuf $rcvbuf $total $cpu" >>"$results"
}

runs=(copy:0:0 touch:0:0 splice:0:0)
if ((sockbuf)); then runs+=(copy:4194304:0 copy:0:4194304); fi
if [[ -n "$figure" ]]; then runs=("$figure:0:0"); fi
for ((run = 0; run < repeat; run++)); do
  for spec in "${runs[@]}"; do
    IFS=: read -r mode sndbuf rcvbuf <<<"$spec"
    measure "$mode" "$sndbuf" "$rcvbuf"
  done
done

if [[ -n "$figure" ]]; then
  python3 - "$results" <<'PY'
import statistics, sys
figures = []
for line in open(sys.argv[1]):
    _, _, _, total, user_us, system_us = line.split()
    figures.append((int(user_us) + int(system_us)) * 1e3 / int(total))
print(f"{statistics.median(figures):.3f}")
PY
  exit 0
fi

cbc=0
chacha=0
if ((!quick)); then
  cbc="$(openssl_speed loopback-floor.sh aes-256-cbc)"
  chacha="$(openssl_speed loopback-floor.sh chacha20-poly1305)"
fi
python3 - "$results" "$cbc" "$chacha" "$connections" "$bytes" <<'PY'
import sys
path, cbc, chacha = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
connections, per = int(sys.argv[4]), int(sys.argv[5])
print(f"echo server over loopback TCP, {connections} connections x {per / 1e6:g} MB, "
      "65 536-byte reads; ns per byte of the server's own CPU (user + system)")
for line in open(path):
    mode, snd, rcv, total, user_us, system_us = line.split()
    label = mode + ("" if snd == rcv == "0" else f" (SO_SNDBUF {snd}, SO_RCVBUF {rcv})")
    if total == "stalled":
        print(f"  {label:46} stalled (no progress for 60 s)")
        continue
    user, system = int(user_us) / 1e6, int(system_us) / 1e6
    ns = (user + system) * 1e9 / int(total)
    print(f"  {label:46} {ns:6.3f} ns/byte  ({int(total) / 1e6:.0f} MB in "
          f"{user:.2f} + {system:.2f} CPU-s user + system)")
if cbc:
    print(f"openssl speed -evp aes-256-cbc -bytes 16384 (user CPU, one core): "
          f"{cbc / 1e6:.0f} MB/s, {1e9 / cbc:.3f} ns/byte; "
          f"issue 27's goal (1.5 x) allows {1e9 / (1.5 * cbc):.3f} ns/byte")
    print(f"openssl speed -evp chacha20-poly1305 -bytes 16384: "
          f"{chacha / 1e6:.0f} MB/s, {1e9 / chacha:.3f} ns/byte; "
          f"issue 28's goal (1.0 x) allows {1e9 / chacha:.3f} ns/byte")
PY
