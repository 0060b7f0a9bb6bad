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
#
# Usage: bash scripts/bench/transit.sh [--requests N] [--batches N] [--no-build]
#   --requests N   1 KiB encryptions per server (default 5000)
#   --batches N    batches of 100 per server (default 100)
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
    -h | --help)
      sed -n '2,16s/^# \{0,1\}//p' "$0"
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
python3 - "$work/figures" <<'PY'
import sys
figures = {}
for line in open(sys.argv[1]):
    label, name, value, _unit = line.split()
    figures[(label, name)] = float(value)
print("aesd as a share of OpenBao (lower is better for CPU and RSS, higher for rates):")
for name in sorted({name for _, name in figures}):
    bao, aesd = figures[("openbao", name)], figures[("aesd", name)]
    print(f"  {name:32} {aesd / bao if bao else float('inf'):8.3f}")
PY
