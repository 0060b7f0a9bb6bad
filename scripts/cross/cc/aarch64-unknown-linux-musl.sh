#!/usr/bin/env bash
# cargo `linker` (and cc-rs `CC`) for aarch64-unknown-linux-musl: see ../zigcc.sh.
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/../zigcc.sh" aarch64-unknown-linux-musl "$@"
