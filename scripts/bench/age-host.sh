#!/usr/bin/env bash
# age (format 2) on this host: the release aesd's own CPU per byte of age
# jobs beside `openssl speed -evp chacha20-poly1305`, in one run.
#
# Starts the release aesd (--workers 1, defaults otherwise), runs aescrypt
# age jobs against it (a separate process, not counted): JOBS encryptions of
# a SIZE-byte random file to one recipient, then JOBS decryptions of the
# result (every result checked by the age command or cmp), and reads aesd's
# user+system CPU time from /proc/PID/stat before and after each phase. The
# figure is input bytes per CPU-second of aesd's whole process (framing,
# copies, scheduling and the cipher). `openssl speed -evp chacha20-poly1305
# -bytes 16384` reports user CPU time too (its default), one core.
#
# Usage: bash scripts/bench/age-host.sh [--size BYTES] [--jobs N] [--no-build] [--floor]
#   --size BYTES   bytes per job (default 268435456)
#   --jobs N       jobs per phase, one after another (default 2)
#   --no-build     use target/release as it is
#   --floor        also measure the copy floor (scripts/bench/loopback-floor.sh
#                  --figure copy: an echo server, SIZE bytes over one
#                  connection, median of 3) and print aesd's CPU per byte
#                  above it beside openssl's
# Exit status: 0 done; 1 a build, job or check failed; 2 bad usage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

size=268435456
jobs=2
build=1
floor=0
while (($#)); do
  case "$1" in
    --size | --jobs)
      (($# >= 2)) || {
        echo "age-host.sh: $1 needs a value" >&2
        exit 2
      }
      [[ "$2" =~ ^[1-9][0-9]*$ ]] || {
        echo "age-host.sh: $1 takes a positive number" >&2
        exit 2
      }
      if [[ "$1" == --size ]]; then size="$2"; else jobs="$2"; fi
      shift
      ;;
    --no-build) build=0 ;;
    --floor) floor=1 ;;
    -h | --help)
      sed -n '2,23s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "age-host.sh: unknown argument $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done

apt_install openssl age python3
bin="${CARGO_TARGET_DIR:-$root/target}/release"
if ((build)); then
  step "cargo build --release --bin aesd --bin aescrypt"
  (cd "$root" && cargo build --quiet --locked --release -p aesd-server -p aesd-client --bin aesd --bin aescrypt)
fi

work="$(mktemp -d)"
aesd_pid=""
trap 'stop_aesd_and_remove "$work"' EXIT

head -c "$size" /dev/urandom >"$work/plain"
age-keygen -o "$work/key" 2>/dev/null
recipient="$(age-keygen -y "$work/key")"
port="$(free_port)"
"$bin/aesd" --listen "127.0.0.1:$port" --workers 1 --log warn 2>"$work/aesd.log" &
aesd_pid=$!
wait_port "$port" 30

# aesd's user + system CPU time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$aesd_pid/stat"; }
hz="$(getconf CLK_TCK)"

phase() {
  local name="$1" before after j
  before="$(cpu_ticks)"
  for ((j = 0; j < jobs; j++)); do
    if [[ "$name" == encrypt ]]; then
      "$bin/aescrypt" encrypt --server "127.0.0.1:$port" -r "$recipient" \
        -i "$work/plain" -o "$work/file.age"
    else
      "$bin/aescrypt" decrypt --server "127.0.0.1:$port" --identity "$work/key" \
        -i "$work/file.age" -o "$work/back"
    fi
  done
  after="$(cpu_ticks)"
  if [[ "$name" == encrypt ]]; then
    age -d -i "$work/key" "$work/file.age" | cmp -s - "$work/plain" || {
      echo "age-host.sh: age -d does not give the plaintext back" >&2
      exit 1
    }
  else
    cmp -s "$work/back" "$work/plain" || {
      echo "age-host.sh: the decryption differs from the plaintext" >&2
      exit 1
    }
  fi
  python3 -c "import sys; b, t, hz = map(float, sys.argv[1:]); print(b / (t / hz) if t else float('inf'))" \
    "$((size * jobs))" "$((after - before))" "$hz"
}

encrypt_rate="$(phase encrypt)"
decrypt_rate="$(phase decrypt)"
openssl_rate="$(openssl_speed age-host.sh chacha20-poly1305)"
floor_ns=0
if ((floor)); then floor_ns="$(copy_floor_ns 1 "$size")"; fi
python3 - "$encrypt_rate" "$decrypt_rate" "$openssl_rate" "$size" "$jobs" "$floor_ns" <<'PY'
import sys
enc, dec, ossl = map(float, sys.argv[1:4])
size, jobs, floor_ns = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
print(f"age through aesd ({jobs} jobs of {size} bytes each, aesd --workers 1, its own CPU time):")
print(f"  encrypt  {enc / 1e6:9.1f} MB per CPU-second   {enc / ossl:5.2f} x openssl")
print(f"  decrypt  {dec / 1e6:9.1f} MB per CPU-second   {dec / ossl:5.2f} x openssl")
print(f"openssl speed -evp chacha20-poly1305 -bytes 16384 (user CPU, one core): {ossl / 1e6:9.1f} MB/s")
if floor_ns:
    print(f"copy floor (an echo server, {size} bytes over one connection): {floor_ns:6.3f} ns/byte")
    for name, rate in (("encrypt", enc), ("decrypt", dec)):
        above = 1e9 / rate - floor_ns
        print(f"  {name} above it {above:6.3f} ns/byte  "
              f"{1e9 / ossl / above if above > 0 else float('inf'):5.2f} x openssl")
PY
