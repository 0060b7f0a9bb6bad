#!/usr/bin/env bash
# AES-256-CBC (format 1) on this host: the release aesd's own CPU per byte of
# an aesload suite beside `openssl speed -evp aes-256-cbc` on one core, in
# one run.
#
# Starts the release aesd (defaults: one worker per core; --log warn), runs
# the release aesload against it as a separate process (not counted):
# `--suite SUITE` (default large: 100 clients in batches of 10, 849 MB, every
# result verified by aesload), REPEAT times, and reads aesd's user+system CPU
# time (all its threads) from /proc/PID/stat before and after. The figure is
# bytes processed (aesload's JSON, `bytes_processed`) per CPU-second of aesd's
# whole process: reading frames, copies, scheduling, the cipher and the
# kernel's work for its sockets. `openssl speed -evp aes-256-cbc -bytes 16384`
# reports user CPU time (its default), one core, one CBC chain.
#
# Usage: bash scripts/bench/cbc-host.sh [OPTIONS]
#   --suite NAME     aesload suite (default large)
#   --repeat N       runs of the suite against the same aesd (default 1)
#   --aesd PATH      the aesd binary to measure (default: target/release/aesd,
#                    built first); to compare builds side by side, run once
#                    per binary
#   --aesload PATH   the aesload binary (default: target/release/aesload)
#   --no-build       use target/release as it is
#   --floor          also measure the copy floor (scripts/bench/loopback-floor.sh
#                    --figure copy: an echo server, the same bytes over 10
#                    connections, median of 3) and print aesd's CPU per byte
#                    above it beside openssl's
#   -h, --help       this help
# Exit status: 0 done; 1 a build, run or check failed; 2 bad usage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

die_usage() {
  echo "cbc-host.sh: $* (try --help)" >&2
  exit 2
}

suite=large
repeat=1
build=1
floor=0
bin="${CARGO_TARGET_DIR:-$root/target}/release"
aesd="$bin/aesd"
aesload="$bin/aesload"
while (($#)); do
  case "$1" in
    --suite | --repeat | --aesd | --aesload)
      (($# >= 2)) || die_usage "$1 needs a value"
      case "$1" in
        --suite) suite="$2" ;;
        --repeat) repeat="$2" ;;
        --aesd) aesd="$2" ;;
        --aesload) aesload="$2" ;;
      esac
      shift
      ;;
    --no-build) build=0 ;;
    --floor) floor=1 ;;
    -h | --help)
      sed -n '2,29s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *) die_usage "unknown argument $1" ;;
  esac
  shift
done
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die_usage "--repeat takes a positive number"

apt_install openssl python3 jq
if ((build)); then
  step "cargo build --release --bin aesd --bin aesload"
  (cd "$root" && cargo build --quiet --locked --release -p aesd-server -p aesd-load --bin aesd --bin aesload)
fi
for binary in "$aesd" "$aesload"; do
  [[ -x "$binary" ]] || {
    echo "cbc-host.sh: missing $binary (run without --no-build)" >&2
    exit 1
  }
done

work="$(mktemp -d)"
aesd_pid=""
trap 'stop_aesd_and_remove "$work"' EXIT

port="$(free_port)"
"$aesd" --listen "127.0.0.1:$port" --log warn 2>"$work/aesd.log" &
aesd_pid=$!
wait_port "$port" 30

# aesd's user + system CPU time so far, in clock ticks (all threads).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$aesd_pid/stat"; }
hz="$(getconf CLK_TCK)"

bytes=0
before="$(cpu_ticks)"
for ((run = 0; run < repeat; run++)); do
  "$aesload" --server "127.0.0.1:$port" --suite "$suite" --quiet --json "$work/run.json" >"$work/load.txt" 2>&1 || {
    echo "cbc-host.sh: aesload failed:" >&2
    cat "$work/load.txt" "$work/aesd.log" >&2
    exit 1
  }
  failed="$(jq '[.suites[].summary.failed] | add' "$work/run.json")"
  [[ "$failed" == 0 ]] || {
    echo "cbc-host.sh: $failed transfers failed" >&2
    exit 1
  }
  bytes=$((bytes + $(jq '[.suites[].summary.bytes_processed] | add' "$work/run.json")))
done
after="$(cpu_ticks)"

openssl_rate="$(openssl_speed cbc-host.sh aes-256-cbc)"
floor_ns=0
if ((floor)); then floor_ns="$(copy_floor_ns 10 $((bytes / 10)))"; fi
python3 - "$bytes" "$((after - before))" "$hz" "$openssl_rate" "$suite" "$repeat" "$aesd" "$floor_ns" <<'PY'
import sys
bytes_, ticks, hz, ossl = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
suite, repeat, aesd, floor_ns = sys.argv[5], int(sys.argv[6]), sys.argv[7], float(sys.argv[8])
seconds = ticks / hz
rate = bytes_ / seconds if seconds else float("inf")
print(f"aesd {aesd}: --suite {suite} x{repeat} from a separate aesload, "
      f"{bytes_ / 1e6:.1f} MB in {seconds:.2f} CPU-s of aesd")
print(f"  aesd            {rate / 1e6:9.1f} MB per CPU-second  {1e9 / rate if rate else 0:6.3f} ns/byte  {rate / ossl:5.2f} x openssl")
print(f"  openssl speed -evp aes-256-cbc -bytes 16384 (user CPU, one core): {ossl / 1e6:9.1f} MB/s  {1e9 / ossl:6.3f} ns/byte")
if floor_ns:
    above = 1e9 / rate - floor_ns
    print(f"  copy floor (an echo server, the same bytes over 10 connections): {floor_ns:6.3f} ns/byte; "
          f"aesd above it {above:6.3f} ns/byte  {1e9 / ossl / above if above > 0 else float('inf'):5.2f} x openssl")
PY
