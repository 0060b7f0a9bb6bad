#!/usr/bin/env bash
# Builds aesd's bench executables (criterion `throughput`, and `cost` for
# scripts/bench/icount.sh) for the boards' targets with the boards' profile,
# copies them to stable names (to copy to a board: they are static and need
# no cargo there), and runs `throughput` under qemu-user with the board's CPU
# model (scripts/cross/qemu-run.sh), short criterion settings by default.
# Prints one table of the results, labelled EMULATED: qemu translates every
# guest instruction on this machine, so these are not board figures; they
# compare aesd with itself across changes and targets.
#
# aarch64 is built with the software AES and SHA-256 that the Raspberry Pi 4
# runs (its Cortex-A72 has no cryptography extension; qemu's model has one).
#
# Usage: scripts/bench/cross.sh [OPTIONS] [TARGET...]
#   TARGET...       default: riscv32imac-unknown-linux-musl riscv64gc-unknown-linux-musl
#                   aarch64-unknown-linux-musl
#   --filter REGEX  criterion filter (default: encrypt and decrypt of 1 KiB and
#                   64 KiB chunks, PBKDF2, the 64 KiB frame codec, one loopback job)
#   --all           every bench (same as --filter '.')
#   --full          criterion's settings of the bench (1 s warm-up, 3 s measurement,
#                   full statistics) instead of --quick with 0.5 s / 1 s
#   --build-only    build and copy the executables, run nothing
#   --no-build      run the executables copied by the last build
#   --profile P     cargo profile (default: board, as scripts/cross/build-all.sh)
#   -h, --help      this help
# The executables are copied to target/bench/<target>/{throughput,cost}
# (under CARGO_TARGET_DIR when set).
# Env: AESD_JOBS (cargo -j, default 2), CARGO_TARGET_DIR.
# Exit status: 0 done; 1 a build or bench failed; 2 bad usage.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
# shellcheck source=scripts/cross/env.sh
. "$root/scripts/cross/env.sh"
# shellcheck source=scripts/bench/lib.sh
. "$here/lib.sh"

usage() { sed -n '2,30s/^# \{0,1\}//p' "$0"; }
die_usage() {
  echo "cross.sh: $* (try --help)" >&2
  exit 2
}

filter='^(aes256cbc_(en|de)crypt/(1024|65536)|pbkdf2_sha256/10000|frame_data_64KiB/(encode|decode)|loopback_encrypt_1MiB/1)$'
full=0
build=1
run=1
profile=""
targets=()
while (($#)); do
  case "$1" in
    --filter)
      (($# >= 2)) || die_usage "--filter needs a value"
      filter="$2"
      shift
      ;;
    --all) filter='.' ;;
    --full) full=1 ;;
    --build-only) run=0 ;;
    --no-build) build=0 ;;
    --profile)
      (($# >= 2)) || die_usage "--profile needs a value"
      profile="$2"
      shift
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    -*) die_usage "unknown option $1" ;;
    *) targets+=("$1") ;;
  esac
  shift
done
((build || run)) || die_usage "--build-only and --no-build together do nothing"
if ((${#targets[@]} == 0)); then targets=("${AESD_TARGETS[@]}"); fi
for t in "${targets[@]}"; do
  case "$t" in
    riscv32imac-unknown-linux-musl | riscv64gc-unknown-linux-musl | aarch64-unknown-linux-musl) ;;
    *) die_usage "unknown target $t (one of ${AESD_TARGETS[*]})" ;;
  esac
done
if [[ -z "$profile" ]]; then profile="$(aesd_default_profile "$root")"; fi
out_base="${CARGO_TARGET_DIR:-$root/target}/bench"

apt_install jq qemu-user
if ((build)); then bash "$root/scripts/cross/setup.sh" >&2; fi

declare -A secs
for t in "${targets[@]}"; do
  dir="$out_base/$t"
  if ((build)); then
    start=$SECONDS
    built="$(bench_build "$t" "$profile" throughput cost)"
    mkdir -p "$dir"
    for name in throughput cost; do
      src="$(awk -v name="$name" '$1 == name { print $2 }' <<<"$built")"
      [[ -n "$src" && -x "$src" ]] || {
        echo "cross.sh: $t: cargo built no $name executable" >&2
        exit 1
      }
      cp "$src" "$dir/$name.tmp"
      mv "$dir/$name.tmp" "$dir/$name"
    done
    printf '%s\n' "$profile" >"$dir/profile"
    secs[$t]=$((SECONDS - start))
  fi
  [[ -x "$dir/throughput" ]] || {
    echo "cross.sh: $t: no $dir/throughput; run without --no-build" >&2
    exit 1
  }
done

if ((!run)); then
  printf '\nBench executables (profile %s), static; copy them to a board and run them there:\n\n' "$profile"
  for t in "${targets[@]}"; do
    for name in throughput cost; do
      printf '  %-70s %9d bytes\n' "$out_base/$t/$name" "$(stat -c %s "$out_base/$t/$name")"
    done
  done
  exit 0
fi

if ((full)); then
  criterion_args=(--bench)
  settings="the bench's criterion settings: 1 s warm-up, 3 s measurement"
else
  criterion_args=(--bench --quick --warm-up-time 0.5 --measurement-time 1)
  settings="criterion --quick, 0.5 s warm-up, 1 s measurement"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rows=()
declare -A run_secs
for t in "${targets[@]}"; do
  home="$work/$t"
  mkdir -p "$home"
  step "$t: throughput ${criterion_args[*]} '$filter' under qemu (emulated)"
  start=$SECONDS
  # Run from the results directory: criterion writes there, not into target/.
  (cd "$home" && CRITERION_HOME="$home" \
    "$root/scripts/cross/qemu-run.sh" "$t" "$out_base/$t/throughput" "${criterion_args[@]}" "$filter") >&2
  run_secs[$t]=$((SECONDS - start))
  while IFS= read -r estimates; do
    id="${estimates#"$home"/}"
    id="${id%/new/estimates.json}"
    rows+=("$t $id $(jq -r '.mean.point_estimate' "$estimates") $(jq -r '.throughput // {} | to_entries | .[0] // {key: "none", value: 0} | "\(.key) \(.value)"' "${estimates%estimates.json}benchmark.json")")
  done < <(find "$home" -path '*/new/estimates.json' | sort)
done

printf '\nEMULATED: aesd-bench throughput bench (profile %s) under qemu-user %s on this machine\n' \
  "$profile" "$(qemu-riscv32 --version | head -n 1 | awk '{ print $3 }')"
printf '(%s; %s). Not board figures.\n\n' "$(uname -m)" "$settings"
printf '| target | bench | time / iteration | throughput (emulated) |\n'
printf '| --- | --- | ---: | ---: |\n'
for row in "${rows[@]}"; do
  read -r t id ns unit amount <<<"$row"
  awk -v t="$t" -v id="$id" -v ns="$ns" -v unit="$unit" -v amount="$amount" 'BEGIN {
    if (ns >= 1e9) time = sprintf("%.2f s", ns / 1e9)
    else if (ns >= 1e6) time = sprintf("%.2f ms", ns / 1e6)
    else if (ns >= 1e3) time = sprintf("%.2f us", ns / 1e3)
    else time = sprintf("%.0f ns", ns)
    if (unit == "Bytes" || unit == "BytesDecimal") thr = sprintf("%.2f MB/s", amount / (ns / 1e9) / 1e6)
    else if (unit == "Elements" && id ~ /^pbkdf2/) thr = sprintf("%.1f k iterations/s", amount / (ns / 1e9) / 1e3)
    else if (unit == "Elements") thr = sprintf("%.1f k elements/s", amount / (ns / 1e9) / 1e3)
    else thr = "-"
    printf "| %s | %s | %s | %s |\n", t, id, time, thr
  }'
done
printf '\n'
for t in "${targets[@]}"; do
  printf '%s: %s%s s of emulated benches\n' "$t" "${secs[$t]:+build ${secs[$t]} s, }" "${run_secs[$t]}"
done
