#!/usr/bin/env bash
# Transit's data endpoints, aesd beside OpenBao 2.7.2, in one run on this
# host: the release `aesd --dev` and a real `bao server -dev` (from
# scripts/bao/.venv, scripts/bao-cli.sh installs it, or $AESD_BAO's venv) get the same requests
# from one keep-alive connection each (scripts/bench/transit.py, a separate
# process): REQUESTS encryptions of 1 KiB, then BATCHES batches of 100 1-KiB
# items, every answer checked. Printed per server: requests (items) per
# second, the server's own CPU (user + system from /proc/PID/stat) per
# request (item), its peak RSS (VmHWM), and aesd's figures as a share of
# OpenBao's. A benchmark, not a test: it prints figures and gates nothing.
# With --floor, a third server gets the same 1 KiB requests in the same run:
# scripts/bench/loopback-floor.c's http mode (gcc -O2), which reads each
# request and sends a canned answer of the size aesd's (a thread per
# connection, blocking reads, no JSON, no cryptography): the least a server
# pays per request on this host, printed as a share of OpenBao's CPU with
# aesd's CPU above it.
#
# Usage: bash scripts/bench/transit.sh [--requests N] [--batches N] [--floor] [--no-build]
#   --requests N   1 KiB encryptions per server (default 5000)
#   --batches N    batches of 100 per server (default 100)
#   --floor        also measure the floor above (1 KiB requests only)
#   --no-build     use target/release/aesd as it is
# Exit status: 0 done; 1 a build, start or answer failed; 2 bad usage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
# shellcheck source=scripts/bench/lib.sh
. "$root/scripts/bench/lib.sh"

requests=5000
batches=100
build=1
floor=0
while (($#)); do
  case "$1" in
    --requests | --batches)
      if (($# < 2)) || ! [[ "$2" =~ ^[1-9][0-9]*$ ]]; then
        echo "transit.sh: $1 takes a positive number" >&2
        exit 2
      fi
      if [[ "$1" == --requests ]]; then requests="$2"; else batches="$2"; fi
      shift
      ;;
    --no-build) build=0 ;;
    --floor) floor=1 ;;
    -h | --help)
      sed -n '2,24s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "transit.sh: unknown argument $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done

bao_find "$root" transit.sh
venv="$bao_venv"
aesd="${CARGO_TARGET_DIR:-$root/target}/release/aesd"
if ((build)); then
  step "cargo build --release --bin aesd"
  (cd "$root" && cargo build --quiet --locked --release -p aesd-server --bin aesd)
fi
[[ -x "$aesd" ]] || {
  echo "transit.sh: no $aesd (run without --no-build)" >&2
  exit 1
}

work="$(mktemp -d)"
pids=()
bao_pid=""
cleanup() {
  if [[ -n "$bao_pid" ]]; then pids+=("$bao_pid"); fi
  if ((${#pids[@]})); then stop_pids "${pids[@]}"; fi
  rm -rf "$work"
}
trap cleanup EXIT

bao_dev_start "$work"

aesd_port="$(free_port)"
"$aesd" --dev --dev-root-token-id root --listen 127.0.0.1:0 \
  --http-listen "127.0.0.1:$aesd_port" --log warn >"$work/aesd.out" 2>"$work/aesd.log" &
pids+=("$!")
aesd_pid="$!"
wait_port "$aesd_port" 30

step "$requests encryptions of 1 KiB and $batches batches of 100 per server, one connection each"
"$venv/bin/python" "$root/scripts/bench/transit.py" "http://127.0.0.1:$bao_port" "$bao_pid" \
  openbao "$requests" "$batches" | tee "$work/figures"
"$venv/bin/python" "$root/scripts/bench/transit.py" "http://127.0.0.1:$aesd_port" "$aesd_pid" \
  aesd "$requests" "$batches" | tee -a "$work/figures"
if ((floor)); then
  step "the floor: loopback-floor's http mode (canned answers), $requests requests of 1 KiB"
  loopback_floor_build "$work/loopback-floor"
  floor_port="$(free_port)"
  "$work/loopback-floor" server "$floor_port" http 65536 0 0 >"$work/floor.out" &
  pids+=("$!")
  floor_pid="$!"
  wait_port "$floor_port" 30
  "$venv/bin/python" "$root/scripts/bench/transit.py" "http://127.0.0.1:$floor_port" \
    "$floor_pid" floor "$requests" 0 | tee -a "$work/figures"
fi
python3 - "$work/figures" <<'PY'
import sys
figures = {}
for line in open(sys.argv[1]):
    label, name, value, _unit = line.split()
    figures[(label, name)] = float(value)
print("aesd as a share of OpenBao (lower is better for CPU and RSS, higher for rates):")
for name in sorted({name for label, name in figures if label == "aesd"}):
    bao, aesd = figures[("openbao", name)], figures[("aesd", name)]
    print(f"  {name:32} {aesd / bao if bao else float('inf'):8.3f}")
cpu = "encrypt_1k_cpu_per_request"
if ("floor", cpu) in figures:
    bao, aesd, floor = (figures[(label, cpu)] for label in ("openbao", "aesd", "floor"))
    print(f"CPU per 1 KiB request against the floor (a canned-answer server): floor "
          f"{floor:.1f} us = {floor / bao:.3f} of OpenBao's; aesd above it {aesd - floor:.1f} us "
          f"= {(aesd - floor) / bao:.3f}; OpenBao above it {bao - floor:.1f} us")
PY
