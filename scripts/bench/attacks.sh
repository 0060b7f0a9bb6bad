#!/usr/bin/env bash
# The hostile-neighbour attacks of issue 24 as a bounded benchmark: builds a
# release aesd and the `attacks` example (crates/server/examples/attacks.rs)
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
#   - lanes: lane occupancy of one worker with two jobs from one address.
# Each attack starts its own aesd and stops it; nothing is left running.
#
# Usage: bash scripts/bench/attacks.sh [SECONDS] [AESD_BINARY] [NAMES]
#   SECONDS      length of the log flood (default 10, at most 60)
#   AESD_BINARY  the aesd to attack (default: this tree's release build);
#                another build (e.g. an older one) gives "before" figures
#   NAMES        comma-separated: log,memory,metrics,lockout,lanes (default all)
# Exit status: 0 done; 1 a build or an attack failed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
seconds="${1:-10}"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
cargo build --release -p aesd-server --bin aesd --example attacks
binary="${2:-$target_dir/release/aesd}"
names="${3:-all}"
timeout 600 "$target_dir/release/examples/attacks" "$binary" "$seconds" "$names"
