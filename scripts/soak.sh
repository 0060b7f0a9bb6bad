#!/usr/bin/env bash
# Soak test (not part of the default CI run): a release aesd on 127.0.0.1
# under steady open-loop load from aesload for a long time, with the
# server's resident memory (VmRSS) and open file descriptors sampled every
# few seconds. Passes only when
#   * every transfer verified (aesload's exit status),
#   * RSS is flat: the least-squares slope over the run after the warm-up
#     is under --max-slope KiB per minute,
#   * the fd count is flat: after the load ends, aesd holds no more fds
#     than before it started (no leaked sockets).
#
#   scripts/soak.sh                        # 10 minutes
#   scripts/soak.sh --minutes 1 --rate 10  # a quick look
#
# Options:
#   --minutes N      load duration [10]
#   --rate R         new clients per second (open loop) [20]
#   --size SIZE      file size per client (aesload syntax) [1M]
#   --warmup SECS    samples left out of the slope at the start [60, or a
#                    fifth of the run if that is shorter]
#   --max-slope KIB  allowed RSS growth, KiB per minute [64]
#   --interval SECS  sampling interval [5]
#   --out DIR        where samples.csv, aesload.json and aesd.log go
#                    [target/soak]
#   -h, --help       this text
#
# Exit status: 0 flat and all verified; 1 a check failed (the message says
# which, with the figures); 2 bad usage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

minutes=10
rate=20
size=1M
warmup=""
max_slope=64
interval=5
out="$root/target/soak"
while (($#)); do
  case "$1" in
    --minutes)
      minutes="${2:?}"
      shift
      ;;
    --rate)
      rate="${2:?}"
      shift
      ;;
    --size)
      size="${2:?}"
      shift
      ;;
    --warmup)
      warmup="${2:?}"
      shift
      ;;
    --max-slope)
      max_slope="${2:?}"
      shift
      ;;
    --interval)
      interval="${2:?}"
      shift
      ;;
    --out)
      out="${2:?}"
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    *)
      echo "soak.sh: unknown option $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
for value in "$minutes" "$interval" "$max_slope"; do
  if ! [[ "$value" =~ ^[1-9][0-9]*$ ]]; then
    echo "soak.sh: --minutes, --interval and --max-slope must be positive whole numbers" >&2
    exit 2
  fi
done
duration=$((minutes * 60))
if [[ -z "$warmup" ]]; then warmup=$((duration / 5 < 60 ? duration / 5 : 60)); fi
[[ "$warmup" =~ ^[0-9]+$ ]] || {
  echo "soak.sh: --warmup must be whole seconds" >&2
  exit 2
}

step "soak: build (release)"
(cd "$root" && cargo build --release --locked --quiet -p aesd-server -p aesd-client -p aesd-load)
mkdir -p "$out"
aesd="$root/target/release/aesd"
aesload="$root/target/release/aesload"

port_file="$out/aesd.log"
"$aesd" --listen 127.0.0.1:0 --log info --max-queue 100000 --max-active-per-client 65536 --max-queued-per-client 100000 2>"$port_file" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
addr=""
for _ in $(seq 100); do
  addr="$(grep -o 'listen=127\.0\.0\.1:[0-9]*' "$port_file" | head -1 | cut -d= -f2 || true)"
  [[ -n "$addr" ]] && break
  sleep 0.1
done
[[ -n "$addr" ]] || {
  echo "soak.sh: aesd did not start; its log:" >&2
  cat "$port_file" >&2
  exit 1
}

sample() { # seconds-since-start rss-kib fds
  local rss fds
  rss="$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")"
  fds="$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)"
  echo "$1,$rss,$fds"
}
start=$SECONDS
fds_before="$(sample 0 | cut -d, -f3)"
echo "t_s,rss_kib,fds" >"$out/samples.csv"
step "soak: ${minutes} min of $rate clients/s × $size against aesd $addr (pid $pid)"
"$aesload" --server "$addr" --rate "$rate" --duration "${duration}s" --size "$size" \
  --iter 1000 --quiet --json "$out/aesload.json" >"$out/aesload.txt" 2>&1 &
load=$!
while kill -0 "$load" 2>/dev/null; do
  sample $((SECONDS - start)) >>"$out/samples.csv"
  sleep "$interval"
done
load_status=0
wait "$load" || load_status=$?
sleep 1
fds_after="$(sample 0 | cut -d, -f3)"

read -r samples slope first last peak < <(awk -F, -v warmup="$warmup" '
  NR > 1 && $1 >= warmup { n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2
    if (n == 1) first = $2; last = $2; if ($2 > peak) peak = $2 }
  END { d = n * sxx - sx * sx; s = (n > 1 && d > 0) ? (n * sxy - sx * sy) / d * 60 : 0
        printf "%d %.1f %d %d %d\n", n, s, first, last, peak }' "$out/samples.csv")

echo "soak: $(grep -E '^(Transfers Verified|Avg Bytes per Second|Failed)' "$out/aesload.txt" | tr -s ' ' | paste -sd ';' -)"
echo "soak: RSS after warm-up: first ${first} KiB, last ${last} KiB, peak ${peak} KiB; slope ${slope} KiB/min over ${samples} samples (limit ${max_slope})"
echo "soak: fds: ${fds_before} before the load, ${fds_after} after it"
echo "soak: samples in $out/samples.csv"
status=0
if ((load_status != 0)); then
  echo "soak.sh: FAILED: aesload exited $load_status (a transfer failed or did not verify); see $out/aesload.txt" >&2
  status=1
fi
if ((samples < 3)); then
  echo "soak.sh: FAILED: only $samples samples after the warm-up; run longer" >&2
  status=1
elif awk -v s="$slope" -v m="$max_slope" 'BEGIN { exit !(s > m || -s > m) }'; then
  echo "soak.sh: FAILED: RSS is not flat ($slope KiB/min, limit $max_slope)" >&2
  status=1
fi
if ((fds_after > fds_before)); then
  echo "soak.sh: FAILED: aesd holds $fds_after fds after the load, $fds_before before" >&2
  status=1
fi
exit "$status"
