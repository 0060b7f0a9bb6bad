# shellcheck shell=bash disable=SC2034
# Pinned versions and shared paths for the cross-compilation scripts.
# Sourced by every script in scripts/cross/ (and by the linker wrappers),
# so keep it free of side effects other than variable definitions.

# The nightly that builds the board targets. Must equal the channel in
# rust-toolchain.toml. Chosen because its rust-src ships libc >= 0.2.190
# (64-bit time_t on riscv32 musl); older nightlies give garbage Instants.
AESD_NIGHTLY="nightly-2026-10-30"
# zig (PyPI package `ziglang`) = C compiler, linker and musl for all targets.
AESD_ZIG_VERSION="0.15.2"

# Everything downloaded or built lives here (not in the repository).
AESD_CROSS_HOME="${AESD_CROSS_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-cross}"
AESD_ZIG="${AESD_ZIG:-$AESD_CROSS_HOME/zig-$AESD_ZIG_VERSION/ziglang/zig}"
export ZIG_GLOBAL_CACHE_DIR="${ZIG_GLOBAL_CACHE_DIR:-$AESD_CROSS_HOME/zig-cache}"
export ZIG_LOCAL_CACHE_DIR="${ZIG_LOCAL_CACHE_DIR:-$ZIG_GLOBAL_CACHE_DIR}"

# Board targets, in build order.
AESD_TARGETS=(riscv32imac-unknown-linux-musl riscv64gc-unknown-linux-musl aarch64-unknown-linux-musl)
# Targets without a prebuilt std from rustup: setup.sh builds their std.
AESD_STD_FROM_SOURCE=(riscv32imac-unknown-linux-musl riscv64gc-unknown-linux-musl)

# The cargo profile for board binaries: `board` if the workspace defines it.
aesd_default_profile() {
  if grep -q '^\[profile\.board\]' "$1/Cargo.toml"; then echo board; else echo release; fi
}
