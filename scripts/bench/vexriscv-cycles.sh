#!/usr/bin/env bash
# Cycles and instructions per byte on the VexRiscv RTL: LiteX's simulation
# SoC (single-core VexRiscv rv32imac, 4 KiB instruction and data caches)
# under Verilator runs the bare-metal firmware in firmware/, which reads
# mcycle/minstret around each workload and checks every output against
# known answers, on one or both of two cores:
#   imac      LiteX's VexRiscv_IMAC.v (pythondata-cpu-vexriscv): aesd's
#             software AES-256-CBC with 1 and 2 lanes, the `aes` crate's CBC
#             decryption, OpenSSL's own aes_core.c + CBC loop (-O3, both
#             directions), PBKDF2-HMAC-SHA256; the AES instruction must trap
#   imac-aes  the same configuration with VexRiscv's AesPlugin (custom-0),
#             generated from the wheel's VexRiscv sources by
#             soc/vexriscv/generate.sh (or AESD_VEXRISCV_AES_V): aesd's
#             start-up probe and self-test, and its instruction-path CBC
#             kernels (1 and 2 chains, decryption) checked against OpenSSL
# Prints one table (core, CPI, cycles per byte, MB/s at 100 and 150 MHz)
# and writes JSON: a list of {"workload", "core", "bytes", "cycles",
# "instructions"} (PBKDF2 also "iterations").
#
# Usage: scripts/bench/vexriscv-cycles.sh [--core imac|imac-aes|all] [--quick]
#          [--bytes N] [--json FILE] [--opt-level LEVEL] [--corrupt CHECK]
#          [--timeout SECONDS] [--build-only]
#   --core C         which core(s) to measure (default all: both, one table)
#   --quick          1 KiB per workload, 64 PBKDF2 iterations (CI-sized)
#   --bytes N        bytes per workload (default 65536; a multiple of 16,
#                    at most 655360: three buffers in the 2 MiB of RAM)
#   --json FILE      write the results as JSON (only if every check passed)
#   --opt-level L    the firmware's Rust opt-level (default 3, as the board
#                    profile builds the cipher crates; "s" for comparison);
#                    the C T-table code is always -O3
#   --corrupt CHECK  corrupt the expected value of one firmware check (e.g.
#                    fips197-aesd, fips197-insn): the run must then fail (a
#                    test; with --core all, checks of the other core fail
#                    as "no check of that name")
#   --timeout S      give up on the simulation after S seconds (default 1800)
#   --build-only     only build the firmware for the chosen core(s) (CI: needs
#                    the RISC-V GCC and the nightly's rust-src, not the
#                    simulator)
# The full run (64 KiB, 1000 PBKDF2 iterations) simulates for about 3 minutes
# here, --quick for about 6 s per core; compiling a simulator once takes
# about 2, generating the AES core the first time 1-4 (Maven, scalac).
# Prerequisites are installed by the script itself (idempotent): bash
# soc/setup.sh --with-sim (Verilator, RISC-V GCC, the LiteX packages in
# soc/.venv; only the GCC with --build-only); the pinned nightly's rust-src
# (core is built for riscv32imac-unknown-none-elf with -Zbuild-std).
# Env: AESD_RTL_CACHE (Verilator build and core cache, default
#      ~/.cache/aesd-rtl), AESD_SOC_VENV (default soc/.venv), CARGO_TARGET_DIR,
#      AESD_VEXRISCV_AES_V (a VexRiscv+AesPlugin netlist with the ports of
#      VexRiscv_IMAC.v to measure instead of generating one).
# Exit status: 0 every check passed; 1 a check failed, the simulation timed
# out or a build failed; 2 bad usage or missing prerequisites.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
# shellcheck source=scripts/cross/env.sh
. "$root/scripts/cross/env.sh"

bytes=65536
iterations=1000
cores=(imac imac-aes)
json=""
corrupt=""
timeout=1800
build_only=0
opt_level=3
while (($#)); do
  case "$1" in
    --core)
      case "${2:-}" in
        imac | imac-aes) cores=("$2") ;;
        all) cores=(imac imac-aes) ;;
        *)
          echo "vexriscv-cycles.sh: --core must be imac, imac-aes or all" >&2
          exit 2
          ;;
      esac
      shift
      ;;
    --quick)
      bytes=1024
      iterations=64
      ;;
    --bytes)
      bytes="${2:?--bytes needs a value}"
      shift
      ;;
    --json)
      json="${2:?--json needs a value}"
      shift
      ;;
    --corrupt)
      corrupt="${2:?--corrupt needs a check name}"
      shift
      ;;
    --timeout)
      timeout="${2:?--timeout needs a value}"
      shift
      ;;
    --build-only) build_only=1 ;;
    --opt-level)
      opt_level="${2:?--opt-level needs a value}"
      shift
      ;;
    -h | --help)
      sed -n '2,51s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "vexriscv-cycles.sh: unknown option $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
if ! [[ "$bytes" =~ ^[1-9][0-9]*$ ]] || ((bytes % 16 != 0 || bytes > 655360)); then
  echo "vexriscv-cycles.sh: --bytes must be a positive multiple of 16, at most 655360" >&2
  exit 2
fi
case "$opt_level" in
  [0-3]) opt_config="profile.release.opt-level=$opt_level" ;;
  s | z) opt_config="profile.release.opt-level=\"$opt_level\"" ;;
  *)
    echo "vexriscv-cycles.sh: --opt-level must be 0-3, s or z" >&2
    exit 2
    ;;
esac
if ! [[ "$timeout" =~ ^[1-9][0-9]*$ ]]; then
  echo "vexriscv-cycles.sh: --timeout must be a positive number of seconds" >&2
  exit 2
fi

venv="${AESD_SOC_VENV:-$root/soc/.venv}"
python="$venv/bin/python"
# The prerequisites install themselves (idempotent): the RISC-V GCC for the
# firmware's C code, and for a simulation everything soc/setup.sh --with-sim
# brings (Verilator, the LiteX packages in the venv).
if ((build_only)); then
  apt_install gcc-riscv64-unknown-elf
else
  bash "$root/soc/setup.sh" --with-sim
fi
missing=()
tools=(riscv64-unknown-elf-gcc riscv64-unknown-elf-objcopy)
if ((!build_only)); then
  tools+=(verilator make g++)
  "$python" -c 'import litex, pythondata_cpu_vexriscv' 2>/dev/null || missing+=("litex + pythondata-cpu-vexriscv in $venv")
fi
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
  echo "vexriscv-cycles.sh: missing ${missing[*]}; run: bash soc/setup.sh --with-sim" >&2
  exit 2
fi

fw_target="${CARGO_TARGET_DIR:-$root/firmware/target}"
elf="$fw_target/riscv32imac-unknown-none-elf/release/aesd-firmware"
# build_firmware CORE UART_BASE OUT: builds the firmware for a core and
# copies its ELF to OUT.
build_firmware() {
  step "firmware for $1: cargo build --release (riscv32imac-unknown-none-elf, opt-level $opt_level, $bytes bytes per workload${corrupt:+, corrupting $corrupt})"
  (cd "$root/firmware" &&
    AESD_FW_CORE="$1" AESD_FW_BYTES="$bytes" AESD_FW_PBKDF2_ITERATIONS="$iterations" \
      AESD_FW_UART_BASE="$2" AESD_FW_CORRUPT="$corrupt" \
      CC_riscv32imac_unknown_none_elf=riscv64-unknown-elf-gcc \
      nice -n 10 cargo "+$AESD_NIGHTLY" build --quiet --locked --release --config "$opt_config" \
      --target riscv32imac-unknown-none-elf -Zbuild-std=core,compiler_builtins \
      -Zbuild-std-features=compiler-builtins-mem --target-dir "$fw_target")
  cp "$elf" "$3"
}
if ((build_only)); then
  for core in "${cores[@]}"; do
    out="$(mktemp)"
    build_firmware "$core" 0xf0001800 "$out" # LiteX's sim SoC; the real run reads it from csr.json
    riscv64-unknown-elf-objcopy -O binary "$out" "$out.bin"
    echo "built the $core firmware ($(wc -c <"$out.bin") bytes of ROM image)"
    rm -f "$out" "$out.bin"
  done
  exit 0
fi

# --- The simulators: generated and compiled once per set of inputs ---------------
# LiteX's sim SoC with the firmware as ROM content (the CPU starts at 0; no
# BIOS) and 2 MiB of integrated main RAM (firmware/link.x). The ROM is read
# with $readmemh from sim_rom.init when the simulation starts, so the
# compiled simulator does not depend on the firmware: each run gets its own
# copy of the init files. For imac-aes the generated SoC's VexRiscv_IMAC.v
# is replaced by the AesPlugin core (same ports) before Verilator compiles.
sim_args=(--cpu-type vexriscv --cpu-variant imac --integrated-rom-size 0x20000
  --integrated-main-ram-size 0x200000)
cache="${AESD_RTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-rtl}"
# sim_for CORE: builds (once) the simulator of a core; sets $sim.
sim_for() {
  local core=$1 netlist=""
  if [[ "$core" == imac-aes ]]; then
    if [[ -n "${AESD_VEXRISCV_AES_V:-}" ]]; then
      netlist="$AESD_VEXRISCV_AES_V"
      [[ -s "$netlist" ]] || {
        echo "vexriscv-cycles.sh: AESD_VEXRISCV_AES_V=$netlist: no such netlist" >&2
        exit 2
      }
    else
      netlist="$(bash "$root/soc/vexriscv/generate.sh")"
    fi
  fi
  local key
  key="$({
    echo "sim v1: ${sim_args[*]}"
    cat "$root/soc/requirements.txt" "$root/soc/requirements-sim.txt"
    "$python" --version
    verilator --version
    g++ --version | head -n1
    [[ -z "$netlist" ]] || sha256sum <"$netlist"
  } | sha256sum | cut -c1-16)"
  sim="$cache/sim-$key"
  [[ -x "$sim/gateware/obj_dir/Vsim" ]] && return 0
  step "LiteX sim SoC (vexriscv $core) under Verilator: generating and compiling into $sim (a few minutes, once)"
  rm -rf "$sim.tmp"
  mkdir -p "$sim.tmp"
  printf '\x6f\x00\x00\x00' >"$sim.tmp/placeholder.bin" # j . (the firmware replaces it)
  (cd "$sim.tmp" && PATH="$venv/bin:$PATH" "$python" -m litex.tools.litex_sim "${sim_args[@]}" \
    --rom-init placeholder.bin --no-compile-software --no-compile-gateware --non-interactive \
    --output-dir "$sim.tmp" --csr-json "$sim.tmp/csr.json") >"$sim.tmp/generate.log" 2>&1 ||
    {
      tail -n 30 "$sim.tmp/generate.log" >&2
      echo "vexriscv-cycles.sh: litex_sim failed ($sim.tmp/generate.log)" >&2
      exit 1
    }
  if [[ -n "$netlist" ]]; then
    cp "$netlist" "$sim.tmp/gateware/VexRiscv_IMAC_Aes.v"
    grep -q '/VexRiscv_IMAC\.v ' "$sim.tmp/gateware/build_sim.sh" || {
      echo "vexriscv-cycles.sh: LiteX's build_sim.sh does not name VexRiscv_IMAC.v" >&2
      exit 1
    }
    sed -i "s|[^ ]*/VexRiscv_IMAC\.v |$sim.tmp/gateware/VexRiscv_IMAC_Aes.v |" "$sim.tmp/gateware/build_sim.sh"
  fi
  (cd "$sim.tmp/gateware" && nice -n 10 bash build_sim.sh) >"$sim.tmp/verilator.log" 2>&1 ||
    {
      tail -n 30 "$sim.tmp/verilator.log" >&2
      echo "vexriscv-cycles.sh: Verilator build failed ($sim.tmp/verilator.log)" >&2
      exit 1
    }
  rm -rf "$sim"
  mv "$sim.tmp" "$sim"
}

work="$(mktemp -d)"
vsim_pid=""
cleanup() {
  if [[ -n "$vsim_pid" ]] && kill -0 "$vsim_pid" 2>/dev/null; then
    kill "$vsim_pid" 2>/dev/null || true
    wait "$vsim_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# simulate CORE: builds its simulator and firmware, runs until the firmware
# says DONE; the UART output is left in $work/CORE.log.
simulate() {
  local core=$1 run="$work/$1"
  sim_for "$core"
  local uart_base
  uart_base="$("$python" -c 'import json, sys; print(hex(json.load(open(sys.argv[1]))["csr_bases"]["uart"]))' "$sim/csr.json")"
  mkdir -p "$run"
  build_firmware "$core" "$uart_base" "$run/firmware.elf"
  riscv64-unknown-elf-objcopy -O binary "$run/firmware.elf" "$run/firmware.bin"
  cp "$sim"/gateware/*.init "$sim/gateware/sim_config.js" "$run/"
  ln -s "$sim/gateware/modules" "$run/modules" # the simulator's plug-ins (UART to console, clock)
  "$python" - "$run/firmware.bin" "$run/sim_rom.init" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
data += bytes(-len(data) % 4)
if len(data) > 0x20000:
    sys.exit(f"firmware is {len(data)} bytes, the ROM 128 KiB")
with open(sys.argv[2], "w") as out:
    for i in range(0, len(data), 4):
        out.write(f"{int.from_bytes(data[i:i + 4], 'little'):08x}\n")
PY
  step "simulation ($core): $sim/gateware/obj_dir/Vsim (timeout ${timeout} s)"
  local log="$work/$core.log" start=$SECONDS status=""
  (cd "$run" && exec "$sim/gateware/obj_dir/Vsim") >"$log" 2>&1 </dev/null &
  vsim_pid=$!
  while true; do
    if grep -q '^DONE ' "$log"; then
      status=finished
      break
    fi
    if ! kill -0 "$vsim_pid" 2>/dev/null; then
      status=exited
      break
    fi
    if ((SECONDS - start >= timeout)); then
      status=timeout
      break
    fi
    sleep 1
  done
  kill "$vsim_pid" 2>/dev/null || true
  wait "$vsim_pid" 2>/dev/null || true
  vsim_pid=""
  sed -n '/^START /,$p' "$log" >&2
  if [[ "$status" != finished ]]; then
    tail -n 20 "$log" >&2
    echo "vexriscv-cycles.sh: the $core simulation $([[ $status == timeout ]] && echo "timed out after $timeout s" || echo "stopped") before the firmware said DONE" >&2
    exit 1
  fi
  echo "simulated $core in $((SECONDS - start)) s" >&2
}

logs=()
for core in "${cores[@]}"; do
  simulate "$core"
  logs+=("$work/$core.log")
done

"$python" - "$json" "$corrupt" "${logs[@]}" <<'PY'
import json, sys
out, corrupt, logs = sys.argv[1], sys.argv[2], sys.argv[3:]
rows, fails, all_done, corrupted = [], [], True, False
for log in logs:
    core, done = None, None
    for line in open(log, errors="replace"):
        line = line.strip()
        if line.startswith("INFO "):
            core = dict(item.split("=", 1) for item in line.split()[1:])["core"]
        elif line.startswith("RESULT "):
            fields = dict(item.split("=", 1) for item in line.split()[1:])
            row = {"workload": fields["workload"], "core": core, "bytes": int(fields["bytes"]),
                   "cycles": int(fields["cycles"]), "instructions": int(fields["instret"])}
            if "iterations" in fields:
                row["iterations"] = int(fields["iterations"])
            rows.append(row)
        elif line.startswith("FAIL corrupt="):
            # With several cores, a corrupted check exists on one of them.
            if len(logs) == 1:
                fails.append(line)
        elif line.startswith("FAIL"):
            fails.append(line)
            corrupted |= "corrupted on purpose" in line
        elif line.startswith("DONE "):
            done = line.split()[1]
    all_done &= done is not None
if corrupt and not corrupted and not fails:
    fails.append(f"FAIL corrupt={corrupt}: no check of that name on any core")
print("| core | workload | bytes | cycles | instructions | CPI | cycles/byte | MB/s at 100 MHz | MB/s at 150 MHz |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for row in rows:
    cpi = row["cycles"] / row["instructions"] if row["instructions"] else float("nan")
    if "iterations" in row:
        per_iter = row["cycles"] / row["iterations"]
        print(f"| {row['core']} | {row['workload']} ({row['iterations']} iterations) | {row['bytes']} | "
              f"{row['cycles']} | {row['instructions']} | {cpi:.3f} | {per_iter:.0f} per iteration | "
              f"{10000 * per_iter / 100e6:.2f} s per 10 000 iterations | {10000 * per_iter / 150e6:.2f} s |")
        continue
    cpb = row["cycles"] / row["bytes"]
    print(f"| {row['core']} | {row['workload']} | {row['bytes']} | {row['cycles']} | {row['instructions']} | "
          f"{cpi:.3f} | {cpb:.1f} | {100 / cpb:.3f} | {150 / cpb:.3f} |")
ok = all_done and not fails and rows
if out and ok:
    with open(out, "w") as f:
        json.dump(rows, f, indent=2)
        f.write("\n")
    print(f"wrote {out}")
if not ok:
    for line in fails:
        print(line, file=sys.stderr)
    sys.exit("vexriscv-cycles.sh: the firmware's self-check FAILED")
PY
