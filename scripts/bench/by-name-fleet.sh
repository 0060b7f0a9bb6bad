#!/usr/bin/env bash
# By-name jobs through a fleet of aesd boards on this host, the keyring in etcd
# beside local keyrings, side by side in one run (issue 40's throughput goal):
#   etcd   N release aesd, --keyring etcd://... on one etcd member (Debian's
#          etcd, scripts/etcd.sh): sys/init on board 1, every board unsealed
#          with the share, the key `bench` created on board 1 and waited for
#          on every board (their watch loads it);
#   local  N release aesd, each with its own keyring in memory (--dev, root
#          token `root`) and its own key `bench`.
# Each run is aesload --key bench over the boards (--server b1,...,bN: client
# i goes to board i mod N, its verifying decryption to the same board), every
# result decrypted by name and compared; figure: aesload's throughput (MB/s
# of verified input). The modes alternate, REPEAT runs each. A benchmark: it
# prints figures and gates nothing.
#
# Usage: bash scripts/bench/by-name-fleet.sh [--boards N] [--suite S] [--scale F] [--repeat R] [--no-build]
#   --boards N   aesd instances (default 3)
#   --suite S    aesload suite (default basic2)
#   --scale F    aesload --scale (default 0.2)
#   --repeat R   runs per mode (default 3)
#   --no-build   use target/release/aesd and aesload as they are
# Exit status: 0 done; 1 a build, start or run failed; 2 bad usage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

boards=3
suite=basic2
scale=0.2
repeat=3
build=1
while (($#)); do
  case "$1" in
    --boards | --suite | --scale | --repeat)
      (($# >= 2)) || {
        echo "by-name-fleet.sh: $1 needs a value (try --help)" >&2
        exit 2
      }
      case "$1" in
        --boards) boards="$2" ;;
        --suite) suite="$2" ;;
        --scale) scale="$2" ;;
        --repeat) repeat="$2" ;;
      esac
      shift
      ;;
    --no-build) build=0 ;;
    -h | --help)
      sed -n '2,22s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "by-name-fleet.sh: unknown argument $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
[[ "$boards" =~ ^[1-9][0-9]?$ && "$repeat" =~ ^[1-9][0-9]*$ ]] ||
  {
    echo "by-name-fleet.sh: --boards and --repeat are positive numbers" >&2
    exit 2
  }

apt_install etcd-server etcd-client curl jq
bin="${CARGO_TARGET_DIR:-$root/target}/release"
if ((build)); then
  step "cargo build --release --bin aesd --bin aesload"
  (cd "$root" && cargo build --quiet --locked --release -p aesd-server -p aesd-load \
    --bin aesd --bin aesload)
fi
for program in aesd aesload; do
  [[ -x "$bin/$program" ]] || {
    echo "by-name-fleet.sh: no $bin/$program (run without --no-build)" >&2
    exit 1
  }
done
# shellcheck source=scripts/etcd.sh
. "$root/scripts/etcd.sh"

work="$(mktemp -d)"
pids=()
cleanup() {
  if ((${#pids[@]})); then stop_pids "${pids[@]}"; fi
  rm -rf "$work"
}
trap cleanup EXIT

# Starts the boards (extra aesd arguments: "$@"); sets servers and https.
start_boards() {
  local b port hport
  servers=()
  https=()
  for ((b = 1; b <= boards; b++)); do
    port="$(free_port)"
    hport="$(free_port)"
    "$bin/aesd" --listen "127.0.0.1:$port" --http-listen "127.0.0.1:$hport" --log warn "$@" \
      >"$work/board$b.out" 2>"$work/board$b.log" &
    pids+=("$!")
    wait_port "$port" 30
    wait_port "$hport" 30
    servers+=("127.0.0.1:$port")
    https+=("http://127.0.0.1:$hport/v1")
  done
}

# One aesload run over the boards with the token in $work/token: its
# throughput in MB/s, in $work/rate.
load() {
  local servers_list
  servers_list="$(
    IFS=,
    echo "${servers[*]}"
  )"
  "$bin/aesload" --server "$servers_list" --key bench --token-file "$work/token" \
    --suite "$suite" --scale "$scale" --quiet --json "$work/run.json" >"$work/load.txt" 2>&1 || {
    echo "by-name-fleet.sh: aesload failed:" >&2
    cat "$work/load.txt" >&2
    return 1
  }
  jq -r '.summary.throughput_bytes_per_sec / 1e6 | . * 100 | round / 100' "$work/run.json" >"$work/rate"
}

stop_all() {
  stop_pids "${pids[@]}"
  pids=()
}

run_etcd() {
  local dir="$work/etcd-$1" answer share token b h
  mkdir -p "$dir"
  etcd_start "$dir" 1
  start_boards --keyring "etcd://$ETCD_ENDPOINTS/aesd/bench"
  answer="$(curl -fsS -X PUT -d '{"secret_shares":1,"secret_threshold":1}' "${https[0]}/sys/init")"
  share="$(jq -r '.keys_base64[0]' <<<"$answer")"
  token="$(jq -r .root_token <<<"$answer")"
  (
    umask 077
    echo "$token" >"$work/token"
  )
  for h in "${https[@]}"; do
    for _ in $(seq 50); do
      [[ "$(curl -fsS -X PUT -d "{\"key\":\"$share\"}" "$h/sys/unseal" | jq -r .sealed)" == false ]] && break
      sleep 0.1
    done
  done
  curl -fsS -X POST -H "X-Vault-Token: $token" "${https[0]}/transit/keys/bench" >/dev/null
  for h in "${https[@]}"; do
    for b in $(seq 50); do
      curl -fsS -H "X-Vault-Token: $token" "$h/transit/keys/bench" >/dev/null 2>&1 && break
      ((b < 50)) || {
        echo "by-name-fleet.sh: $h never saw the key" >&2
        return 1
      }
      sleep 0.1
    done
  done
  load
  stop_all
}

run_local() {
  local h
  start_boards --dev --dev-root-token-id root
  (
    umask 077
    echo root >"$work/token"
  )
  for h in "${https[@]}"; do
    curl -fsS -X POST -H 'X-Vault-Token: root' "$h/transit/keys/bench" >/dev/null
  done
  load
  stop_all
}

step "$boards boards, aesload --suite $suite --scale $scale --key bench, $repeat runs per mode, alternating"
printf '%-5s %18s %18s\n' run "etcd (MB/s)" "local (MB/s)"
etcd_rates=()
local_rates=()
for ((r = 1; r <= repeat; r++)); do
  run_etcd "$r"
  etcd_rates+=("$(cat "$work/rate")")
  run_local
  local_rates+=("$(cat "$work/rate")")
  printf '%-5s %18s %18s\n' "$r" "${etcd_rates[-1]}" "${local_rates[-1]}"
done
python3 - "${etcd_rates[*]}" "${local_rates[*]}" <<'PY'
import statistics, sys
etcd = [float(x) for x in sys.argv[1].split()]
local = [float(x) for x in sys.argv[2].split()]
print(f"median: etcd {statistics.median(etcd):.2f} MB/s, local {statistics.median(local):.2f} MB/s, "
      f"etcd / local {statistics.median(etcd) / statistics.median(local):.3f}")
PY
