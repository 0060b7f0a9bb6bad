#!/usr/bin/env bash
# Builds the board itself in simulation (issue 41): LiteX 2024.12's
# litex_sim with the VexRiscv-SMP cluster (AesPlugin, RVC; 1 or 2 cores),
# LiteEth on the simulated PHY and 64 MiB of integrated main RAM (or, with
# --dram, the Arty's 256 MiB DDR3 behind LiteDRAM's controller, on LiteDRAM's
# DDR3 model, the cluster on LiteDRAM's native port as on the board), preloaded
# with OpenSBI 1.6 (fw_jump, the two VexRiscv changes, device tree
# embedded), Debian's Linux 6.1 with the LiteX drivers, and an initramfs
# with the board's own userland (BusyBox, S50aesd, aesd.toml, the riscv32
# aesd of the board profile) plus rtlprobe, the guest's cycle meter.
# soc/sim/run-board.sh boots it; scripts/bench/board-rtl.sh measures it.
#
# Usage: soc/sim/build-board.sh [--cores 1|2] [--no-aes] [--dram] [--jobs N]
#   --cores N   VexRiscv-SMP cores (default 1)
#   --no-aes    the cluster without the AesPlugin (aesd's software AES)
#   --dram      main RAM on LiteDRAM's DDR3 model (MT41K128M16, 16 bits, as
#               the Arty's) instead of integrated one-cycle RAM
#   --jobs N    parallel make jobs (default $AESD_JOBS or 2)
# Prints the variant's folder: ${AESD_RTL_CACHE:-~/.cache/aesd-rtl}/board-<N>c[-noaes][-ddr3]/
# (litex/ holds the SoC, litex/gateware/obj_dir/Vsim the simulator).
# Wall time on 2 busy cores, cold: kernel 8-12 min (cached after), cluster
# generator 2-3 min (cached), aesd 5 min (cached by cargo), litex_sim's two
# passes, OpenSBI and Verilator + g++ 5-7 min per variant (measured: 292 s
# and 435 s); warm: the same 5-7 min, less Verilator when the Verilog is
# unchanged. Disk: about 1.6 GB for the kernel tree (kept for rebuilds), about
# 0.3 GB per variant.
# Exit status: 0 built; 1 a step failed (the end of its log is shown); 2 bad usage.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$repo/scripts/lib.sh"
# shellcheck source=soc/sim/lib/images.sh
. "$here/lib/images.sh"
# shellcheck source=soc/sim/lib/soc.sh
. "$here/lib/soc.sh"
# shellcheck source=soc/sim/lib/board.sh
. "$here/lib/board.sh"

cores=1
aes=1
dram=0
jobs="${AESD_JOBS:-2}"
while (($#)); do
  case "$1" in
    --cores)
      cores="${2:-}"
      shift
      ;;
    --no-aes) aes=0 ;;
    --dram) dram=1 ;;
    --jobs)
      jobs="${2:-}"
      shift
      ;;
    -h | --help)
      sed -n '2,27s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "build-board.sh: unknown argument $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
[[ "$cores" == 1 || "$cores" == 2 ]] || {
  echo "build-board.sh: --cores must be 1 or 2, not '$cores'" >&2
  exit 2
}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || {
  echo "build-board.sh: --jobs needs a positive number, not '$jobs'" >&2
  exit 2
}

# shellcheck disable=SC2317 # called by the sourced libraries
say() { printf '[board-rtl] %s\n' "$*" >&2; }
rtl_cache="${AESD_RTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-rtl}"
kernel_home="$rtl_cache/kernel"
variant_dir="$(board_variant_dir "$cores" "$aes" "$dram")"
logs="$variant_dir/logs"
mkdir -p "$logs"
venv="${AESD_SOC_VENV:-$repo/soc/.venv}"

# The cross toolchain (the pinned nightly, the riscv32 std, zig) builds the
# board's aesd, BusyBox and rtlprobe; a fresh machine has none of it.
{
  bash "$repo/scripts/cross/setup.sh"
  bash "$repo/soc/setup.sh" --with-sim
  apt_install default-jdk-headless maven gcc-riscv64-linux-gnu
} >"$logs/setup.log" 2>&1 || {
  tail -n 20 "$logs/setup.log" >&2
  echo "build-board.sh: scripts/cross/setup.sh or soc/setup.sh --with-sim failed (log: $logs/setup.log)" >&2
  exit 1
}
cluster="$("$repo/soc/vexriscv/smp-cluster.sh" 2>"$logs/cluster.log")" || {
  cat "$logs/cluster.log" >&2
  exit 1
}

start=$SECONDS
build_kernel
build_userland
build_initramfs
build_soc
say "built in $((SECONDS - start)) s: $variant_dir ($(du -sh "$variant_dir" | cut -f1))"
echo "$variant_dir"
