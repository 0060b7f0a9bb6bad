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
for a in "$@"; do
  case "$a" in
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
exec "$AESD_ZIG" cc "${zt[@]}" "${args[@]}"
