#!/usr/bin/env bash
# CI for the board targets, in one command:
#   1. scripts/cross/setup.sh      (installs; fast when already done)
#   2. scripts/cross/selftest.sh   (std/libc/musl sanity per board under qemu)
#   3. scripts/cross/build-all.sh  (all boards, size table, riscv32 no-FPU check;
#      riscv64gc, which no board of ours runs, with the board-quick profile)
#      then scripts/cross/ct-branches.py on the riscv32 and aarch64 aesd and
#      aescrypt just built (no conditional branch in the functions handling
#      secrets but listed loops), and its negative control per target
#   4. smoke test per board under qemu with the board's CPU model: aesd
#      --print-config, and aesload with its embedded aesd on 127.0.0.1 moving
#      and verifying real encrypted transfers (exit 0 only if all verified);
#      then scripts/cross/interop.sh: the board's aesd serving the native
#      aesload, the board's aescrypt through a native aesd, openssl as oracle
#   5. the no-FPU check must fail on a small rv32imac program holding one
#      fadd.s (--control); with AESD_CROSS_CONTROL=1 also on a riscv32gc
#      build (--control-gc, slow the first time)
#
# Usage: scripts/cross/ci.sh [--build-only | --test-builds-only] [build-all.sh options]
#   --build-only        steps 1 and 3's builds only, then exit (scripts/test.sh
#                       runs this in the background from its start, so that the
#                       board step later finds the binaries built)
#   --test-builds-only  the cross test builds of the steps after 4 (cargo test
#                       --no-run, the same commands) and the bench executables,
#                       then exit (scripts/test.sh runs this in the background
#                       once its own cargo test is done)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/cross/env.sh
. "$here/env.sh"

# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

build_only=0 test_builds_only=0
case "${1:-}" in
  --build-only)
    build_only=1
    shift
    ;;
  --test-builds-only)
    test_builds_only=1
    shift
    ;;
  -h | --help)
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
    ;;
esac

step "cross: setup"
"$here/setup.sh"
if ((build_only == 0 && test_builds_only == 0)); then
  step "cross: selftest"
  "$here/selftest.sh"
fi
profile="$(aesd_default_profile "$root")"
prev=""
for a in "$@"; do
  if [[ "$prev" == --profile ]]; then profile="$a"; fi
  prev="$a"
done
# cross_cargo_test TITLE [VAR=VALUE...] -- CARGO_TEST_ARGS...: a cross
# test step: runs `cargo test CARGO_TEST_ARGS` (under qemu, through the
# target's runner) with the variables set; with --test-builds-only, builds
# the same tests (--no-run) and runs nothing, so that the step later finds
# them built.
cross_cargo_test() {
  local title=$1 vars=()
  shift
  while [[ $# -gt 0 && "$1" != -- ]]; do
    vars+=("$1")
    shift
  done
  shift
  if ((test_builds_only)); then
    step "cross: build (no run): cargo test $*"
    (cd "$root" && cargo test --quiet --locked --no-run "$@")
  else
    step "cross: $title"
    (cd "$root" && env "${vars[@]}" cargo test --quiet --locked "$@")
  fi
}
# cross_tests: the target tests run under qemu (or, with
# --test-builds-only, built).
cross_tests() {
  cross_cargo_test "aesd-cipher's 2-lane fixsliced AES on riscv32imac under qemu (vectors, differential)" -- \
    --target riscv32imac-unknown-linux-musl -p aesd-cipher --lib
  cross_cargo_test "aesd-cipher's ARMv8 AES kernels (4 chains interleaved) on aarch64 under qemu (vectors, differential)" \
    AESD_REQUIRE_CPU_AES=1 -- --target aarch64-unknown-linux-musl -p aesd-cipher --lib
  cross_cargo_test "VexRiscv's AES instruction: riscv32 machine code under qemu, probed" -- \
    --target riscv32imac-unknown-linux-musl -p aesd-vexriscv --tests
  cross_cargo_test "VexRiscv's AES instruction: riscv32 machine code under qemu, emulated" -- \
    --target riscv32imac-unknown-linux-musl -p aesd-vexriscv --features emulate --tests
  cross_cargo_test "Zkne/Zknd: riscv32 machine code on a qemu CPU with the extensions (qemu runs them natively)" \
    AESD_EXPECT_ZKNE=1 AESD_QEMU_CPU="rv32,f=false,d=false,c=true,zkne=true,zknd=true" -- \
    --target riscv32imac-unknown-linux-musl -p aesd-vexriscv --test zkne
  cross_cargo_test "aesd-age on riscv32imac under qemu: the scalar ChaCha20-Poly1305 and the X25519 the board uses (Wycheproof, RFC 7748, RustCrypto, x25519-dalek), age CLI interop" -- \
    --target riscv32imac-unknown-linux-musl -p aesd-age --lib --tests
  cross_cargo_test "aesd-keyring on riscv32imac under qemu: AES-GCM/ChaCha20-Poly1305 (Wycheproof), Shamir GF(2^8), sealing, the crash-safe store" -- \
    --target riscv32imac-unknown-linux-musl -p aesd-keyring --lib --tests
  cross_cargo_test "aesd-age on aarch64 under qemu: RustCrypto's NEON ChaCha20 with the radix-2^64 Poly1305 the Pi's payload uses (Wycheproof, RustCrypto)" -- \
    --target aarch64-unknown-linux-musl -p aesd-age --lib --tests
}
bench_filter='^aes256cbc_encrypt/65536$'
if ((test_builds_only)); then
  cross_tests
  step "cross: build (no run): the bench executables (scripts/bench/cross.sh, icount.sh's cost among them)"
  "$root/scripts/bench/cross.sh" --build-only --profile "$profile" riscv32imac-unknown-linux-musl
  exit 0
fi
# The shipped boards' binaries with the shipped profile (the constant-time
# checks below read them); riscv64gc, which no board of ours runs, with the
# cheaper board-quick profile (Cargo.toml): the same code, run the same way.
declare -A profile_of
quick_targets=(riscv64gc-unknown-linux-musl)
shipped_targets=()
for t in "${AESD_TARGETS[@]}"; do
  profile_of[$t]="$profile"
  [[ " ${quick_targets[*]} " == *" $t "* ]] || shipped_targets+=("$t")
done
for t in "${quick_targets[@]}"; do profile_of[$t]=board-quick; done
if ((build_only)); then
  step "cross: build the shipped boards (${shipped_targets[*]}, $profile) and ${quick_targets[*]} (board-quick)"
  "$here/build-all.sh" --build-only "$@" "${shipped_targets[@]}"
  "$here/build-all.sh" --build-only --profile board-quick "${quick_targets[@]}"
  exit 0
fi
step "cross: build the shipped boards (${shipped_targets[*]}, $profile)"
"$here/build-all.sh" "$@" "${shipped_targets[@]}"
step "cross: build ${quick_targets[*]} (board-quick)"
"$here/build-all.sh" --profile board-quick --no-check "${quick_targets[@]}"
dir="${CARGO_TARGET_DIR:-$root/target}"
for t in riscv32imac-unknown-linux-musl aarch64-unknown-linux-musl; do
  step "cross: constant time: no secret-dependent branch in the shipped $t aesd and aescrypt (scripts/cross/ct-functions.txt)"
  python3 "$here/ct-branches.py" "$dir/$t/$profile/aesd" "$dir/$t/$profile/aescrypt"
  step "cross: constant time: the check must fail on a function that branches on a secret ($t control)"
  python3 "$here/ct-branches.py" --control "$t"
done
# Native binaries for the interoperation tests. With AESD_NATIVE_BINS_BUILT=1 (scripts/test.sh, after its cargo test built
# them) they are used as they are: a build of these three packages alone
# would pick other features and rebuild.
if [[ "${AESD_NATIVE_BINS_BUILT:-0}" == 1 ]]; then
  step "cross: native aesd, aesload, aescrypt (built by the test command's cargo test)"
else
  step "cross: native aesd, aesload, aescrypt"
  (cd "$root" && cargo build --quiet --locked -p aesd-server -p aesd-client -p aesd-load)
fi
for native in aesd aesload aescrypt; do
  [[ -x "$dir/debug/$native" ]] || {
    echo "ci.sh: no native $dir/debug/$native" >&2
    exit 1
  }
done
for t in "${AESD_TARGETS[@]}"; do
  step "cross: smoke test $t (${profile_of[$t]}) under qemu"
  bin="$dir/$t/${profile_of[$t]}"
  timeout 120 "$here/qemu-run.sh" "$t" "$bin/aesd" --print-config >/dev/null
  timeout 600 "$here/qemu-run.sh" "$t" "$bin/aesload" \
    --clients 4 --chunk 2 --sizes 64K,1M --iter 1000 --quiet
  step "cross: $t board binaries with native ones (openssl as the oracle)"
  timeout 900 "$here/interop.sh" "$t" "$bin" "$dir/debug"
done

step "cross: Transit's data endpoints served by the riscv32imac aesd under qemu: the differential matrix against OpenBao, the bao CLI, hvac, the HTTP limits and metrics (crates/server/tests/it/transit_api.rs); the audit log's chain, aesd verify-audit and by-name jobs' lines (audit_chain.rs)"
(cd "$root" && AESD_TEST_BIN_DIR="$dir/riscv32imac-unknown-linux-musl/$profile" \
  AESD_TEST_RUNNER="$here/qemu-run.sh riscv32imac-unknown-linux-musl" \
  cargo test --quiet --locked --workspace --test it -- transit_api:: audit_chain::)
cross_tests
step "cross: VexRiscv's AES instruction in the real aesd (test build, emulated), Zkne in the shipped aesd, the fallbacks"
"$here/vexriscv-emulated.sh" "$profile" "$dir/debug"
step "cross: bench: whole riscv32 aesd process, 2 concurrent jobs on one worker: instructions/byte"
"$root/scripts/bench/aesd-icount.sh" --quick
step "cross: bench: the same on qemu's Zkne CPU with aesd's defaults (auto picks zkne): instructions/byte"
"$root/scripts/bench/aesd-icount.sh" --quick --no-build --aes-backend zkne
step "cross: bench: age jobs on the riscv32 aesd (every result checked by the age command): instructions/byte"
"$root/scripts/bench/aesd-icount.sh" --quick --no-build --format age
step "cross: bench: instruction count (must be deterministic) and instructions/byte, riscv32imac"
"$root/scripts/bench/icount.sh" --quick --profile "$profile"
step "cross: bench: bench executables build and run under qemu (emulated)"
"$root/scripts/bench/cross.sh" --profile "$profile" --filter "$bench_filter" riscv32imac-unknown-linux-musl

step "cross: the no-FPU check must fail on a binary with an FP instruction (control)"
"$here/check-riscv32-static-nofpu.sh" --control
if [[ "${AESD_CROSS_CONTROL:-0}" == 1 ]]; then
  step "cross: riscv32gc control build must fail the no-FPU check"
  "$here/check-riscv32-static-nofpu.sh" --control-gc
fi
step "cross: all good"
