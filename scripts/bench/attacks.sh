#!/usr/bin/env bash
# The hostile-neighbour attacks of issue 24 as a bounded benchmark: builds a
# release aesd and the `attacks` example (crates/load/examples/attacks.rs)
# and runs them on loopback only (127.0.0.1 and 127.0.0.2), printing the
# figures of docs/hardening.md's attack table:
#   - log flood: failed begins from one address for SECONDS (at most 60)
#     and the bytes aesd logged at --log info;
#   - idle memory: aesd's RSS per idle connection after 200 failed jobs
#     whose 64 KiB data frames were discarded;
#   - metrics blinding: scrapes from a second address served while the
#     first holds 8 unfinished requests;
#   - lock-out: two addresses hold every slot with slow readers (64 kB/s)
#     and keep the queue full of begins; when a third address's 1 MiB job
#     starts and finishes (probing for at most 4 x SECONDS);
#   - lanes: lane occupancy of one worker with two jobs from one address
#     (two LANE_MIB MiB encryptions);
#   - tls: a TLS handshake flood from one address for SECONDS beside
#     another address's TLS jobs.
# Each attack starts its own aesd and stops it; nothing is left running.
#
# Usage: bash scripts/bench/attacks.sh [--board] [SECONDS] [AESD_BINARY] [NAMES] [LANE_MIB]
#   --board      attack the riscv32 board aesd (board profile, built here)
#                under qemu-user instead of a release aesd for this machine
#                (AESD_BINARY is then ignored); e.g. --board 10 "" lanes 32
#   SECONDS      length of the log and handshake floods (default 10, at most 60)
#   AESD_BINARY  the aesd to attack (default: this tree's release build);
#                another build (e.g. an older one) gives "before" figures
#   NAMES        comma-separated: log,memory,metrics,lockout,lanes,tls
#                (default all)
#   LANE_MIB     size of each lane job in MiB (default 128)
# Exit status: 0 done; 1 a build or an attack failed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
board=0
if [[ "${1:-}" == --board ]]; then
  board=1
  shift
fi
seconds="${1:-10}"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
cargo build --release -p aesd-server --bin aesd -p aesd-load --example attacks
binary="${2:-$target_dir/release/aesd}"
names="${3:-all}"
lane_mib="${4:-128}"
if ((board)); then
  # shellcheck source=scripts/cross/env.sh
  . "$root/scripts/cross/env.sh"
  triple=riscv32imac-unknown-linux-musl
  profile="$(aesd_default_profile "$root")"
  bash "$root/scripts/cross/setup.sh" >&2
  cargo "+$AESD_NIGHTLY" build --locked -p aesd-server --bin aesd --profile "$profile" --target "$triple"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  binary="$work/aesd-under-qemu"
  printf '#!/bin/sh\nexec %q %q %q "$@"\n' "$root/scripts/cross/qemu-run.sh" "$triple" \
    "$target_dir/$triple/$profile/aesd" >"$binary"
  chmod +x "$binary"
fi
timeout 600 "$target_dir/release/examples/attacks" "$binary" "$seconds" "$names" "$lane_mib"
