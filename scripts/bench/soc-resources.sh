#!/usr/bin/env bash
# What the board's SoC costs in FPGA resources, as SYNTHESIS ESTIMATES
# (Yosys, Debian's 0.23, `synth_xilinx -family xc7`; no placement, no
# timing, no Vivado): soc/aesd_soc.py generates the Arty A7 SoC (VexRiscv-SMP
# cluster from soc/vexriscv/smp-cluster.sh, LiteDRAM DDR3, LiteEth MII,
# UART) for each core count, with and without the AesPlugin, and Yosys
# counts LUT, FF, BRAM (RAMB36 + RAMB18 / 2) and DSP cells, beside the Arty
# A7-35T / 100T capacities and the published VexRiscv figures.
#
# Usage: scripts/bench/soc-resources.sh [--cores LIST] [--json FILE]
#   --cores LIST  comma-separated core counts of 1, 2, 4 (default 1)
#   --json FILE   also write the rows as JSON
# The BIOS ROM is empty without a Vivado build (soc/aesd_soc.py compiles the
# BIOS only with --build), so Yosys removes it: a 64 KiB BIOS adds 16 RAMB36.
# Wall time: 2.5-21 min per row at nice 19 on 2 cores shared with other
# work (measured: 481 s and 1262 s for the 1-core rows beside heavy builds,
# 153-233 s for the 2- and 4-core rows beside a simulation; one Yosys at a
# time).
# Yosys's warnings go to ~/.cache/aesd-rtl/resources/<variant>/yosys.warnings.
# Exit status: 0 done; 1 a generation or synthesis failed; 2 bad usage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

core_list=1
json=""
while (($#)); do
  case "$1" in
    --cores)
      core_list="${2:-}"
      shift
      ;;
    --json)
      json="${2:?--json needs a file}"
      shift
      ;;
    -h | --help)
      sed -n '2,20s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "soc-resources.sh: unknown argument $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
IFS=, read -r -a counts <<<"$core_list"
for n in "${counts[@]}"; do
  [[ "$n" == 1 || "$n" == 2 || "$n" == 4 ]] || {
    echo "soc-resources.sh: --cores takes 1, 2 and 4, not '$n'" >&2
    exit 2
  }
done

apt_install yosys >&2
bash "$root/soc/setup.sh" --with-sim >/dev/null
venv="${AESD_SOC_VENV:-$root/soc/.venv}"
cluster="$("$root/soc/vexriscv/smp-cluster.sh")"
work="${AESD_RTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-rtl}/resources"
mkdir -p "$work"
rows="$work/rows.txt"
: >"$rows"
t0=$SECONDS

# synth NAME: Yosys on the generated SoC's Verilog (the files the Vivado
# script reads); prints "lut ff bram dsp lutram".
synth() {
  local dir="$work/$1" sources
  mapfile -t sources < <(sed -n 's/^read_verilog {\(.*\)}$/\1/p' "$dir/gateware/aesd_soc.tcl")
  ((${#sources[@]} > 1)) || {
    echo "soc-resources.sh: no Verilog sources in $dir/gateware/aesd_soc.tcl" >&2
    return 1
  }
  nice -n 19 yosys -q -l "$dir/yosys.log" -p "read_verilog -DSYNTHESIS ${sources[*]}; synth_xilinx -family xc7 -top aesd_soc; tee -q -o $dir/stat.txt stat" >/dev/null 2>"$dir/yosys.warnings" || {
    tail -n 20 "$dir/yosys.log" >&2
    return 1
  }
  awk '
    $1 ~ /^LUT[1-6]$/ { lut += $2 }
    $1 ~ /^FD[RSCP]E$/ || $1 ~ /^LD[CP]E$/ { ff += $2 }
    $1 == "RAMB36E1" { bram += $2 } $1 == "RAMB18E1" { bram += $2 / 2 }
    $1 ~ /^DSP48E1$/ { dsp += $2 }
    $1 ~ /^RAM(32|64|128|256)[XM]/ || $1 ~ /^RAM(32|64)X1[SD]$/ { lutram += $2 }
    END { printf "%d %d %.1f %d %d\n", lut, ff, bram, dsp, lutram }' "$dir/stat.txt"
}

printf '%5s %4s %8s %8s %6s %4s %7s %s\n' cores aes lut ff bram dsp lutram "(Yosys estimates, no P&R)"
for n in "${counts[@]}"; do
  for aes in 1 0; do
    name="arty-${n}c$( ((aes)) || echo -noaes)"
    flags=(--cpu-count "$n" --cpu-sources required --skip-dtb --output-dir "$work/$name")
    ((aes)) || flags+=(--no-aes-instruction)
    env PYTHONPATH="$cluster/pythondata" PATH="$cluster/bin:$PATH" nice -n 19 \
      "$venv/bin/python" "$root/soc/aesd_soc.py" "${flags[@]}" >"$work/$name.gen.log" 2>&1 || {
      tail -n 20 "$work/$name.gen.log" >&2
      echo "soc-resources.sh: soc/aesd_soc.py ${flags[*]} failed" >&2
      exit 1
    }
    start=$SECONDS
    read -r lut ff bram dsp lutram < <(synth "$name") || exit 1
    printf '%5s %4s %8s %8s %6s %4s %7s (%d s)\n' "$n" "$aes" "$lut" "$ff" "$bram" "$dsp" "$lutram" $((SECONDS - start))
    echo "$n $aes $lut $ff $bram $dsp $lutram" >>"$rows"
  done
done
cat <<'EOF'
Capacity: Arty A7-35T 20800 LUT, 41600 FF, 50 RAMB36, 90 DSP; A7-100T 63400 LUT, 126800 FF, 135 RAMB36, 240 DSP.
Published: VexRiscv "linux balanced" 2883 LUT / 2130 FF on Artix-7 (VexRiscv README); the AesPlugin about
90 LUT, 75 FF and a 2 KB ROM per core. Yosys counts are estimates before Vivado's optimisation and placement.
EOF
echo "wall time: $((SECONDS - t0)) s" >&2

if [[ -n "$json" ]]; then
  python3 - "$rows" "$json" <<'PY'
import json, sys
keys = ["cores", "aes", "lut", "ff", "bram", "dsp", "lutram"]
rows = []
for line in open(sys.argv[1]):
    v = line.split()
    row = dict(zip(keys, v))
    for k in ("cores", "lut", "ff", "dsp", "lutram"):
        row[k] = int(row[k])
    row["aes"] = row["aes"] == "1"
    row["bram"] = float(row["bram"])
    rows.append(row)
json.dump({"rows": rows, "tool": "yosys 0.23 synth_xilinx -family xc7",
           "note": "synthesis estimates without placement or timing; BIOS ROM empty (removed)"},
          open(sys.argv[2], "w"), indent=2)
PY
fi
