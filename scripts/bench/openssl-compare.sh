#!/usr/bin/env bash
# Compares aesd's AES-256-CBC encryption with `openssl speed` on this machine,
# in one go: the criterion bench `aes256cbc_encrypt/16384` (quick mode: the
# server's EncryptStream::update on 16 KiB chunks, key derived beforehand)
# and `openssl speed -evp aes-256-cbc -bytes 16384`. Prints both figures in
# bytes/s (MB = 10^6 bytes) and the ratio ours / openssl.
#
# Both are read from machine-readable output: criterion's
# benchmark.json + estimates.json (mean time per chunk; written to a
# temporary CRITERION_HOME) and openssl's `-mr` lines. openssl runs with
# `-elapsed` (wall-clock time, as criterion measures) rather than its default
# of CPU user time, so both figures mean the same thing on a busy machine.
#
# Usage: bash scripts/bench/openssl-compare.sh [-h|--help]
# Environment: OPENSSL_SECONDS (default 3), CARGO_BENCH_ARGS (extra
# criterion flags, default `--quick`).
# Exit status: 0 done; 1 the bench or openssl failed; 2 bad usage.
set -euo pipefail

case "${1:-}" in
  "") ;;
  -h | --help)
    sed -n '2,20s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
  *)
    echo "openssl-compare.sh: unknown argument $1 (try --help)" >&2
    exit 2
    ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$root/scripts/lib.sh"

size=16384
seconds="${OPENSSL_SECONDS:-3}"
read -r -a bench_args <<<"${CARGO_BENCH_ARGS:---quick}"

command -v jq >/dev/null || apt_install jq
command -v openssl >/dev/null || apt_install openssl

criterion_home="$(mktemp -d)"
trap 'rm -rf "$criterion_home"' EXIT

step "cargo bench -p aesd-bench -- ${bench_args[*]} --exact aes256cbc_encrypt/$size"
(cd "$root" && CRITERION_HOME="$criterion_home" \
  cargo bench -p aesd-bench --bench throughput -- "${bench_args[@]}" --exact "aes256cbc_encrypt/$size") >&2

results="$criterion_home/aes256cbc_encrypt/$size/new"
ours="$(jq -n \
  --slurpfile bench "$results/benchmark.json" \
  --slurpfile est "$results/estimates.json" \
  '$bench[0].throughput.Bytes / ($est[0].mean.point_estimate / 1e9)')"

step "openssl speed -elapsed -evp aes-256-cbc -bytes $size -seconds $seconds"
theirs="$(openssl speed -mr -elapsed -evp aes-256-cbc -bytes "$size" -seconds "$seconds" 2>/dev/null |
  awk -F: '$1 == "+F" && $3 == "AES-256-CBC" { print $4 }')"
[ -n "$theirs" ] || {
  echo "no AES-256-CBC figure in openssl speed's output" >&2
  exit 1
}

awk -v ours="$ours" -v theirs="$theirs" -v size="$size" 'BEGIN {
  printf "aesd EncryptStream::update, %d B chunks:   %10.1f MB/s\n", size, ours / 1e6
  printf "openssl speed -evp aes-256-cbc, %d B:   %10.1f MB/s\n", size, theirs / 1e6
  printf "ratio aesd / openssl:                        %10.2f\n", ours / theirs
}'
