#!/usr/bin/env bash
# Builds scripts/cross/selftest.rs (std only) for each board target with the
# repository's .cargo/config.toml and the pinned nightly, and runs it under
# qemu-user with the board's CPU model (qemu-run.sh), with a timeout.
# Fails if std/libc/musl/zig are broken for a target, e.g. a std whose libc
# lacks 64-bit time on riscv32 musl (garbage Instant, crash at exit).
#
# Usage: scripts/cross/selftest.sh [--build-only] [TARGET...]
#   (default: all board targets; --build-only: build, do not run)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/cross/env.sh
. "$here/env.sh"

run=1
if [[ "${1:-}" == --build-only ]]; then
  run=0
  shift
fi
targets=("$@")
if ((${#targets[@]} == 0)); then targets=("${AESD_TARGETS[@]}"); fi

# A throw-away package inside the repository (target/ is git-ignored) so that
# .cargo/config.toml applies exactly as it does to the workspace.
pkg="$root/target/cross-selftest"
mkdir -p "$pkg"
cat >"$pkg/Cargo.toml.new" <<EOF
[package]
name = "aesd-cross-selftest"
version = "0.0.0"
edition = "2024"
publish = false

[[bin]]
name = "selftest"
path = "$here/selftest.rs"

[workspace]
EOF
if cmp -s "$pkg/Cargo.toml.new" "$pkg/Cargo.toml"; then
  rm "$pkg/Cargo.toml.new"
else
  mv "$pkg/Cargo.toml.new" "$pkg/Cargo.toml"
fi

fail=0
for t in "${targets[@]}"; do
  printf '== selftest %s\n' "$t"
  if ! (cd "$pkg" && CARGO_TARGET_DIR="$pkg/target" \
    cargo "+$AESD_NIGHTLY" build --quiet --jobs "${AESD_JOBS:-2}" --target "$t"); then
    printf 'selftest FAILED for %s: build\n' "$t" >&2
    fail=1
    continue
  fi
  ((run)) || continue
  # A std/libc time mismatch can turn sleep() into a hang: hence the timeout.
  rc=0
  timeout 120 "$here/qemu-run.sh" "$t" "$pkg/target/$t/debug/selftest" || rc=$?
  if ((rc != 0)); then
    printf 'selftest FAILED for %s: exit %s%s\n' "$t" "$rc" "$( ((rc == 124)) && echo ' (timeout)')" >&2
    fail=1
  fi
done
exit "$fail"
