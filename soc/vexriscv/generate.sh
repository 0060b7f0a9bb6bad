#!/usr/bin/env bash
# Generates the Verilog of a VexRiscv "imac" core with VexRiscv's AesPlugin
# (the configuration of LiteX's VexRiscv_IMAC.v plus the plugin, ROM inlined)
# from the VexRiscv sources inside the pythondata-cpu-vexriscv wheel, without
# sbt: Maven resolves SpinalHDL 1.7.1 and the Scala 2.11 compiler (pom.xml),
# scalac compiles the wheel's VexRiscv sources and GenImacAes.scala, and the
# generator writes the netlist. Prints the netlist's path on stdout.
#
# Usage: soc/vexriscv/generate.sh [--no-aes] [--force]
#   --no-aes   the same core without the plugin (to compare with the wheel's
#              VexRiscv_IMAC.v)
#   --force    generate again even if the cache has it
# The result is cached by a hash of its inputs (the wheel's VexRiscv sources,
# pom.xml, GenImacAes.scala, the JDK's version) under
# ${AESD_RTL_CACHE:-~/.cache/aesd-rtl}/vexriscv-<hash>/: about 25-100 s to
# compile the first time (one core), about 1 s to generate, about 110 MB of
# Maven and class files. Nothing generated is committed.
# Prerequisites, installed by the script (idempotent): a JDK and Maven (apt),
# the wheel (soc/setup.sh --with-sim; AESD_SOC_VENV picks the venv).
# Exit status: 0 done; 1 a step failed (its log is printed); 2 bad usage.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

aes=1
force=0
for arg in "$@"; do
  case "$arg" in
    --no-aes) aes=0 ;;
    --force) force=1 ;;
    -h | --help)
      sed -n '2,20s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "generate.sh: unknown option $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

who=generate.sh
# shellcheck source=soc/vexriscv/spinal.sh
. "$here/spinal.sh"
spinal_sources
plugin_source="$sources/vexriscv/plugin/AesPlugin.scala"
[[ -f "$plugin_source" ]] || {
  echo "generate.sh: no AesPlugin.scala in $sources" >&2
  exit 1
}

key="$(spinal_cache_key "generate v1" "$here/GenImacAes.scala")"
cache="${AESD_RTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-rtl}/vexriscv-$key"
name=VexRiscv_IMAC_Aes.v
((aes)) || name=VexRiscv_IMAC_NoAes.v
netlist="$cache/$name"
if ((!force)) && [[ -s "$netlist" ]]; then
  echo "$netlist"
  exit 0
fi

mkdir -p "$cache"
start=$SECONDS
spinal_compiler "$cache" "$cache/generate.log"
spinal_vexriscv_classes "$cache"
step "scalac: GenImacAes.scala; generating $name" >&2
scalac "$cache/generator-classes" "$cache/vexriscv-classes" "$here/GenImacAes.scala"
gen_args=("$netlist.tmp.v")
((aes)) || gen_args+=(--no-aes)
run_logged java -Xss16m -cp "$classpath:$cache/vexriscv-classes:$cache/generator-classes" \
  aesd.GenImacAes "${gen_args[@]}"
grep -q '^module VexRiscv (' "$netlist.tmp.v" || {
  echo "generate.sh: $netlist.tmp.v has no VexRiscv module" >&2
  exit 1
}
if ((aes)) && ! grep -q 'AesPlugin' "$netlist.tmp.v"; then
  echo "generate.sh: $netlist.tmp.v has no AesPlugin logic" >&2
  exit 1
fi
mv "$netlist.tmp.v" "$netlist"
echo "generated $netlist in $((SECONDS - start)) s (cache: $(du -sh "$cache" | cut -f1))" >&2
echo "$netlist"
