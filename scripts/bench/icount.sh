#!/usr/bin/env bash
# Counts the guest instructions aesd's cipher executes per byte on the boards'
# targets, under qemu-user with a TCG plugin (scripts/bench/icount.c), and
# projects the VexRiscv's throughput at 100 MHz from the riscv32imac figure.
#
# For each target it builds the `cost` bench of aesd-bench (the boards'
# profile), checks its workloads' output under qemu, then runs each workload
# at N and at 0 (the baseline: same start-up and set-up, no per-byte work):
#   encrypt N, decrypt N   instructions/byte = (count(N) - count(0)) / N
#   job N                  a whole framed encryption job, the same way; its
#                          count(0) is the fixed cost of a job (mostly PBKDF2)
#   pbkdf2 ITER            one key + IV derivation; per iteration and per job
# and, on riscv32imac, OpenSSL's AES-256-CBC C code (scripts/bench/openssl-cbc.c,
# T-table AES as OpenSSL's generic 32-bit build runs it on the VexRiscv) the
# same way, to compare per byte with aesd and to calibrate the projection with
# the study's measurement of openssl on the board (about 830 kB/s at 100 MHz).
# Every count at N is taken twice and must be equal (the workloads are
# single-threaded and the count deterministic); a difference fails the run.
# Installs what it needs, idempotently: gcc, jq, qemu-user (Debian; the
# dynamic qemu-<arch>, which loads plugins), the cross toolchain
# (scripts/cross/setup.sh), and perl and make for OpenSSL's Configure.
#
# Usage: scripts/bench/icount.sh [OPTIONS] [TARGET...]
#   TARGET...       default: riscv32imac-unknown-linux-musl riscv64gc-unknown-linux-musl
#                   aarch64-unknown-linux-musl (aarch64 built with the software AES
#                   the Raspberry Pi 4 runs: its Cortex-A72 has no AES instructions)
#   --quick         CI: riscv32imac only (unless TARGETs are given), encrypt only,
#                   plus the output check and the determinism check; no OpenSSL
#   --no-openssl    skip the OpenSSL comparison (it fetches the openssl-src crate
#                   with cargo the first time, into the cache below)
#   --size BYTES    N of the per-byte workloads (default 1048576)
#   --iter N        PBKDF2 iterations of the pbkdf2 and job workloads (default 10000)
#   --chunk BYTES   chunk / data frame size (default 65536, the server's)
#   --cpi LIST      cycles per instruction for the 100 MHz projection (default 1,1.5)
#   --profile P     cargo profile (default: board, as scripts/cross/build-all.sh)
#   --opt-level L   override the profile's opt-level (0-3, s, z): short for
#                   --config profile.P.opt-level=L
#   --config K=V    extra cargo --config setting of the build (repeatable), e.g.
#                   profile.board.package.aes.opt-level=3; such builds go to
#                   target/bench-cfg-<settings>, so the normal build is left alone
#   --no-build      use the executables of the last build (the paths it recorded)
#   -h, --help      this help
# Env: AESD_BENCH_CACHE (plugin, OpenSSL sources; default ~/.cache/aesd-bench), AESD_JOBS
#   (cargo -j, default 2), CARGO_TARGET_DIR.
# Exit status: 0 done; 1 a build, check or workload failed, or a count was not
#   reproducible; 2 bad usage.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
# shellcheck source=scripts/cross/env.sh
. "$root/scripts/cross/env.sh"
# shellcheck source=scripts/bench/lib.sh
. "$here/lib.sh"

usage() { sed -n '2,47s/^# \{0,1\}//p' "$0"; }
die_usage() {
  echo "icount.sh: $* (try --help)" >&2
  exit 2
}

quick=0
openssl=1
size=1048576
iter=10000
chunk=65536
cpis="1,1.5"
profile=""
opt_level=""
configs=()
build=1
targets=()
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --size | --iter | --chunk | --cpi | --profile | --opt-level | --config)
      (($# >= 2)) || die_usage "$1 needs a value"
      case "$1" in
        --size) size="$2" ;;
        --iter) iter="$2" ;;
        --chunk) chunk="$2" ;;
        --cpi) cpis="$2" ;;
        --profile) profile="$2" ;;
        --opt-level) opt_level="$2" ;;
        --config) configs+=("$2") ;;
      esac
      shift
      ;;
    --no-build) build=0 ;;
    --no-openssl) openssl=0 ;;
    -h | --help)
      usage
      exit 0
      ;;
    -*) die_usage "unknown option $1" ;;
    *) targets+=("$1") ;;
  esac
  shift
done
[[ "$size" =~ ^[1-9][0-9]*$ ]] || die_usage "--size must be a positive number of bytes"
[[ "$iter" =~ ^[1-9][0-9]*$ ]] || die_usage "--iter must be a positive number"
[[ "$chunk" =~ ^[1-9][0-9]*$ ]] || die_usage "--chunk must be a positive number of bytes"
[[ "$cpis" =~ ^[0-9]*\.?[0-9]+(,[0-9]*\.?[0-9]+)*$ ]] || die_usage "--cpi takes numbers separated by commas"
awk -v list="$cpis" 'BEGIN { n = split(list, c, ","); for (i = 1; i <= n; i++) if (c[i] + 0 <= 0) exit 1 }' ||
  die_usage "--cpi values must be positive"
[[ -z "$opt_level" || "$opt_level" =~ ^([0-3]|s|z)$ ]] || die_usage "--opt-level is 0-3, s or z"
((size % 16 == 0)) || die_usage "--size must be a multiple of 16 (decrypt works on whole blocks)"
((chunk % 16 == 0 && chunk <= 1048576)) || die_usage "--chunk must be a multiple of 16 up to 1048576"
if ((quick)); then openssl=0; fi
if ((${#targets[@]} == 0)); then
  if ((quick)); then targets=(riscv32imac-unknown-linux-musl); else targets=("${AESD_TARGETS[@]}"); fi
fi
for t in "${targets[@]}"; do
  case "$t" in
    riscv32imac-unknown-linux-musl | riscv64gc-unknown-linux-musl | aarch64-unknown-linux-musl) ;;
    *) die_usage "unknown target $t (one of ${AESD_TARGETS[*]})" ;;
  esac
done
if [[ -z "$profile" ]]; then profile="$(aesd_default_profile "$root")"; fi
if [[ -n "$opt_level" ]]; then
  if [[ "$opt_level" =~ ^[0-3]$ ]]; then
    configs=("profile.$profile.opt-level=$opt_level" "${configs[@]}")
  else
    configs=("profile.$profile.opt-level=\"$opt_level\"" "${configs[@]}")
  fi
fi
for c in "${configs[@]}"; do
  [[ "$c" == *=* ]] || die_usage "--config takes KEY=VALUE, not $c"
done
bench_extra_config=("${configs[@]}")

# --- prerequisites (idempotent) ------------------------------------------------
apt_install gcc jq qemu-user
if ((build)); then bash "$root/scripts/cross/setup.sh" >&2; fi

# --- the plugin: built once per version of icount.c, outside the repository -----
plugin="$(icount_plugin)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Blocks of guest code that start at least this often are the hot code (the
# per-block loops of an N = 1 MiB run start tens of thousands of times, the
# per-chunk code 16 times).
hot_runs=1000

# Prints "INSTRUCTIONS HOT_BYTES" for one run of BIN with ARGS under TARGET's
# qemu: guest instructions executed, and bytes of guest code in blocks that
# started at least $hot_runs times (the plugin's hot=).
count() {
  local target="$1" bin="$2"
  shift 2
  local out="$work/count"
  rm -f "$out"
  # The guest gets an empty environment (qemu-user would hand it this
  # script's, and its size shifts start-up counts by a few instructions).
  if ! env -i PATH="$PATH" \
    AESD_QEMU_EXTRA="-plugin $plugin,out=$out,hot=$hot_runs -U AESD_QEMU_EXTRA -U PATH" \
    "$root/scripts/cross/qemu-run.sh" "$target" "$bin" "$@" >"$work/stdout" 2>"$work/stderr"; then
    echo "icount.sh: $target: ${bin##*/} $* failed:" >&2
    cat "$work/stderr" >&2
    if grep -qi plugin "$work/stderr"; then
      echo "icount.sh: qemu could not load the plugin: use Debian's dynamic qemu-user (qemu-riscv32), not qemu-user-static" >&2
    fi
    exit 1
  fi
  if [[ ! -s "$out" ]]; then
    echo "icount.sh: $target: the plugin wrote no count for cost $*" >&2
    exit 1
  fi
  tr '\n' ' ' <"$out" | awk '{ print $1, $2 }'
}

# --- OpenSSL's AES-256-CBC C code for riscv32imac --------------------------------
# Sources: the openssl-src crate (a pinned OpenSSL release), fetched with cargo
# into the cache and configured as OpenSSL's generic 32-bit build without
# assembly (what a VexRiscv runs: OpenSSL's riscv32 AES assembly needs the
# Zkn scalar-cryptography extension, which rv32imac lacks).
# Only the four headers the AES files need are generated; the driver
# scripts/bench/openssl-cbc.c is linked with aes_core.c (T-table AES),
# aes_cbc.c and modes/cbc128.c, the code EVP's aes-256-cbc runs there.
OPENSSL_SRC_CRATE="300.6.1+3.6.3" # crate version + OpenSSL version
openssl_cbc_build() {
  local src="$AESD_BENCH_CACHE/openssl-src-$OPENSSL_SRC_CRATE"
  if [[ ! -f "$src/.ready" ]]; then
    apt_install perl make
    local fetch="$AESD_BENCH_CACHE/openssl-fetch"
    step "cargo fetch openssl-src $OPENSSL_SRC_CRATE (OpenSSL's sources, into $AESD_BENCH_CACHE)"
    mkdir -p "$fetch/src"
    : >"$fetch/src/lib.rs"
    printf '%s\n' '[package]' 'name = "aesd-bench-openssl-sources"' 'version = "0.0.0"' \
      'edition = "2021"' 'publish = false' '' '[dependencies]' \
      "openssl-src = \"=$OPENSSL_SRC_CRATE\"" '' '[workspace]' >"$fetch/Cargo.toml"
    (cd "$fetch" && cargo "+$AESD_NIGHTLY" fetch --quiet) >&2
    local crate
    crate="$(find "${CARGO_HOME:-$HOME/.cargo}/registry/cache" -name "openssl-src-$OPENSSL_SRC_CRATE.crate" | head -n 1)"
    if [[ -z "$crate" ]]; then
      echo "icount.sh: cargo fetched no openssl-src-$OPENSSL_SRC_CRATE.crate" >&2
      exit 1
    fi
    rm -rf "$src.tmp"
    mkdir -p "$src.tmp"
    tar -xzf "$crate" -C "$src.tmp" --strip-components=2 "openssl-src-$OPENSSL_SRC_CRATE/openssl"
    step "OpenSSL: Configure linux-generic32 no-asm, generate the AES files' headers"
    (cd "$src.tmp" &&
      perl Configure linux-generic32 no-asm no-shared no-threads no-tests no-docs no-apps \
        no-module no-dso no-engine no-async >/dev/null &&
      make include/openssl/configuration.h include/openssl/opensslv.h \
        include/openssl/crypto.h include/openssl/safestack.h >/dev/null) >&2
    rm -rf "$src"
    mv "$src.tmp" "$src"
    touch "$src/.ready"
  fi
  local hash exe
  hash="$(sha256sum "$here/openssl-cbc.c" | cut -c1-16)"
  exe="$AESD_BENCH_CACHE/openssl-cbc-riscv32imac-$OPENSSL_SRC_CRATE-$hash"
  if [[ ! -x "$exe" ]]; then
    step "zig cc -O3 (OpenSSL's default): $exe"
    "$root/scripts/cross/cc/riscv32imac-unknown-linux-musl.sh" -O3 -static -Wall \
      -Wno-deprecated-declarations -I"$src/include" -I"$src" -o "$exe.tmp" \
      "$here/openssl-cbc.c" "$src/crypto/aes/aes_core.c" "$src/crypto/aes/aes_cbc.c" \
      "$src/crypto/modes/cbc128.c" >&2
    mv "$exe.tmp" "$exe"
  fi
  echo "$exe"
}

# The cost executable of each target.
declare -A cost_bin
record="$AESD_BENCH_CACHE/icount-bins-$(printf '%s|' "$profile" "${configs[@]}" | sha256sum | cut -c1-16)"
for t in "${targets[@]}"; do
  if ((build)); then
    built="$(bench_build "$t" "$profile" cost)"
    cost_bin[$t]="$(awk '$1 == "cost" { print $2 }' <<<"$built")"
    mkdir -p "$AESD_BENCH_CACHE"
    printf '%s\n' "${cost_bin[$t]}" >"$record-$t"
  else
    [[ -f "$record-$t" ]] || {
      echo "icount.sh: no recorded build for $t; run without --no-build" >&2
      exit 1
    }
    cost_bin[$t]="$(cat "$record-$t")"
  fi
  [[ -x "${cost_bin[$t]}" ]] || {
    echo "icount.sh: $t: no cost executable (${cost_bin[$t]:-none})" >&2
    exit 1
  }
done

if ((quick)); then
  workloads=("encrypt $size")
else
  workloads=("encrypt $size" "decrypt $size" "job $size" "pbkdf2 $iter")
fi

# Counts workload NAME of TARGET: BIN ARG0 0 REST once, BIN ARG0 N REST twice
# (the two must agree); appends "TARGET NAME N count(0) count(N) hot(N)" to
# rows.
# Usage: measure TARGET NAME BIN ARG0 N REST...
rows=()
measure() {
  local t="$1" name="$2" exe="$3" arg0="$4" n="$5"
  shift 5
  local base first second
  step "$t: $name: ${exe##*/} $arg0 0 / $n${*:+ $*} (twice)"
  base="$(count "$t" "$exe" "$arg0" 0 "$@")"
  first="$(count "$t" "$exe" "$arg0" "$n" "$@")"
  second="$(count "$t" "$exe" "$arg0" "$n" "$@")"
  if [[ "$first" != "$second" ]]; then
    echo "icount.sh: $t: $name $n is not deterministic: $first then $second (instructions, hot bytes)" >&2
    exit 1
  fi
  printf '%s: %s: 0 -> %s, %s -> %s instructions (twice), hot code %s bytes\n' \
    "$t" "$name" "${base% *}" "$n" "${first% *}" "${first#* }" >&2
  rows+=("$t $name $n ${base% *} $first")
}

start=$SECONDS
for t in "${targets[@]}"; do
  step "$t: cost check under qemu"
  "$root/scripts/cross/qemu-run.sh" "$t" "${cost_bin[$t]}" check >"$work/check" ||
    {
      cat "$work/check" >&2
      echo "icount.sh: $t: the cost self-check failed" >&2
      exit 1
    }
  tail -n 1 "$work/check" >&2
  for w in "${workloads[@]}"; do
    read -r name n <<<"$w"
    extra=(--chunk "$chunk")
    case "$name" in
      job) extra+=(--iter "$iter") ;;
      pbkdf2) extra=() ;;
    esac
    measure "$t" "$name" "${cost_bin[$t]}" "$name" "$n" "${extra[@]}"
  done
  if [[ "$t" == riscv32imac-* ]] && ((openssl)); then
    exe="$(openssl_cbc_build)"
    measure "$t" openssl-encrypt "$exe" encrypt "$size"
    measure "$t" openssl-decrypt "$exe" decrypt "$size"
  fi
done
elapsed=$((SECONDS - start))

# --- the table --------------------------------------------------------------
version="$(qemu-riscv32 --version | head -n 1)"
printf '\nGuest instructions counted under qemu-user (%s) with scripts/bench/icount.c;\n' "$version"
printf 'profile %s%s; chunk %s B; each count at N taken twice (identical).\n' \
  "$profile" "${configs[*]:+ with --config ${configs[*]}}" "$chunk"
printf 'Hot code: bytes of guest code in blocks started at least %s times in the run at N\n' "$hot_runs"
printf '(the per-block loops; for job and pbkdf2 it includes SHA-256, which PBKDF2 runs 20 000 times).\n\n'
printf '| target | workload | N | count(0) | count(N) | per unit | hot code |\n'
printf '| --- | --- | ---: | ---: | ---: | ---: | ---: |\n'
for row in "${rows[@]}"; do
  read -r t name n base first hot <<<"$row"
  awk -v t="$t" -v name="$name" -v n="$n" -v base="$base" -v first="$first" -v hot="$hot" 'BEGIN {
    per = (first - base) / n
    if (name == "pbkdf2") unit = sprintf("%.0f instr/iteration; %.1f M instr/job", per, (first - base) / 1e6)
    else if (name == "job") unit = sprintf("%.1f instr/byte; %.1f M instr fixed", per, base / 1e6)
    else unit = sprintf("%.1f instr/byte", per)
    printf "| %s | %s | %d | %d | %d | %s | %d B |\n", t, name, n, base, first, unit, hot
  }'
done

# --- projection for the VexRiscv (riscv32imac at 100 MHz) -------------------------
# The study measured openssl's AES-256-CBC on the board at about 830 kB/s at
# 100 MHz, i.e. 100e6 / 830e3 = 120.5 cycles per byte.
study_cycles_per_byte="$(awk 'BEGIN { printf "%.1f", 100e6 / 830e3 }')"
per_byte() { # NAME: instructions per byte of that riscv32imac workload, if measured
  local row t name n base first _hot
  for row in "${rows[@]}"; do
    read -r t name n base first _hot <<<"$row"
    if [[ "$t" == riscv32imac-* && "$name" == "$1" ]]; then
      awk -v n="$n" -v base="$base" -v first="$first" 'BEGIN { printf "%.1f", (first - base) / n }'
      return
    fi
  done
}
openssl_per_byte="$(per_byte openssl-encrypt)"
openssl_cpi=""
if [[ -n "$openssl_per_byte" ]]; then
  openssl_cpi="$(awk -v c="$study_cycles_per_byte" -v i="$openssl_per_byte" 'BEGIN { printf "%.2f", c / i }')"
  printf '\nOpenSSL %s (openssl-src crate %s), generic 32-bit C build (no-asm, T-table AES), zig cc -O3,\n' \
    "${OPENSSL_SRC_CRATE#*+}" "${OPENSSL_SRC_CRATE%+*}"
  printf 'on riscv32imac: %s instr/byte encrypting, %s decrypting. Instructions per byte, aesd / OpenSSL:\n' \
    "$openssl_per_byte" "$(per_byte openssl-decrypt)"
  for pair in encrypt:openssl-encrypt decrypt:openssl-decrypt job:openssl-encrypt; do
    ours="$(per_byte "${pair%%:*}")"
    theirs="$(per_byte "${pair#*:}")"
    [[ -n "$ours" && -n "$theirs" ]] || continue
    awk -v a="${pair%%:*}" -v b="${pair#*:}" -v x="$ours" -v y="$theirs" \
      'BEGIN { printf "  aesd %s / %s: %.2f\n", a, b, x / y }'
  done
  printf 'The study measured openssl at about 830 kB/s at 100 MHz = %s cycles/byte: with %s instr/byte\n' \
    "$study_cycles_per_byte" "$openssl_per_byte"
  printf 'that is an effective CPI of %s for OpenSSL'"'"'s table-driven code on the VexRiscv (cache misses included).\n' \
    "$openssl_cpi"
fi
if [[ -n "$(per_byte encrypt)$(per_byte decrypt)$(per_byte job)" ]]; then
  printf '\nPROJECTION (not a measurement): VexRiscv rv32imac at 100 MHz, one core,\n'
  printf 'MB/s = 100e6 / (instr/byte x CPI) / 1e6 for an assumed CPI (cycles per instruction)%s.\n\n' \
    "${openssl_cpi:+; the last column assumes the CPI calibrated on OpenSSL, $openssl_cpi}"
  IFS=, read -r -a cpi_list <<<"$cpis"
  if [[ -n "$openssl_cpi" ]]; then cpi_list+=("$openssl_cpi"); fi
  printf '| workload | instr/byte |'
  for c in "${cpi_list[@]}"; do printf ' MB/s at CPI %s |' "$c"; done
  printf '\n| --- | ---: |'
  for _ in "${cpi_list[@]}"; do printf ' ---: |'; done
  printf '\n'
  for name in encrypt decrypt job openssl-encrypt openssl-decrypt; do
    per="$(per_byte "$name")"
    [[ -n "$per" ]] || continue
    printf '| %s | %s |' "$name" "$per"
    for c in "${cpi_list[@]}"; do
      awk -v per="$per" -v c="$c" 'BEGIN { printf " %.3f |", 100 / (per * c) }'
    done
    printf '\n'
  done
fi
printf '\n(%d s from the first check to the last count)\n' "$elapsed"
