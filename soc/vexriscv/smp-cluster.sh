#!/usr/bin/env bash
# Prepares what LiteX 2024.12 needs to build a VexRiscv-SMP cluster
# (`--cpu-type vexriscv_smp`) without sbt and without the
# pythondata-cpu-vexriscv_smp package (not on PyPI): a stand-in package
# folder, pythondata_cpu_vexriscv_smp, whose data folder holds the RAM model
# (Ram_1w_1rs_Generic.v, ours) and receives the generated netlists, and an
# `sbt` on PATH (soc/vexriscv/sbt) that runs our cluster generator
# (GenSmpCluster.scala, compiled with the wheel's VexRiscv sources) when
# LiteX asks for a cluster it does not find. Prints the cache folder; use
#   PYTHONPATH=CACHE/pythondata PATH=CACHE/bin:$PATH litex_sim ...
#
# Usage: soc/vexriscv/smp-cluster.sh [--force]
#   --force   compile the generator again even if the cache has it
# Cache: ${AESD_RTL_CACHE:-~/.cache/aesd-rtl}/vexriscv-smp-<hash of the
# wheel's sources, pom.xml, GenSmpCluster.scala and the JDK>/: about 2 min of
# scalac the first time, about 25 MB (Maven's ~/.m2 holds SpinalHDL); each
# cluster netlist then takes about 15 s and stays there (pythondata/pythondata_cpu_vexriscv_smp/verilog/).
# Nothing generated is committed.
# Exit status: 0 ready; 1 a step failed (its log is printed); 2 bad usage.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h | --help)
      sed -n '2,19s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "smp-cluster.sh: unknown option $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

who=smp-cluster.sh
# shellcheck source=soc/vexriscv/spinal.sh
. "$here/spinal.sh"
spinal_sources
[[ -f "$sources/vexriscv/demo/smp/VexRiscvSmpLitexCluster.scala" ]] || {
  echo "smp-cluster.sh: no VexRiscvSmpLitexCluster.scala in $sources" >&2
  exit 1
}

key="$(spinal_cache_key "smp-cluster v1" "$here/GenSmpCluster.scala")"
cache="${AESD_RTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-rtl}/vexriscv-smp-$key"
data="$cache/pythondata/pythondata_cpu_vexriscv_smp/verilog"

# The stand-in package and the sbt shim (cheap: refreshed every run).
standin() {
  mkdir -p "$data/ext/VexRiscv" "$cache/bin"
  cat >"$cache/pythondata/pythondata_cpu_vexriscv_smp/__init__.py" <<PY
"""Stand-in for pythondata-cpu-vexriscv_smp (soc/vexriscv/smp-cluster.sh)."""
import os.path
data_location = os.path.join(os.path.dirname(__file__), "verilog")
PY
  cp "$here/Ram_1w_1rs_Generic.v" "$data/Ram_1w_1rs_Generic.v"
  ln -sf "$here/sbt" "$cache/bin/sbt"
}

if ((!force)) && [[ -f "$cache/generator-classes/done" ]]; then
  standin
  echo "$cache"
  exit 0
fi

mkdir -p "$cache"
start=$SECONDS
spinal_compiler "$cache" "$cache/compile.log"
spinal_vexriscv_classes "$cache"
step "scalac: GenSmpCluster.scala" >&2
scalac "$cache/generator-classes" "$cache/vexriscv-classes" "$here/GenSmpCluster.scala"
touch "$cache/generator-classes/done"
standin
echo "compiled in $((SECONDS - start)) s (cache: $(du -sh "$cache" | cut -f1))" >&2
echo "$cache"
