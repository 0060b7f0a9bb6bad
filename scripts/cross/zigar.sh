#!/usr/bin/env bash
# `ar` for the board targets (cc-rs AR_<target>): zig's llvm-ar, which writes
# a symbol index for RISC-V/AArch64 objects (the host's GNU ar may not).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/cross/env.sh
. "$here/env.sh"
exec "$AESD_ZIG" ar "$@"
