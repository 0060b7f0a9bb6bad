#!/usr/bin/env bash
# One aesload run split into N shards (docs/sharded-load.md), as N processes
# on this machine, each connecting from its own loopback address
# (127.0.0.2, 127.0.0.3, ...: aesload --bind), started together
# (--start-at), then merged (aesload merge); and the same run unsharded,
# with the same seed, for comparison. Against one aesd it starts, or
# against N boards behind HAProxy (--fleet: as scripts/fleet.sh builds it).
# Checks that
#   * every shard verified every transfer (exit status 0),
#   * the merge has exactly the unsharded run's jobs: the same clients, the
#     same sizes, the same totals of transfers, verified transfers and bytes,
#   * with --fleet, every board served jobs,
#   * aesd counted each shard as its own client: its "job done" log lines
#     name each shard's address once per transfer of that shard, and no
#     other address (through HAProxy too, which passes the client's
#     address with PROXY v2),
# and prints the merged table beside the unsharded one.
#
#   scripts/shards.sh                                 # 3 shards, --suite large --scale 0.01
#   scripts/shards.sh --shards 4 -- --suite basic3 --scale 0.05
#   scripts/shards.sh --fleet 3 -- --suite large --scale 0.02
#   scripts/shards.sh --quick --profile debug         # CI: small, < 1 minute
#
# Options:
#   --shards N       aesload processes [3]
#   --fleet B        B aesd behind HAProxy instead of one aesd
#   --quick          --suite basic3 --scale 0.01 (CI)
#   --out DIR        keep the JSON files and logs here [a temporary directory,
#                    removed at the end unless a check failed]
#   --profile P      release or debug binaries [release]
#   --no-build       use the binaries as they are (no cargo build)
#   -- ARGS...       aesload's suite arguments [--suite large --scale 0.01];
#                    --seed 5 is added unless given
#   -h, --help       this text
#
# Exit status: 0 all checks passed; 1 a check failed (the message says
# which); 2 bad usage or a part did not start.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

shards=3
fleet=0
out=""
build=1
profile=release
load_args=(--suite large --scale 0.01)
while (($#)); do
  case "$1" in
    --shards)
      shards="${2:?--shards needs a number}"
      shift
      ;;
    --fleet)
      fleet="${2:?--fleet needs a number of boards}"
      shift
      ;;
    --quick) load_args=(--suite basic3 --scale 0.01) ;;
    --out)
      out="${2:?--out needs a directory}"
      shift
      ;;
    --profile)
      profile="${2:?--profile needs release or debug}"
      shift
      ;;
    --no-build) build=0 ;;
    --)
      shift
      load_args=("$@")
      break
      ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    *)
      echo "shards.sh: unknown option '$1' (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
if ! [[ "$shards" =~ ^[1-9][0-9]?$ ]] || ((shards > 50)); then
  echo "shards.sh: --shards must be 1 to 50" >&2
  exit 2
fi
if ! [[ "$fleet" =~ ^[0-9]+$ ]] || ((fleet > 20)); then
  echo "shards.sh: --fleet must be 1 to 20 boards" >&2
  exit 2
fi
[[ " ${load_args[*]} " == *" --seed "* ]] || load_args+=(--seed 5)

host_bins shards.sh "$profile" "$build" "aesd-server aesd-load" aesd aesload
aesd="$HOST_BIN/aesd"
aesload="$HOST_BIN/aesload"
((fleet == 0)) || apt_install haproxy

keep=1
if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/aesd-shards.XXXXXX")"
  keep=0
fi
mkdir -p "$out"
pids=()
cleanup() {
  ((${#pids[@]} == 0)) || stop_pids "${pids[@]}"
  if ((keep)); then echo "shards: files and logs in $out" >&2; else rm -rf "$out"; fi
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# The shards' source addresses: 127.0.0.2 up, or 127.0.0.3 up behind
# HAProxy, whose own source address towards the boards is 127.0.0.2.
first_host=2
((fleet == 0)) || first_host=3
address() { echo "127.0.0.$((first_host + $1))"; }

if ((fleet == 0)); then
  step "shards: one aesd"
  port="$(free_port)"
  "$aesd" --listen "127.0.0.1:$port" --temperature off --log info 2>"$out/aesd.log" &
  pids+=("$!")
  wait_port "$port" 20
  server="127.0.0.1:$port"
else
  step "shards: $fleet aesd behind HAProxy"
  ports=()
  for i in $(seq "$fleet"); do
    ports+=("$(free_port)")
    "$aesd" --listen "127.0.0.1:${ports[i - 1]}" --trusted-proxies 127.0.0.2/32 --workers 1 \
      --temperature off --log info 2>"$out/board$i.log" &
    pids+=("$!")
  done
  for port in "${ports[@]}"; do wait_port "$port" 20; done
  front="$(free_port)"
  {
    # The shipped file, as scripts/fleet.sh adapts it: loopback, these
    # boards, connecting to them from 127.0.0.2.
    sed -e "s/^\( *bind \):7878/\1127.0.0.1:$front/" \
      -e '/^ *#\{0,1\} *server board/d' \
      -e "s/^\( *default-server .*\)inter 2s rise 2/\1source 127.0.0.2 inter 500ms rise 1/" \
      "$root/deploy/haproxy/haproxy.cfg"
    for i in $(seq "$fleet"); do echo "    server board$i 127.0.0.1:${ports[i - 1]}"; done
  } >"$out/haproxy.cfg"
  haproxy -c -q -f "$out/haproxy.cfg"
  haproxy -db -f "$out/haproxy.cfg" 2>"$out/haproxy.log" &
  pids+=("$!")
  wait_port "$front" 20
  # Until every board passes its health check (a hello), at most 10 s.
  sleep 2
  server="127.0.0.1:$front"
fi

step "shards: $shards aesload processes from $(address 0) to $(address $((shards - 1))): ${load_args[*]}"
start_at=$(($(date +%s) + 2))
shard_pids=()
for i in $(seq 0 $((shards - 1))); do
  "$aesload" --server "$server" "${load_args[@]}" --shard "$i/$shards" --bind "$(address "$i")" \
    --start-at "$start_at" --json "$out/shard-$i.json" --quiet >"$out/shard-$i.txt" 2>&1 &
  shard_pids+=("$!")
done
failed=0
for i in $(seq 0 $((shards - 1))); do
  if ! wait "${shard_pids[i]}"; then
    echo "shards.sh: shard $i/$shards failed; its output:" >&2
    tail -20 "$out/shard-$i.txt" >&2
    failed=1
  fi
done
((failed == 0)) || {
  keep=1
  exit 1
}

step "shards: aesload merge"
files=()
for i in $(seq 0 $((shards - 1))); do files+=("$out/shard-$i.json"); done
"$aesload" merge "${files[@]}" --json "$out/merged.json" | tee "$out/merged.txt"

step "shards: the same run unsharded (seed and suite alike, from 127.0.0.1)"
"$aesload" --server "$server" "${load_args[@]}" --json "$out/whole.json" --quiet | tee "$out/whole.txt"

step "shards: merged against unsharded"
logs=("$out"/aesd.log)
((fleet == 0)) || logs=("$out"/board*.log)
if ! python3 - "$out" "$shards" "$(address 0)" "${logs[@]}" <<'PY'; then
import ipaddress, json, re, sys
from collections import Counter

out, shards, first, logs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
load = lambda name: json.load(open(f"{out}/{name}.json"))
merged, whole = load("merged"), load("whole")
failures = []
def same(what, a, b):
    print(f"{what:<28} merged {a!s:>14}   unsharded {b!s:>14}")
    if a != b:
        failures.append(f"{what}: merged {a}, unsharded {b}")
for key in ("transfers", "verified", "failed", "bytes_processed"):
    same(key, merged["summary"][key], whole["summary"][key])
jobs = lambda doc: [(t["suite"], t["client"], t["bytes"]) for t in doc["transfers"]]
same("jobs (suite, client, bytes)", len(jobs(merged)), len(jobs(whole)))
if jobs(merged) != jobs(whole):
    failures.append("the merged run's jobs are not the unsharded run's")
for suite_m, suite_w in zip(merged["suites"], whole["suites"]):
    for name in ("throughput_bytes_per_sec", "duration_s"):
        print(f"{suite_m['name'] + ' ' + name:<28} merged {suite_m['summary'][name]:>14.3f}   "
              f"unsharded {suite_w['summary'][name]:>14.3f}")
    for q in ("p50", "p90", "p99", "max"):
        print(f"{suite_m['name'] + ' total ' + q + ' (s)':<28} merged {suite_m['summary']['total_time_s'][q]:>14.3f}   "
              f"unsharded {suite_w['summary']['total_time_s'][q]:>14.3f}")
# aesd counted each shard's jobs under its own address.
counts = Counter()
per_board = []
for log in logs:
    jobs_here = 0
    for line in open(log, errors="replace"):
        found = re.search(r"job done.*peer=\[?([0-9.]+)\]?:", line)
        if found:
            counts[found.group(1)] += 1
            jobs_here += 1
    per_board.append(jobs_here)
if len(logs) > 1:
    print("jobs per board:", ", ".join(f"board{i + 1} {n}" for i, n in enumerate(per_board)))
    if 0 in per_board:
        failures.append("a board served no job")
base = ipaddress.ip_address(first)
expected = Counter()
for i in range(shards):
    doc = json.load(open(f"{out}/shard-{i}.json"))
    expected[str(base + i)] = doc["summary"]["verified"]
expected["127.0.0.1"] = whole["summary"]["verified"]
print("jobs per client address (aesd's log):", ", ".join(f"{a} {n}" for a, n in sorted(counts.items())))
if counts != expected:
    failures.append(f"aesd's jobs per address {dict(counts)}, expected {dict(expected)}")
for failure in failures:
    print(f"shards.sh: {failure}", file=sys.stderr)
sys.exit(1 if failures else 0)
PY
  keep=1
  echo "shards: FAILED" >&2
  exit 1
fi
echo "shards: ok: $shards shards merged into the unsharded run's jobs and bytes, each counted under its own address" >&2
