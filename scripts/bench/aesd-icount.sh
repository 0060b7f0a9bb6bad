#!/usr/bin/env bash
# Counts the guest instructions the WHOLE board aesd process executes per byte
# of concurrent jobs, under qemu-user with the counting plugin
# (scripts/bench/icount.c, threads=1: atomic per-block additions, exact for a
# multi-threaded guest). Everything the real server does is counted: tokio,
# framing, the worker pool and its lane engine, the cipher; system calls are
# the kernel's and cost no guest instructions.
#
# For each run it starts the board's aesd (board profile) under qemu with
# --workers W, runs the native aesload against it with J clients started
# together (--clients J --chunk J), each sending SIZE bytes (every result
# decrypted and verified in aesload), stops aesd with SIGTERM and reads the
# count. The fixed part (start-up, connections, key set-up, shutdown) is
# removed with a second run of the same jobs at BASE bytes, and the process's
# own start-up and shutdown with a run that serves no job (count(idle)):
#   instructions/byte   = (count(SIZE) - count(BASE)) / (J * (SIZE - BASE))
#   fixed cost per job  = (count(BASE) - count(idle)) / J - instructions/byte * BASE
# (the fixed cost is what a job costs besides its bytes: connection, handshake,
# begin, key set-up, done; with --key-derivation server also PBKDF2). Each
# count is taken twice; the thread interleaving varies, so counts differ
# slightly: both are printed, the smaller is used.
#
# Usage: scripts/bench/aesd-icount.sh [OPTIONS] [TARGET]
#   TARGET              riscv32imac-unknown-linux-musl (default), riscv64gc-unknown-linux-musl
#                       or aarch64-unknown-linux-musl (software AES and SHA-256, as the Pi 4)
#   --jobs LIST         concurrent jobs per run, comma-separated (default 1,2)
#   --workers W         aesd worker threads (default 1: the jobs share one worker)
#   --size BYTES        bytes per job (default 4194304)
#   --base BYTES        bytes per job of the baseline run (default 4096)
#   --iter N            PBKDF2 iterations (default 10000)
#   --key-derivation K  auto (key source 2: the client derives; default) or server
#                       (key source 1: aesd runs PBKDF2)
#   --operation OP      encrypt (default: aesload's jobs, every result verified) or
#                       decrypt (J concurrent aescrypt decryptions of files made by
#                       openssl enc, every result compared with the plaintext)
#   --format F          openssl (default: the formats above) or age (J concurrent aescrypt
#                       -r encryptions, each result decrypted by the age command and
#                       compared; with --operation decrypt, files made by age -r, decrypted
#                       by aescrypt --identity and compared). --key-derivation and --iter
#                       do not apply to age. by-name: J aescrypt --key encryptions on a keyring
#                       made here, unsealed in every count (the idle one too), each result then
#                       decrypted by name by a native aesd on that keyring and compared
#   --aes-backend B     software (default: what the board runs without the AES
#                       instruction), vexriscv (riscv32 only: VexRiscv's AES
#                       instruction; a test build of aesd whose SIGILL handler
#                       emulates it under qemu, the handler left out of the count
#                       so each AES instruction counts as one, as on the board)
#                       or zkne (riscv32 only: the shipped aesd on qemu's CPU with
#                       Zkne/Zknd, which qemu runs natively; aesd's defaults, the
#                       backend chosen by auto from a device tree listing them)
#   --tls               the jobs over TLS (aesd --tls-cert/--tls-key with a P-256
#                       certificate made here by openssl, clients --tls-ca): the
#                       count then includes the TLS record layer and handshakes
#   --quick             CI: --jobs 2 --size 1048576, one count per run
#   --no-build          use the binaries of the last build
#   --json FILE         write the results as JSON (scripts/bench/figures-table.py
#                       makes a table row of each run)
#   -h, --help          this help
# Env: AESD_BENCH_CACHE (plugin cache, default ~/.cache/aesd-bench), AESD_JOBS (cargo -j).
# Exit status: 0 done; 1 a build, run or job failed; 2 bad usage.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
# shellcheck source=scripts/cross/env.sh
. "$root/scripts/cross/env.sh"
# shellcheck source=scripts/bench/lib.sh
. "$here/lib.sh"

usage() { sed -n '2,60s/^# \{0,1\}//p' "$0"; }
die_usage() {
  echo "aesd-icount.sh: $* (try --help)" >&2
  exit 2
}

jobs_list="1,2"
workers=1
size=4194304
base=4096
iter=10000
derivation=auto
backend=software
operation=encrypt
format=openssl
repeats=2
tls=0
build=1
json=""
target=riscv32imac-unknown-linux-musl
while (($#)); do
  case "$1" in
    --jobs | --workers | --size | --base | --iter | --key-derivation | --aes-backend | --operation | --format | --json)
      (($# >= 2)) || die_usage "$1 needs a value"
      case "$1" in
        --jobs) jobs_list="$2" ;;
        --workers) workers="$2" ;;
        --size) size="$2" ;;
        --base) base="$2" ;;
        --iter) iter="$2" ;;
        --key-derivation) derivation="$2" ;;
        --aes-backend) backend="$2" ;;
        --operation) operation="$2" ;;
        --format) format="$2" ;;
        --json) json="$2" ;;
      esac
      shift
      ;;
    --quick)
      jobs_list=2
      size=1048576
      repeats=1
      ;;
    --no-build) build=0 ;;
    --tls) tls=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    -*) die_usage "unknown option $1" ;;
    *) target="$1" ;;
  esac
  shift
done
[[ "$jobs_list" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die_usage "--jobs takes positive numbers separated by commas"
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || die_usage "--workers must be a positive number"
[[ "$size" =~ ^[1-9][0-9]*$ && "$base" =~ ^[1-9][0-9]*$ ]] || die_usage "--size and --base are positive numbers of bytes"
((size > base)) || die_usage "--size must be larger than --base"
[[ "$iter" =~ ^[1-9][0-9]*$ ]] || die_usage "--iter must be a positive number"
[[ "$derivation" == auto || "$derivation" == server ]] || die_usage "--key-derivation is auto or server"
case "$target" in
  riscv32imac-unknown-linux-musl | riscv64gc-unknown-linux-musl | aarch64-unknown-linux-musl) ;;
  *) die_usage "unknown target $target (one of ${AESD_TARGETS[*]})" ;;
esac
[[ "$operation" == encrypt || "$operation" == decrypt ]] || die_usage "--operation is encrypt or decrypt"
[[ "$format" =~ ^(openssl|age|by-name)$ ]] || die_usage "--format is openssl, age or by-name"
[[ "$format" != by-name || "$operation" == encrypt ]] || die_usage "--format by-name is encrypt only"
[[ "$backend" == software || "$backend" == vexriscv || "$backend" == zkne ]] ||
  die_usage "--aes-backend is software, vexriscv or zkne"
[[ "$backend" == software || "$target" == riscv32imac-unknown-linux-musl ]] ||
  die_usage "--aes-backend $backend is for riscv32imac-unknown-linux-musl only"

apt_install gcc jq qemu-user python3 openssl age
plugin="$(icount_plugin)"
profile="$(aesd_default_profile "$root")"
target_dir="$(bench_target_dir "$target")"
features=()
aesd_args=()
if [[ "$backend" == vexriscv ]]; then
  # The test build with the emulator, with symbols, in a directory of its own
  # (the shipped build never contains the emulator).
  target_dir="${CARGO_TARGET_DIR:-$root/target}/bench-vexriscv-emulated"
  features=(--features aesd-server/emulate-aes-insn)
  aesd_args=(--aes-backend vexriscv)
  # Symbols for the count (the emulator's handler is left out by its symbol);
  # zig's linker drops the symbol table of a build without debug information,
  # so line tables are kept too (they change no instruction).
  export CARGO_PROFILE_BOARD_STRIP=false CARGO_PROFILE_BOARD_DEBUG=line-tables-only
fi
dir="$target_dir/$target/$profile"
native="${CARGO_TARGET_DIR:-$root/target}/debug"
if ((build)); then
  bash "$root/scripts/cross/setup.sh" >&2
  config=()
  while IFS= read -r line; do config+=(--config "$line"); done < <(bench_cargo_config "$target")
  step "cargo build --profile $profile --target $target --bin aesd"
  (cd "$root" && CARGO_TARGET_DIR="$target_dir" \
    cargo "+$AESD_NIGHTLY" build --quiet --locked --workspace --bin aesd \
    --profile "$profile" --target "$target" --jobs "${AESD_JOBS:-2}" "${config[@]}" "${features[@]}")
  # AESD_NATIVE_BINS_BUILT=1: scripts/test.sh's cargo test built them.
  if [[ "${AESD_NATIVE_BINS_BUILT:-0}" != 1 ]]; then
    step "cargo build -p aesd-client -p aesd-load -p aesd-server --bin aesload --bin aescrypt --bin aesd (native)"
    (cd "$root" && cargo build --quiet --locked -p aesd-client -p aesd-load -p aesd-server \
      --bin aesload --bin aescrypt --bin aesd)
  fi
fi
for bin in "$dir/aesd" "$native/aesload" "$native/aescrypt" "$native/aesd"; do
  [[ -x "$bin" ]] || {
    echo "aesd-icount.sh: missing $bin (run without --no-build)" >&2
    exit 1
  }
done

plugin_args="threads=1"
if [[ "$backend" == vexriscv ]]; then plugin_args="$plugin_args,$(emulator_plugin_args "$dir/aesd")"; fi
qemu_cpu=""

work="$(mktemp -d)"
aesd_pid=""
trap 'stop_aesd_and_remove "$work"' EXIT

printf 'icount bench password\n' >"$work/password"
client_tls=()
if ((tls)); then
  # A CA and a certificate it signs for 127.0.0.1, as a board would have.
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/ca.key" \
    -out "$work/ca.pem" -days 2 -subj "/CN=aesd bench CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/tls.key" \
    -out "$work/tls.csr" -subj "/CN=127.0.0.1" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$work/tls.ext"
  openssl x509 -req -in "$work/tls.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial \
    -out "$work/tls.pem" -days 2 -extfile "$work/tls.ext" 2>/dev/null
  aesd_args+=(--tls-cert "$work/tls.pem" --tls-key "$work/tls.key")
  client_tls=(--tls-ca "$work/ca.pem")
fi
# The ciphertexts decryption jobs read: made by openssl (the format's oracle)
# from random plaintexts, per size and job.
ciphertexts() {
  local bytes="$1" jobs="$2" j
  for ((j = 0; j < jobs; j++)); do
    local plain="$work/plain-$bytes-$j"
    [[ -f "$plain.enc" ]] && continue
    head -c "$bytes" /dev/urandom >"$plain"
    openssl enc -aes-256-cbc -salt -pbkdf2 -iter "$iter" -pass "file:$work/password" \
      -in "$plain" -out "$plain.enc"
  done
}

# age: JOBS concurrent aescrypt jobs of BYTES, each checked against the age
# command (it decrypts ours, or made the file ours decrypts).
run_age_jobs() {
  local port="$1" jobs="$2" bytes="$3" j pids=() failed=0
  [[ -f "$work/age.key" ]] || age-keygen -o "$work/age.key" 2>/dev/null
  local recipient
  recipient="$(age-keygen -y "$work/age.key")"
  for ((j = 0; j < jobs; j++)); do
    local plain="$work/age-plain-$bytes-$j"
    [[ -f "$plain" ]] || head -c "$bytes" /dev/urandom >"$plain"
    if [[ "$operation" == encrypt ]]; then
      "$native/aescrypt" encrypt --server "127.0.0.1:$port" -r "$recipient" "${client_tls[@]}" \
        --in "$plain" --out "$work/age-out-$j" &
    else
      [[ -f "$plain.age" ]] || age -r "$recipient" -o "$plain.age" "$plain"
      "$native/aescrypt" decrypt --server "127.0.0.1:$port" --identity "$work/age.key" \
        "${client_tls[@]}" --in "$plain.age" --out "$work/age-out-$j" &
    fi
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  for ((j = 0; j < jobs; j++)); do
    local plain="$work/age-plain-$bytes-$j" check="$work/age-out-$j"
    if [[ "$operation" == encrypt ]]; then
      age -d -i "$work/age.key" -o "$work/age-check-$j" "$work/age-out-$j" || failed=1
      check="$work/age-check-$j"
    fi
    cmp -s "$plain" "$check" || {
      echo "age job $j: the result differs from its plaintext"
      failed=1
    }
  done
  return "$failed"
}

# Runs JOBS concurrent jobs of BYTES against the board's aesd on PORT.
run_jobs() {
  local port="$1" jobs="$2" bytes="$3" j pids=() failed=0
  if [[ "$format" == by-name ]]; then
    for ((j = 0; j < jobs; j++)); do
      [[ -f "$work/bn-$bytes-$j" ]] || head -c "$bytes" /dev/urandom >"$work/bn-$bytes-$j"
      "$native/aescrypt" encrypt --server "127.0.0.1:$port" --key bench --token-file "$work/token" \
        "${client_tls[@]}" -i "$work/bn-$bytes-$j" -o "$work/bn-$bytes-$j.age" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
    return "$failed"
  fi
  if [[ "$format" == age ]]; then
    run_age_jobs "$port" "$jobs" "$bytes"
    return
  fi
  if [[ "$operation" == encrypt ]]; then
    "$native/aesload" --server "127.0.0.1:$port" --clients "$jobs" --chunk "$jobs" \
      --size "$bytes" --iter "$iter" --key-derivation "$derivation" --quiet "${client_tls[@]}"
    return
  fi
  ciphertexts "$bytes" "$jobs"
  for ((j = 0; j < jobs; j++)); do
    "$native/aescrypt" --server "127.0.0.1:$port" --password-file "$work/password" \
      --iter "$iter" --key-derivation "$derivation" "${client_tls[@]}" \
      --in "$work/plain-$bytes-$j.enc" --out "$work/out-$j" decrypt &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  for ((j = 0; j < jobs; j++)); do
    cmp -s "$work/plain-$bytes-$j" "$work/out-$j" || {
      echo "decryption $j differs from its plaintext"
      failed=1
    }
  done
  return "$failed"
}

if [[ "$backend" == zkne ]]; then
  # The shipped aesd with its defaults (auto) on a CPU whose device tree
  # lists Zkne and Zknd; --print-config's last line must say zkne.
  qemu_cpu="rv32,f=false,d=false,c=true,zkne=true,zknd=true"
  mkdir -p "$work/dt-zkne/cpus/cpu@0"
  printf 'rv32imac_zicsr_zkne_zknd\0' >"$work/dt-zkne/cpus/cpu@0/riscv,isa"
  aesd_args=(--device-tree "$work/dt-zkne")
  AESD_QEMU_CPU="$qemu_cpu" "$root/scripts/cross/qemu-run.sh" "$target" "$dir/aesd" \
    "${aesd_args[@]}" --print-config >"$work/config.txt" 2>&1 || true
  tail -n 1 "$work/config.txt" | grep -q zkne || {
    echo "aesd-icount.sh: aesd did not choose zkne on a Zkne CPU:" >&2
    cat "$work/config.txt" >&2
    exit 1
  }
fi

# Prints the whole-process instruction count of the board aesd serving JOBS
# concurrent jobs of BYTES each.
count_run() {
  local jobs="$1" bytes="$2" port out="$work/count" hport="" keyring=()
  rm -f "$out"
  port="$(free_port)"
  if [[ "$format" == by-name ]]; then
    hport="$(free_port)"
    keyring=(--keyring "$work/keyring" --http-listen "127.0.0.1:$hport")
  fi
  env -i PATH="$PATH" AESD_QEMU_CPU="$qemu_cpu" \
    AESD_QEMU_EXTRA="-plugin $plugin,out=$out,$plugin_args -U AESD_QEMU_EXTRA -U AESD_QEMU_CPU -U PATH" \
    "$root/scripts/cross/qemu-run.sh" "$target" "$dir/aesd" --listen "127.0.0.1:$port" \
    --workers "$workers" --max-active "$((jobs > 2 * workers ? jobs : 2 * workers))" \
    --max-active-per-client 65536 --max-queued-per-client 64 \
    "${aesd_args[@]}" "${keyring[@]}" --log warn 2>"$work/aesd.log" &
  aesd_pid=$!
  wait_port "$port" 120
  if [[ -n "$hport" ]]; then wait_port "$hport" 60 && keyring_unseal "$hport" "$work"; fi
  if ((jobs > 0)) && ! run_jobs "$port" "$jobs" "$bytes" >"$work/load.txt" 2>&1; then
    echo "aesd-icount.sh: the $operation jobs failed against the board's aesd:" >&2
    cat "$work/load.txt" "$work/aesd.log" >&2
    exit 1
  fi
  kill -TERM "$aesd_pid"
  local status=0
  wait "$aesd_pid" || status=$?
  aesd_pid=""
  if ((status != 0)) || [[ ! -s "$out" ]]; then
    echo "aesd-icount.sh: the board's aesd exited $status without a count:" >&2
    cat "$work/aesd.log" >&2
    exit 1
  fi
  if [[ "$format" == by-name ]] && ((jobs > 0)); then
    mapfile -t files < <(seq -f "$work/bn-$bytes-%g" 0 $((jobs - 1)))
    by_name_verify "$native/aesd" "$native/aescrypt" "$work" "${files[@]}" >&2 || exit 1
  fi
  head -n1 "$out"
}

[[ "$format" != by-name ]] || keyring_make "$native/aesd" "$work"
idle=()
for _ in $(seq "$repeats"); do idle+=("$(count_run 0 0)"); done
results=()
if [[ "$format" == by-name ]]; then
  printf '\n%s, board profile, whole aesd process, %s worker(s), by name (age STREAM ChaCha20-Poly1305, file key wrapped by aes256-gcm96), AES backend %s, %s%s\n' \
    "$target" "$workers" "$backend" "$operation" "$( ((tls)) && echo ', over TLS')"
elif [[ "$format" == age ]]; then
  printf '\n%s, board profile, whole aesd process, %s worker(s), age (ChaCha20-Poly1305), %s%s\n' \
    "$target" "$workers" "$operation" "$( ((tls)) && echo ', over TLS')"
else
  printf '\n%s, board profile, whole aesd process, %s worker(s), key derivation %s, %s PBKDF2 iterations, AES backend %s, %s%s\n' \
    "$target" "$workers" "$derivation" "$iter" "$backend" "$operation" "$( ((tls)) && echo ', over TLS')"
fi
printf 'process start-up and shutdown, no job: %s instructions\n' "${idle[*]}"
printf '%-5s %-12s %-28s %-28s %-14s %-16s\n' jobs "bytes/job" "count(SIZE)" "count(BASE)" "instr/byte" "fixed per job"
IFS=',' read -r -a jobs_values <<<"$jobs_list"
for jobs in "${jobs_values[@]}"; do
  big=() small=()
  for _ in $(seq "$repeats"); do
    big+=("$(count_run "$jobs" "$size")")
    small+=("$(count_run "$jobs" "$base")")
  done
  line="$(
    python3 - "$jobs" "$size" "$base" "${big[*]}" "${small[*]}" "${idle[*]}" <<'PY'
import json, sys
jobs, size, base = map(int, sys.argv[1:4])
big = [int(x) for x in sys.argv[4].split()]
small = [int(x) for x in sys.argv[5].split()]
idle = min(int(x) for x in sys.argv[6].split())
per_byte = (min(big) - min(small)) / (jobs * (size - base))
fixed = (min(small) - idle) / jobs - per_byte * base
print(json.dumps({"jobs": jobs, "bytes_per_job": size, "base_bytes_per_job": base,
                  "counts": big, "base_counts": small,
                  "instructions_per_byte": round(per_byte, 1),
                  "fixed_instructions_per_job": round(fixed)}))
PY
  )"
  results+=("$line")
  jq -r '"\(.jobs)\t\(.bytes_per_job)\t\(.counts | map(tostring) | join(" "))\t\(.base_counts | map(tostring) | join(" "))\t\(.instructions_per_byte)\t\(.fixed_instructions_per_job)"' <<<"$line" |
    awk -F'\t' '{ printf "%-5s %-12s %-28s %-28s %-14s %-16s\n", $1, $2, $3, $4, $5, $6 }'
done
if [[ -n "$json" ]]; then
  printf '%s\n' "${results[@]}" | jq -s --arg target "$target" --arg derivation "$derivation" --arg backend "$backend" --arg operation "$operation" \
    --arg format "$format" --argjson workers "$workers" --argjson iter "$iter" --argjson tls "$tls" \
    --argjson idle "$(printf '%s\n' "${idle[@]}" | jq -s 'min')" \
    '{target: $target, format: $format, operation: $operation, aes_backend: $backend, workers: $workers, key_derivation: $derivation, iterations: $iter,
      tls: ($tls == 1), idle_process_instructions: $idle, runs: .}' >"$json"
  echo "wrote $json"
fi
