#!/usr/bin/env bash
# VexRiscv's AES instruction in the real riscv32 aesd, under qemu-user:
#   1. a TEST build of aesd (feature emulate-aes-insn: a SIGILL handler runs
#      the instruction's software model; never in a shipped binary) with
#      --aes-backend vexriscv serves real jobs from the native aesload and
#      aescrypt; openssl decrypts what it encrypted and it decrypts what
#      openssl encrypted; with --aes-backend auto and a device tree that marks
#      the CPUs it picks the instruction too;
#   2. the SHIPPED board aesd (no emulator) under plain qemu: auto falls back
#      to software and says why (also with a device tree that claims the
#      instruction: the self-test traps), and a forced vexriscv exits 2 with
#      the reason instead of dying of SIGILL;
#   3. the SHIPPED aesd on a qemu CPU with Zkne/Zknd (run natively by qemu):
#      auto picks zkne from the device tree's ISA, aesload verifies, openssl
#      decrypts what it encrypted and it decrypts what openssl encrypted; on
#      plain rv32imac a forced zkne exits 2 with the reason.
# Loopback only. Every process started here is stopped on exit.
#
# Usage: scripts/cross/vexriscv-emulated.sh PROFILE NATIVE_BIN_DIR
#   PROFILE         the cargo profile of the board build (board, as build-all.sh)
#   NATIVE_BIN_DIR  native aesload and aescrypt (cargo build)
# The test build shares the board build's target directory and dependencies
# (only aesd-server and aesd-vexriscv are rebuilt with the feature); the
# shipped aesd is copied aside first and put back (rebuilt without the
# feature: cargo reuses its artifacts) at the end. Both builds select the
# whole workspace (--workspace --bin aesd), so their features are those of
# build-all.sh's build: a `-p aesd-server` build unifies fewer features
# (aescrypt's enable more of aesd-age), a different aesd linked again.
# Env: CARGO_TARGET_DIR, AESD_JOBS (cargo -j).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
# shellcheck source=scripts/cross/env.sh
. "$here/env.sh"
[[ $# -eq 2 ]] || {
  echo "usage: $0 PROFILE NATIVE_BIN_DIR" >&2
  exit 2
}
profile=$1 native=$2
target=riscv32imac-unknown-linux-musl
board_aesd="${CARGO_TARGET_DIR:-$root/target}/$target/$profile/aesd"
for bin in "$board_aesd" "$native/aesload" "$native/aescrypt"; do
  [[ -x "$bin" ]] || {
    echo "vexriscv-emulated.sh: missing $bin" >&2
    exit 2
  }
done

work="$(mktemp -d)"
shipped="$work/aesd-shipped"
emulated="$work/aesd-emulated"
cp "$board_aesd" "$shipped"
build_aesd() {
  (cd "$root" && cargo "+$AESD_NIGHTLY" build --quiet --locked --profile "$profile" \
    --target "$target" --workspace --bin aesd --jobs "${AESD_JOBS:-2}" "$@")
}
step "cargo build --profile $profile --target $target --features aesd-server/emulate-aes-insn (test build)"
build_aesd --features aesd-server/emulate-aes-insn
cp "$board_aesd" "$emulated"
step "cargo build --profile $profile --target $target (the shipped aesd again)"
build_aesd
if grep -aq "cannot install the AES instruction emulator" "$shipped"; then
  echo "vexriscv-emulated.sh: the shipped aesd contains the emulator" >&2
  exit 1
fi
grep -aq "cannot install the AES instruction emulator" "$emulated" ||
  {
    echo "vexriscv-emulated.sh: the test build lacks the emulator" >&2
    exit 1
  }

pid=""
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "vexriscv-emulated.sh: $*" >&2
  exit 1
}

# A device tree whose CPU node has the property aesd looks for.
mkdir -p "$work/dt/cpus/cpu@0" "$work/dt-plain/cpus/cpu@0"
: >"$work/dt/cpus/cpu@0/litex,aes-instruction"

# Starts BIN under qemu with ARGS on a free port; sets $port and $pid.
start() {
  local bin=$1
  shift
  port="$(free_port)"
  "$here/qemu-run.sh" "$target" "$bin" --listen "127.0.0.1:$port" --workers 2 "$@" \
    2>"$work/aesd.log" &
  pid=$!
  wait_port "$port" 120
}

stop() {
  kill -TERM "$pid"
  local status=0
  wait "$pid" || status=$?
  pid=""
  [[ $status -eq 0 ]] || fail "aesd exited $status after SIGTERM: $(cat "$work/aesd.log")"
}

expect_log() {
  grep -q "$1" "$work/aesd.log" || fail "aesd did not log '$1':
$(cat "$work/aesd.log")"
}

printf 'emulated instruction\n' >"$work/pw"
chmod 600 "$work/pw"

# serve_checked WHAT SIZES BYTES: against the running aesd, two concurrent
# aesload jobs of SIZES (every result verified), then a file of BYTES random
# bytes encrypted by aescrypt and decrypted by openssl, and one encrypted by
# openssl and decrypted by aescrypt, both compared with the original.
serve_checked() {
  local what=$1 sizes=$2 bytes=$3
  "$native/aesload" --server "127.0.0.1:$port" --clients 2 --chunk 2 --sizes "$sizes" \
    --iter 1000 --quiet >"$work/load.txt" 2>&1 || fail "aesload through $what: $(cat "$work/load.txt")"
  grep -q "Transfers Verified.*2 / 2" "$work/load.txt" ||
    fail "not every transfer through $what verified: $(cat "$work/load.txt")"
  head -c "$bytes" /dev/urandom >"$work/plain"
  "$native/aescrypt" encrypt --server "127.0.0.1:$port" --password-file "$work/pw" \
    -i "$work/plain" -o "$work/enc" || fail "aescrypt encrypt through $what"
  openssl enc -d -aes-256-cbc -pbkdf2 -pass "file:$work/pw" -in "$work/enc" -out "$work/dec"
  cmp -s "$work/plain" "$work/dec" || fail "openssl decrypted other bytes than $what encrypted"
  openssl enc -aes-256-cbc -salt -pbkdf2 -pass "file:$work/pw" -in "$work/plain" -out "$work/openssl.enc"
  "$native/aescrypt" decrypt --server "127.0.0.1:$port" --password-file "$work/pw" \
    -i "$work/openssl.enc" -o "$work/back" || fail "aescrypt decrypt through $what"
  cmp -s "$work/plain" "$work/back" || fail "$what decrypted other bytes"
}

# 1. The instruction path, emulated.
start "$emulated" --aes-backend vexriscv
expect_log "AES backend: vexriscv"
# Every AES instruction traps into the emulator (about 224 traps per block),
# so the data is kept small: two concurrent jobs (two chains interleaved).
serve_checked "the instruction path" 40K,72K 65539
stop
echo "vexriscv-emulated: instruction path (emulated): 2/2 concurrent aesload jobs verified, openssl decrypts its output and it decrypts openssl's (64 KiB + 3)"

start "$emulated" --aes-backend auto --device-tree "$work/dt"
expect_log "AES backend: vexriscv, because the device tree marks the CPUs"
stop
echo "vexriscv-emulated: auto with a marked device tree and a working instruction: vexriscv"

# 2. The shipped aesd under plain qemu: no instruction.
start "$shipped" --aes-backend auto --device-tree "$work/dt-plain"
expect_log "AES backend: fixsliced, because no CPU in"
stop
start "$shipped" --aes-backend auto --device-tree "$work/dt"
expect_log "AES backend: fixsliced, because the device tree marks the CPUs .* self-test failed (the CPU raised an illegal-instruction trap)"
stop
echo "vexriscv-emulated: shipped aesd, no instruction: auto falls back to fixsliced and says why (also when the device tree claims it)"

status=0
"$here/qemu-run.sh" "$target" "$shipped" --aes-backend vexriscv --listen 127.0.0.1:0 \
  >"$work/forced.out" 2>&1 || status=$?
[[ $status -eq 2 ]] || fail "forced vexriscv on a CPU without it exited $status (want 2): $(cat "$work/forced.out")"
grep -q "cannot run VexRiscv's AES instruction (the CPU raised an illegal-instruction trap)" "$work/forced.out" ||
  fail "forced vexriscv did not say why: $(cat "$work/forced.out")"
echo "vexriscv-emulated: shipped aesd, forced vexriscv: exit 2, \"$(head -n1 "$work/forced.out")\""

# 3. Zkne/Zknd: the SHIPPED aesd on a qemu CPU that has them (qemu runs
# them natively: no emulator), verified by aesload and by openssl.
zkne_cpu="rv32,f=false,d=false,c=true,zkne=true,zknd=true"
mkdir -p "$work/dt-zkne/cpus/cpu@0"
printf 'rv32imac_zicsr_zkne_zknd\0' >"$work/dt-zkne/cpus/cpu@0/riscv,isa"
AESD_QEMU_CPU="$zkne_cpu" start "$shipped" --aes-backend auto --device-tree "$work/dt-zkne"
expect_log "AES backend: zkne, because .*the device tree's ISA lists Zkne and Zknd and their self-test passed"
serve_checked "Zkne" 1M,3000005 200003
stop
echo "vexriscv-emulated: Zkne (qemu -cpu $zkne_cpu): auto picks zkne from the ISA, 2/2 aesload jobs verified, openssl decrypts its output and it decrypts openssl's (195 KiB + 3)"

status=0
"$here/qemu-run.sh" "$target" "$shipped" --aes-backend zkne --listen 127.0.0.1:0 \
  >"$work/forced.out" 2>&1 || status=$?
[[ $status -eq 2 ]] || fail "forced zkne on a CPU without it exited $status (want 2): $(cat "$work/forced.out")"
grep -q "cannot run the Zkne/Zknd AES instructions (the CPU raised an illegal-instruction trap)" "$work/forced.out" ||
  fail "forced zkne did not say why: $(cat "$work/forced.out")"
echo "vexriscv-emulated: shipped aesd, forced zkne on plain rv32imac: exit 2, \"$(head -n1 "$work/forced.out")\""
