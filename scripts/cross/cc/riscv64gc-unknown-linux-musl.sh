#!/usr/bin/env bash
# cargo `linker` (and cc-rs `CC`) for riscv64gc-unknown-linux-musl: see ../zigcc.sh.
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/../zigcc.sh" riscv64gc-unknown-linux-musl "$@"
