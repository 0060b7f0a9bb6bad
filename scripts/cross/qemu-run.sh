#!/usr/bin/env bash
# Runs a target binary under Debian's qemu-user with the board's CPU model:
#   riscv32imac-unknown-linux-musl  qemu-riscv32 -cpu rv32,f=false,d=false,c=true
#                                   (VexRiscvSMP: rv32imac, no FPU; F/D -> SIGILL)
#   riscv32gc-unknown-linux-musl    qemu-riscv32 -cpu rv32   (control builds only)
#   riscv64gc-unknown-linux-musl    qemu-riscv64 -cpu rv64   (rv64gc)
#   aarch64-unknown-linux-musl      qemu-aarch64 -cpu cortex-a72 (Raspberry Pi 4)
#   host triple                     run directly
# Also the cargo `runner` for these targets (.cargo/config.toml), so
# `cargo run/test --target T` run under qemu.
#
# Usage: scripts/cross/qemu-run.sh TARGET BIN [ARGS...]
# Env: AESD_QEMU_EXTRA (extra qemu options, word-split, e.g. "-strace"),
#      AESD_QEMU_CPU (the -cpu model instead of the board's, e.g.
#      "rv32,c=true,zkne=true,zknd=true" for the Zkne tests).
set -euo pipefail

if (($# < 2)); then
  echo "usage: $0 TARGET BIN [ARGS...]" >&2
  exit 2
fi
target="$1"
bin="$2"
shift 2

case "$target" in
  riscv32imac-unknown-linux-musl) cmd=(qemu-riscv32 -cpu "rv32,f=false,d=false,c=true") ;;
  riscv32gc-unknown-linux-musl) cmd=(qemu-riscv32 -cpu rv32) ;;
  riscv64gc-unknown-linux-musl) cmd=(qemu-riscv64 -cpu rv64) ;;
  aarch64-unknown-linux-musl) cmd=(qemu-aarch64 -cpu cortex-a72) ;;
  x86_64-unknown-linux-*) exec "$bin" "$@" ;;
  *)
    echo "qemu-run.sh: no CPU model for target $target" >&2
    exit 2
    ;;
esac
if ! command -v "${cmd[0]}" >/dev/null; then
  echo "qemu-run.sh: ${cmd[0]} not found; run scripts/cross/setup.sh" >&2
  exit 127
fi
if [[ -n "${AESD_QEMU_CPU:-}" ]]; then cmd[2]="$AESD_QEMU_CPU"; fi
extra=()
if [[ -n "${AESD_QEMU_EXTRA:-}" ]]; then read -r -a extra <<<"$AESD_QEMU_EXTRA"; fi
exec "${cmd[@]}" "${extra[@]}" "$bin" "$@"
