#!/usr/bin/env bash
# Instructions per byte of AES-256-CBC on VexRiscv's AES instruction, counted
# as the board executes them, under qemu-user (which lacks the instruction):
# the riscv32 workload (crates/vexriscv-aes/examples/vexriscv_count.rs, the
# crate's real instruction path) runs with the trap-and-emulate SIGILL
# handler, and the counting plugin (scripts/bench/icount.c) leaves out the
# handler's code (skip=, from the symbol table) and everything outside the
# program's .text (keep=: qemu's signal-return page). What remains of a trap
# is measured: calibrate2 (two instructions per loop iteration) minus
# calibrate (one) gives what one trapped instruction adds to the count; each
# workload's count is corrected by that times its number of AES instructions
# (224 per block: 14 rounds of 16), so every AES instruction counts as one.
#   per byte = (count(N) - count(0)) / N - 14 * (that cost - 1)
#
# Usage: scripts/bench/vexriscv-icount.sh [--size BYTES] [--json FILE]
#   --size BYTES   bytes per workload (default 262144; a multiple of 32)
#   --json FILE    also write the results as JSON
# Env: AESD_BENCH_CACHE (plugin cache), CARGO_TARGET_DIR.
# Exit status: 0 done; 1 a build or run failed; 2 bad usage.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
# shellcheck source=scripts/cross/env.sh
. "$root/scripts/cross/env.sh"
# shellcheck source=scripts/bench/lib.sh
. "$here/lib.sh"

size=262144
json=""
while (($#)); do
  case "$1" in
    --size)
      size="${2:?--size needs a value}"
      shift
      ;;
    --json)
      json="${2:?--json needs a value}"
      shift
      ;;
    -h | --help)
      sed -n '2,19s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "vexriscv-icount.sh: unknown option $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
if ! [[ "$size" =~ ^[1-9][0-9]*$ ]] || ((size % 32 != 0)); then
  echo "vexriscv-icount.sh: --size must be a positive multiple of 32" >&2
  exit 2
fi

apt_install gcc binutils qemu-user python3
plugin="$(icount_plugin)"
target=riscv32imac-unknown-linux-musl
step "cargo build --release --example vexriscv_count (riscv32, feature emulate, with symbols)"
(cd "$root" && CARGO_PROFILE_RELEASE_STRIP=false cargo "+$AESD_NIGHTLY" build --quiet --locked \
  --release --target "$target" -p aesd-vexriscv --features emulate --example vexriscv_count \
  --jobs "${AESD_JOBS:-2}")
bin="${CARGO_TARGET_DIR:-$root/target}/$target/release/examples/vexriscv_count"

plugin_args="$(emulator_plugin_args "$bin")"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
count() {
  env -i PATH="$PATH" AESD_QEMU_EXTRA="-plugin $plugin,out=$work/count,$plugin_args -U AESD_QEMU_EXTRA -U PATH" \
    "$root/scripts/cross/qemu-run.sh" "$target" "$bin" "$@" >/dev/null 2>"$work/stderr" || {
    cat "$work/stderr" >&2
    return 1
  }
  # (Its "ticks N" line is the host's time under qemu: meaningless here.)
  grep -v '^ticks ' "$work/stderr" >&2 || true
  head -n1 "$work/count"
}

calibration=100000
one=$(($(count calibrate "$calibration") - $(count calibrate 0)))
two=$(($(count calibrate2 "$calibration") - $(count calibrate2 0)))
trap_cost="$(python3 -c "print(($two - $one) / $calibration)")"
results=()
for workload in encrypt encrypt2 decrypt; do
  base="$(count "$workload" 0)"
  full="$(count "$workload" "$size")"
  results+=("$workload $base $full")
done
python3 - "$size" "$trap_cost" "$json" "${results[@]}" <<'PY'
import json, sys
size, trap_cost, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
rows = []
print(f"one trapped AES instruction adds {trap_cost:.2f} to the raw count (counted here as 1)")
print(f"| workload | raw count(0) | raw count({size}) | instr/byte as the board runs it |")
print("| --- | ---: | ---: | ---: |")
for line in sys.argv[4:]:
    workload, base, full = line.split()
    bytes_ = size * (2 if workload == "encrypt2" else 1)
    raw = (int(full) - int(base)) / bytes_
    per_byte = raw - 14 * (trap_cost - 1)
    rows.append({"workload": workload, "bytes": bytes_, "count_0": int(base), "count_n": int(full),
                 "instructions_per_byte": round(per_byte, 2)})
    print(f"| {workload} | {base} | {full} | {per_byte:.1f} |")
if out:
    json.dump({"trap_cost": trap_cost, "workloads": rows}, open(out, "w"), indent=2)
    print(f"wrote {out}")
PY
