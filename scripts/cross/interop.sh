#!/usr/bin/env bash
# Native <-> board interoperation for one target, under qemu-user with the
# board's CPU model (scripts/cross/qemu-run.sh):
#   1. the board's aesd serves real jobs from the native aesload; every
#      result is verified, and the JSON report's times must be sane;
#   2. the board's aescrypt encrypts through a native aesd; the openssl
#      binary decrypts the result, and the board's aescrypt decrypts what
#      openssl encrypted; exit codes and reported times are checked.
# Loopback only (127.0.0.1). Every process started here is stopped on exit.
#
# Usage: scripts/cross/interop.sh TARGET BOARD_BIN_DIR NATIVE_BIN_DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"
[[ $# -eq 3 ]] || {
  echo "usage: $0 TARGET BOARD_BIN_DIR NATIVE_BIN_DIR" >&2
  exit 2
}
target=$1 board=$2 native=$3
for bin in "$board/aesd" "$board/aescrypt" "$native/aesd" "$native/aesload"; do
  [[ -x "$bin" ]] || {
    echo "interop.sh: missing $bin" >&2
    exit 2
  }
done

work="$(mktemp -d)"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "interop.sh [$target]: $*" >&2
  exit 1
}

# 1. Board aesd, native aesload.
port=$(free_port)
"$here/qemu-run.sh" "$target" "$board/aesd" --listen "127.0.0.1:$port" --workers 2 --log warn &
board_aesd=$!
pids+=("$board_aesd")
wait_port "$port"
"$native/aesload" --server "127.0.0.1:$port" --clients 4 --chunk 2 --sizes 64K,1M \
  --iter 1000 --quiet --json "$work/load.json" >"$work/load.txt" ||
  fail "native aesload against the board's aesd failed: $(cat "$work/load.txt")"
python3 - "$work/load.json" "$target" <<'PY' || fail "the aesload report is not sane"
import json, sys
doc = json.load(open(sys.argv[1]))
summary = doc["summary"]
assert summary["verified"] == 4 and summary["failed"] == 0, summary
assert summary["duration_s"] > 0 and summary["throughput_bytes_per_sec"] > 0, summary
for t in doc["transfers"]:
    parts = [t["queue_s"], t["processing_s"], t["network_s"]]
    assert t["verified"] and t["total_s"] > 0, t
    assert all(p is not None and p >= 0 for p in parts), t
    assert t["processing_s"] > 0, t
    assert sum(parts) <= t["total_s"] + 1e-3, t
print(f"interop [{sys.argv[2]}]: board aesd served native aesload: "
      f"{summary['verified']}/{summary['transfers']} verified, "
      f"{summary['throughput_bytes_per_sec'] / 1e6:.2f} MB/s emulated")
PY
kill -TERM "$board_aesd"
status=0
wait "$board_aesd" || status=$?
[[ $status -eq 0 ]] || fail "the board's aesd exited $status after SIGTERM (want 0)"
pids=()

# 2. Board aescrypt, native aesd, openssl as the oracle.
port=$(free_port)
"$native/aesd" --listen "127.0.0.1:$port" --log warn &
pids+=("$!")
wait_port "$port"
printf 'interop password\n' >"$work/pw"
chmod 600 "$work/pw"
head -c 300001 /dev/urandom >"$work/plain"
"$here/qemu-run.sh" "$target" "$board/aescrypt" encrypt --server "127.0.0.1:$port" \
  --password-file "$work/pw" -i "$work/plain" -o "$work/enc" -v 2>"$work/enc.log" ||
  fail "the board's aescrypt encrypt failed: $(cat "$work/enc.log")"
openssl enc -d -aes-256-cbc -pbkdf2 -pass "file:$work/pw" -in "$work/enc" -out "$work/dec"
cmp -s "$work/plain" "$work/dec" || fail "openssl decrypted other bytes than were sent"
python3 - "$work/enc.log" <<'PY' || fail "aescrypt's reported times are not sane: $(cat "$work/enc.log")"
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"total ([0-9.]+) s = queue ([0-9.]+) s \+ processing ([0-9.]+) s \+ network ([0-9.]+) s", text)
assert m, text
total, queue, processing, network = map(float, m.groups())
assert total > 0 and processing > 0 and queue >= 0 and network >= 0, m.groups()
assert queue + processing + network <= total + 1e-3, m.groups()
PY
openssl enc -aes-256-cbc -salt -pbkdf2 -pass "file:$work/pw" -in "$work/plain" -out "$work/openssl.enc"
"$here/qemu-run.sh" "$target" "$board/aescrypt" decrypt --server "127.0.0.1:$port" \
  --password-file "$work/pw" -i "$work/openssl.enc" -o "$work/back" ||
  fail "the board's aescrypt could not decrypt openssl's output"
cmp -s "$work/plain" "$work/back" || fail "the board's aescrypt decrypted other bytes"
echo "interop [$target]: board aescrypt through native aesd: openssl decrypts its output, it decrypts openssl's; $(grep -o 'total .*' "$work/enc.log")"
