#!/usr/bin/env bash
# Builds the workspace's binaries for every board target and prints a table of
# their sizes; also checks that each binary is statically linked, and runs
# the riscv32 no-FPU check (static + no F/D instructions + qemu without FPU).
# The board profile keeps the symbols of the crates handling secrets
# (scripts/cross/ct-branches.py checks their shipped code by name; see
# zigcc.sh and ct-symbols.txt): the table gives what they cost (the size
# after llvm-objcopy --strip-all).
#
# Usage: scripts/cross/build-all.sh [--profile P] [--min-size] [--no-check] [--build-only] [TARGET...]
#   --profile P  cargo profile (default: board if Cargo.toml defines
#                [profile.board], else release)
#   --min-size   also rebuild std with the profile (-Zbuild-std, panic=abort
#                std, std's optimize_for_size feature): about 20% smaller
#                binaries, +1 min per target; default: the installed std, as
#                plain `cargo build --target T` uses
#   --no-check   skip check-riscv32-static-nofpu.sh
#   --build-only build, then exit (no table, no check)
#   TARGET...    default: riscv32imac, riscv64gc and aarch64 -unknown-linux-musl
# Env: AESD_JOBS (cargo -j, default 2), CARGO_TARGET_DIR (default target/).
# Run scripts/cross/setup.sh first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/cross/env.sh
. "$here/env.sh"
cd "$root"

profile=""
check=1
build_only=0
extra=()
targets=()
while (($#)); do
  case "$1" in
    --profile)
      profile="${2?--profile needs a value}"
      shift
      ;;
    --no-check) check=0 ;;
    --build-only) build_only=1 ;;
    --min-size) extra=("-Zbuild-std=std,panic_abort" -Zbuild-std-features=optimize_for_size) ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    -*)
      echo "build-all.sh: unknown option $1" >&2
      exit 2
      ;;
    *) targets+=("$1") ;;
  esac
  shift
done
if ((${#targets[@]} == 0)); then targets=("${AESD_TARGETS[@]}"); fi
if [[ -z "$profile" ]]; then profile="$(aesd_default_profile "$root")"; fi
# cargo puts the `dev` profile in debug/ and every other one in a folder of its name.
pdir="$profile"
if [[ "$profile" == dev ]]; then pdir=debug; fi
target_dir="${CARGO_TARGET_DIR:-$root/target}"

cargo=(cargo "+$AESD_NIGHTLY")
mapfile -t bins < <("${cargo[@]}" metadata --no-deps --format-version 1 | python3 -c '
import json, sys
m = json.load(sys.stdin)
for p in m["packages"]:
    for t in p["targets"]:
        if "bin" in t["kind"]:
            print(t["name"])' | sort)
if ((${#bins[@]} == 0)); then
  echo "build-all.sh: the workspace has no binaries" >&2
  exit 1
fi

tools="$(rustc "+$AESD_NIGHTLY" --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin"
objcopy="$tools/llvm-objcopy"
if [[ ! -x "$objcopy" ]]; then
  echo "build-all.sh: $objcopy missing (rustup component add llvm-tools)" >&2
  exit 1
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

declare -A secs
for t in "${targets[@]}"; do
  printf '==> cargo build --profile %s --target %s\n' "$profile" "$t" >&2
  start=$SECONDS
  "${cargo[@]}" build --profile "$profile" --target "$t" --jobs "${AESD_JOBS:-2}" --workspace --bins "${extra[@]}"
  secs[$t]=$((SECONDS - start))
done
((build_only == 0)) || exit 0

status=0
rv32=()
declare -A symbols
printf '\nprofile %s%s; sizes in bytes (KiB); s = statically linked\n\n' "$profile" "${extra[*]:+ (${extra[*]})}"
printf '| %-10s |' binary
for t in "${targets[@]}"; do printf ' %-30s |' "$t"; done
printf '\n|%s|' "------------"
for _ in "${targets[@]}"; do printf '%s|' "--------------------------------"; done
printf '\n'
for b in "${bins[@]}"; do
  printf '| %-10s |' "$b"
  for t in "${targets[@]}"; do
    f="$target_dir/$t/$pdir/$b"
    if [[ ! -f "$f" ]]; then
      printf ' %-30s |' "missing"
      status=1
      continue
    fi
    size=$(stat -c %s "$f")
    if readelf -lW "$f" | grep -qE '^[[:space:]]+(INTERP|DYNAMIC)[[:space:]]'; then
      st="DYNAMIC!"
      status=1
    else
      st="s"
    fi
    printf ' %-30s |' "$(printf '%9d (%5d KiB) %s' "$size" $(((size + 512) / 1024)) "$st")"
    "$objcopy" --strip-all "$f" "$scratch/stripped"
    symbols["$b $t"]=$((size - $(stat -c %s "$scratch/stripped")))
    if [[ "$t" == riscv32imac-* ]]; then rv32+=("$f"); fi
  done
  printf '\n'
done
printf '| %-10s |' "build time"
for t in "${targets[@]}"; do printf ' %-30s |' "${secs[$t]} s"; done
printf '\n\n'
printf 'of which symbols (ct-symbols.txt, for scripts/cross/ct-branches.py; llvm-strip removes them):\n'
for b in "${bins[@]}"; do
  for t in "${targets[@]}"; do
    if [[ -n "${symbols["$b $t"]:-}" ]]; then
      printf '  %s %s: %d bytes (%d KiB)\n' "$b" "$t" "${symbols["$b $t"]}" $(((symbols["$b $t"] + 512) / 1024))
    fi
  done
done
printf '\n'

if ((check && ${#rv32[@]})); then
  "$here/check-riscv32-static-nofpu.sh" "${rv32[@]}" || status=1
fi
exit "$status"
