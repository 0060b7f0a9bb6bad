#!/usr/bin/env bash
# Linker / C compiler driver for the board targets: `zigcc TRIPLE ARGS...`
# runs `zig cc` for the musl target matching the Rust TRIPLE. Used through the
# per-target wrappers in scripts/cross/cc/ (cargo's `linker` takes no args).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/cross/env.sh
. "$here/env.sh"

triple="$1"
shift
case "$triple" in
  riscv32imac-unknown-linux-musl) zt=(-target riscv32-linux-musl -mcpu=generic_rv32+m+a+c) ;;
  riscv64gc-unknown-linux-musl) zt=(-target riscv64-linux-musl -mcpu=baseline_rv64) ;;
  aarch64-unknown-linux-musl) zt=(-target aarch64-linux-musl) ;;
  # Control target only (hard-float rv32gc), for the no-FPU check.
  riscv32gc-unknown-linux-musl) zt=(-target riscv32-linux-musl -mcpu=baseline_rv32) ;;
  *)
    echo "zigcc: unknown target $triple" >&2
    exit 2
    ;;
esac
if [[ ! -x "$AESD_ZIG" ]]; then
  echo "zigcc: $AESD_ZIG not found; run scripts/cross/setup.sh" >&2
  exit 127
fi

args=()
strip_debug=0
output=""
prev=""
for a in "$@"; do
  if [[ "$prev" == -o ]]; then output="$a"; fi
  prev="$a"
  case "$a" in
    # zig's linker knows only "strip everything". Asked to strip the debug
    # information alone (the board profile: strip = "debuginfo"), the
    # binary is stripped after linking instead, with llvm-objcopy, keeping
    # the symbols of the crates that handle secrets (ct-symbols.txt):
    # scripts/cross/ct-branches.py finds those functions by name.
    -Wl,--strip-debug) strip_debug=1 ;;
    # Target/ABI selection is ours (cc-rs adds clang/gcc style flags).
    --target=* | -march=* | -mabi=* | -mcpu=*) ;;
    # zig's lld warns that -O1 is deprecated; it has no effect anyway.
    -Wl,-O1) ;;
    # rustc adds this for aarch64; zig's driver rejects it. The erratum is
    # Cortex-A53 only (the Pi 4 has A72 cores).
    -Wl,--fix-cortex-a53-843419) ;;
    *) args+=("$a") ;;
  esac
done
if [[ -n "${AESD_ZIGCC_LOG:-}" ]]; then
  printf '%q ' "$AESD_ZIG" cc "${zt[@]}" "${args[@]}" >>"$AESD_ZIGCC_LOG"
  echo >>"$AESD_ZIGCC_LOG"
fi
if ((strip_debug == 0)) || [[ -z "$output" ]]; then
  exec "$AESD_ZIG" cc "${zt[@]}" "${args[@]}"
fi
"$AESD_ZIG" cc "${zt[@]}" "${args[@]}"
objcopy="$(rustc "+$AESD_NIGHTLY" --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin/llvm-objcopy"
if [[ ! -x "$objcopy" ]]; then
  echo "zigcc: $objcopy missing (rustup component add llvm-tools)" >&2
  exit 1
fi
"$objcopy" --strip-all --wildcard --keep-symbols="$here/ct-symbols.txt" "$output"
