#!/usr/bin/env bash
# The project's test command (CI runs exactly this): sets up, then checks
# formatting, lints, and runs every test suite.
#
#   bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

bash scripts/setup.sh

step "shellcheck"
mapfile -t scripts < <(git ls-files '*.sh' 'buildroot-overlay/**/S*' | sort -u)
[ "${#scripts[@]}" -eq 0 ] || shellcheck -x "${scripts[@]}"

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
cargo test --workspace --locked
