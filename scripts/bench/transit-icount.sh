#!/usr/bin/env bash
# Counts the guest instructions the WHOLE riscv32 board aesd process executes
# per Transit request, under qemu-user with the counting plugin
# (scripts/bench/icount.c, threads=1): HTTP parsing, the token and policy
# check, JSON, base64, the AEAD, the audit line (with --audit-log, the
# default here) and tokio, all of it. The board's aesd (board profile) runs
# `--dev` with `--http-listen`; one keep-alive connection (python3's
# http.client, a native process, not counted) creates a key, sends N
# encryptions of a SIZE-byte plaintext, then decrypts a fixed sample of the
# ciphertexts and compares them with the plaintext (every encryption's answer
# is checked for its `vault:v1:` form). The fixed part (start-up, the key,
# the sample, shutdown) is removed with a second run of 2N requests:
#   instructions per request = (count(2N) - count(N)) / N
# Each count is taken twice (thread interleaving varies slightly); the
# smaller is used. A benchmark: it prints figures and gates nothing.
#
# Usage: scripts/bench/transit-icount.sh [OPTIONS]
#   --requests N     encryptions in the first run; the second runs 2N (default 200)
#   --size BYTES     plaintext bytes per request (default 1024)
#   --key-type T     aes256-gcm96 (default, as OpenBao) or chacha20-poly1305
#   --no-audit       without --audit-log (the audit line's cost is the difference)
#   --no-build       use the riscv32 board aesd of the last build
#   --aesd PATH      count this riscv32 aesd instead (implies --no-build)
#   --profile FILE   also write where the 2N-request run's instructions went,
#                    per function, to FILE (scripts/bench/icount-profile.py;
#                    needs an aesd with its symbols: --aesd of a build with
#                    CARGO_PROFILE_BOARD_STRIP=none)
#   --json FILE      write the figures as JSON
#   -h, --help       this help
# Env: AESD_BENCH_CACHE (the plugin's cache, default ~/.cache/aesd-bench).
# Exit status: 0 done; 1 a build, run or answer failed; 2 bad usage.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
# shellcheck source=scripts/cross/env.sh
. "$root/scripts/cross/env.sh"
# shellcheck source=scripts/bench/lib.sh
. "$here/lib.sh"

die_usage() {
  echo "transit-icount.sh: $* (try --help)" >&2
  exit 2
}

requests=200
size=1024
key_type=aes256-gcm96
audit=1
build=1
json=""
aesd=""
profile_out=""
while (($#)); do
  case "$1" in
    --requests | --size)
      if (($# < 2)) || ! [[ "$2" =~ ^[1-9][0-9]*$ ]]; then die_usage "$1 takes a positive number"; fi
      if [[ "$1" == --requests ]]; then requests="$2"; else size="$2"; fi
      shift
      ;;
    --key-type)
      (($# >= 2)) || die_usage "--key-type needs a value"
      case "$2" in
        aes256-gcm96 | chacha20-poly1305) key_type="$2" ;;
        *) die_usage "--key-type is aes256-gcm96 or chacha20-poly1305, not '$2'" ;;
      esac
      shift
      ;;
    --no-audit) audit=0 ;;
    --no-build) build=0 ;;
    --json | --aesd | --profile)
      (($# >= 2)) || die_usage "$1 needs a file"
      case "$1" in
        --json) json="$2" ;;
        --aesd) aesd="$2" build=0 ;;
        --profile) profile_out="$2" ;;
      esac
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    *) die_usage "unknown argument $1" ;;
  esac
  shift
done

target=riscv32imac-unknown-linux-musl
profile="$(aesd_default_profile "$root")"
apt_install gcc qemu-user python3
plugin="$(icount_plugin)"
if ((build)); then
  step "the riscv32 board aesd (scripts/cross/build-all.sh, $profile)"
  "$root/scripts/cross/build-all.sh" --build-only "$target"
fi
[[ -n "$aesd" ]] || aesd="${CARGO_TARGET_DIR:-$root/target}/$target/$profile/aesd"
[[ -x "$aesd" ]] || {
  echo "transit-icount.sh: no $aesd (run without --no-build)" >&2
  exit 1
}

work="$(mktemp -d)"
aesd_pid=""
cleanup() {
  if [[ -n "$aesd_pid" ]]; then kill -KILL "$aesd_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# Drives one run: creates the key, N encryptions (each answer's form
# checked), then decrypts a sample of 8 and compares it with the plaintext.
cat >"$work/requests.py" <<'PY'
import base64, http.client, json, os, sys

port, requests, size, key_type = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
headers = {"X-Vault-Token": "root", "Content-Type": "application/json"}

def post(path, body):
    conn.request("POST", "/v1/" + path, json.dumps(body), headers)
    answer = conn.getresponse()
    data = answer.read()
    if answer.status not in (200, 204):
        sys.exit(f"{path}: HTTP {answer.status}: {data[:200]!r}")
    return json.loads(data) if data else {}

post("transit/keys/bench", {"type": key_type})
plain = os.urandom(size)
encoded = base64.b64encode(plain).decode()
sample = []
for i in range(requests):
    out = post("transit/encrypt/bench", {"plaintext": encoded})
    ciphertext = out["data"]["ciphertext"]
    if not ciphertext.startswith("vault:v1:"):
        sys.exit(f"request {i}: not a version-1 ciphertext: {ciphertext[:40]!r}")
    if len(sample) < 8:
        sample.append(ciphertext)
for ciphertext in sample:
    out = post("transit/decrypt/bench", {"ciphertext": ciphertext})
    if base64.b64decode(out["data"]["plaintext"]) != plain:
        sys.exit("a decryption differs from the plaintext")
PY

# Prints the whole-process instruction count of the board aesd serving N
# encryption requests.
# With a second argument, also the per-block profile into that file.
count_run() {
  local n="$1" port out="$work/count" audit_args=() plugin_args="threads=1"
  rm -f "$out" "$work/audit.log"
  ((audit == 0)) || audit_args=(--audit-log "$work/audit.log")
  [[ -z "${2:-}" ]] || plugin_args="$plugin_args,profile=$2"
  port="$(free_port)"
  env -i PATH="$PATH" \
    AESD_QEMU_EXTRA="-plugin $plugin,out=$out,$plugin_args -U AESD_QEMU_EXTRA -U PATH" \
    "$root/scripts/cross/qemu-run.sh" "$target" "$aesd" --dev --dev-root-token-id root \
    --listen 127.0.0.1:0 --http-listen "127.0.0.1:$port" --workers 1 "${audit_args[@]}" \
    --log warn >"$work/aesd.out" 2>"$work/aesd.log" &
  aesd_pid=$!
  wait_port "$port" 120
  if ! python3 "$work/requests.py" "$port" "$n" "$size" "$key_type" >"$work/requests.txt" 2>&1; then
    echo "transit-icount.sh: the requests failed against the board's aesd:" >&2
    cat "$work/requests.txt" "$work/aesd.log" >&2
    exit 1
  fi
  if ((audit)) && (($(grep -c '"transit/encrypt/bench"' "$work/audit.log") < 2 * n)); then
    echo "transit-icount.sh: the audit log holds fewer than a request and a response line per encryption" >&2
    exit 1
  fi
  kill -TERM "$aesd_pid"
  local status=0
  wait "$aesd_pid" || status=$?
  aesd_pid=""
  if ((status != 0)) || [[ ! -s "$out" ]]; then
    echo "transit-icount.sh: the board's aesd exited $status without a count:" >&2
    cat "$work/aesd.log" >&2
    exit 1
  fi
  head -n1 "$out"
}

smaller() { if (($1 < $2)); then echo "$1"; else echo "$2"; fi; }
step "counting: $requests and $((2 * requests)) encryptions of $size bytes ($key_type, audit log $( ((audit)) && echo on || echo off)), twice each"
a1="$(count_run "$requests")"
a2="$(count_run "$requests")"
b1="$(count_run $((2 * requests)))"
b2="$(count_run $((2 * requests)))"
a="$(smaller "$a1" "$a2")"
b="$(smaller "$b1" "$b2")"
per_request=$(((b - a) / requests))
printf 'counts: %d requests: %d, %d; %d requests: %d, %d\n' "$requests" "$a1" "$a2" $((2 * requests)) "$b1" "$b2"
printf 'instructions per %d-byte Transit encryption (whole riscv32 aesd, HTTP to audit line): %d\n' \
  "$size" "$per_request"
printf 'fixed part (start-up, the key, 8 decryptions, shutdown): %d\n' $((a - requests * per_request))
if [[ -n "$profile_out" ]]; then
  step "profile: the $((2 * requests))-request run again, per function"
  count_run $((2 * requests)) "$work/blocks" >/dev/null
  python3 "$here/icount-profile.py" "$aesd" "$work/blocks" --top 40 --per $((2 * requests)) >"$profile_out"
  echo "transit-icount.sh: the profile is in $profile_out (per unit: per request, fixed part included)"
fi
if [[ -n "$json" ]]; then
  printf '{"bench":"transit-icount","target":"%s","profile":"%s","key_type":"%s","audit":%s,"size":%d,"requests":%d,"instructions_per_request":%d,"counts":[%d,%d,%d,%d]}\n' \
    "$target" "$profile" "$key_type" "$( ((audit)) && echo true || echo false)" "$size" "$requests" \
    "$per_request" "$a1" "$a2" "$b1" "$b2" >"$json"
  echo "transit-icount.sh: figures in $json"
fi
