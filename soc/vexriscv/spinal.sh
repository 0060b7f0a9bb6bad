#!/usr/bin/env bash
# Shared by soc/vexriscv/generate.sh and smp-cluster.sh (sourced, not run):
# the VexRiscv sources inside the pythondata-cpu-vexriscv wheel, and Scala
# 2.11 with SpinalHDL's plugin compiled without sbt (Maven resolves
# SpinalHDL 1.7.1 and the compiler: pom.xml). The caller sets `here` (this
# folder), `root` (the repository) and `who` (its name, for messages), and
# has sourced scripts/lib.sh.

# spinal_sources: installs a JDK, Maven and the wheel when missing; sets
# `sources` (the wheel's VexRiscv Scala folder) and `scala_files` (every
# .scala below it, sorted).
spinal_sources() {
  apt_install default-jdk-headless maven >&2
  local venv="${AESD_SOC_VENV:-$root/soc/.venv}" wheel
  if ! "$venv/bin/python" -c 'import pythondata_cpu_vexriscv' 2>/dev/null; then
    bash "$root/soc/setup.sh" --with-sim >&2
  fi
  wheel="$("$venv/bin/python" -c 'import pythondata_cpu_vexriscv as p; print(p.data_location)')"
  sources="$wheel/ext/VexRiscv/src/main/scala"
  mapfile -t scala_files < <(find "$sources" -name '*.scala' | LC_ALL=C sort)
}

# spinal_cache_key LABEL GENERATOR: a hash of LABEL, the wheel's sources,
# pom.xml, GENERATOR (our Scala file) and the JDK's version.
spinal_cache_key() {
  {
    echo "$1"
    cat "${scala_files[@]}" "${here:?}/pom.xml" "$2"
    java -version 2>&1
  } | sha256sum | cut -c1-16
}

# spinal_compiler CACHE LOG: defines run_logged (runs a command with its
# output appended to LOG; on failure prints LOG's end and exits 1) and sets
# `classpath` and `idsl_plugin`, resolving them with Maven the first time
# (into CACHE/classpath).
spinal_compiler() {
  local cache=$1
  spinal_log=$2
  : >"$spinal_log"
  if [[ ! -s "$cache/classpath" ]]; then
    step "Maven: SpinalHDL 1.7.1 and the Scala 2.11 compiler (classpath)" >&2
    run_logged mvn -q -B -f "${here:?}/pom.xml" dependency:build-classpath \
      -Dmdep.outputFile="$cache/classpath.tmp"
    mv "$cache/classpath.tmp" "$cache/classpath"
  fi
  classpath="$(cat "$cache/classpath")"
  idsl_plugin="$(tr ':' '\n' <"$cache/classpath" | grep '/spinalhdl-idsl-plugin_2.11-')"
}

# run_logged CMD...: CMD with its output appended to the log of
# spinal_compiler; on failure the log's end is printed and the script exits 1.
run_logged() {
  "$@" >>"$spinal_log" 2>&1 || {
    tail -n 30 "$spinal_log" >&2
    echo "${who:?}: failed: $* (log: $spinal_log)" >&2
    exit 1
  }
}

# scalac OUT_DIR EXTRA_CLASSPATH FILE...: Scala 2.11 with SpinalHDL's plugin
# (at nice 10: the caller's other work, or another build, comes first).
scalac() {
  local out=$1 extra=$2
  shift 2
  rm -rf "$out"
  mkdir -p "$out"
  run_logged nice -n 10 java -Xss16m -cp "$classpath" scala.tools.nsc.Main \
    -classpath "$classpath${extra:+:$extra}" "-Xplugin:$idsl_plugin" -nowarn -d "$out" "$@"
}

# spinal_vexriscv_classes CACHE: the wheel's VexRiscv sources compiled into
# CACHE/vexriscv-classes, once (marked done).
spinal_vexriscv_classes() {
  local cache=$1
  [[ -f "$cache/vexriscv-classes/done" ]] && return 0
  step "scalac: the wheel's ${#scala_files[@]} VexRiscv sources (about 25-120 s)" >&2
  scalac "$cache/vexriscv-classes" "" "${scala_files[@]}"
  touch "$cache/vexriscv-classes/done"
}
