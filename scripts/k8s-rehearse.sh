#!/usr/bin/env bash
# Rehearses the Kubernetes Job of deploy/k8s/ without a cluster: N "pods"
# run the Job's entry point (deploy/k8s/aesload-shard.sh) as processes, with
# the variables Kubernetes and the ConfigMap would give them
# (JOB_COMPLETION_INDEX, SHARDS, SERVERS, AESLOAD_ARGS, START_AT), against
# one aesd; their logs (stdout and stderr together, as `kubectl logs` shows
# them) go to deploy/k8s/collect.sh --logs, which extracts the documents and
# merges them. Checks that the merged run verified every transfer of the
# suite.
#
#   bash scripts/k8s-rehearse.sh                       # 3 pods, basic3 at scale 0.01
#   bash scripts/k8s-rehearse.sh --pods 2 --profile debug --no-build
#
# Options:
#   --pods N       pods (shards) [3]
#   --profile P    release or debug binaries [release]
#   --no-build     use the binaries as they are
#   -h, --help     this text
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

pods=3
profile=release
build=1
while (($#)); do
  case "$1" in
    --pods)
      pods="${2:?--pods needs a number}"
      shift
      ;;
    --profile)
      profile="${2:?--profile needs release or debug}"
      shift
      ;;
    --no-build) build=0 ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    *)
      echo "k8s-rehearse.sh: unknown option '$1' (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
if ! [[ "$pods" =~ ^[1-9][0-9]?$ ]]; then
  echo "k8s-rehearse.sh: --pods must be 1 to 99" >&2
  exit 2
fi
host_bins k8s-rehearse.sh "$profile" "$build" "aesd-server aesd-load" aesd aesload
bin="$HOST_BIN"

out="$(mktemp -d "${TMPDIR:-/tmp}/aesd-k8s.XXXXXX")"
pids=()
cleanup() {
  ((${#pids[@]} == 0)) || stop_pids "${pids[@]}"
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

port="$(free_port)"
"$bin/aesd" --listen "127.0.0.1:$port" --temperature off 2>"$out/aesd.log" &
pids+=("$!")
wait_port "$port" 20

step "k8s rehearsal: $pods pods of deploy/k8s/aesload-shard.sh, then deploy/k8s/collect.sh --logs"
start_at=$(($(date +%s) + 2))
pod_pids=()
for i in $(seq 0 $((pods - 1))); do
  mkdir -p "$out/pod-$i"
  PATH="$bin:$PATH" JOB_COMPLETION_INDEX="$i" SHARDS="$pods" SERVERS="127.0.0.1:$port" \
    AESLOAD_ARGS="--suite basic3 --scale 0.01 --seed 5" START_AT="$start_at" WORK_DIR="$out/pod-$i" \
    sh "$root/deploy/k8s/aesload-shard.sh" >"$out/pod-$i.log" 2>&1 &
  pod_pids+=("$!")
done
for i in $(seq 0 $((pods - 1))); do
  wait "${pod_pids[i]}" || {
    echo "k8s-rehearse.sh: pod $i failed; its log:" >&2
    tail -20 "$out/pod-$i.log" >&2
    exit 1
  }
done
logs=()
for i in $(seq 0 $((pods - 1))); do logs+=("$out/pod-$i.log"); done
bash "$root/deploy/k8s/collect.sh" --out "$out/results" --aesload "$bin/aesload" --logs "${logs[@]}" >"$out/merge.txt"
verified="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"]["verified"])' "$out/results/merged.json")"
if [[ "$verified" != 20 ]]; then
  echo "k8s-rehearse.sh: the merged run verified $verified of basic3's 20 transfers" >&2
  cat "$out/merge.txt" >&2
  exit 1
fi
echo "k8s rehearsal: ok: $pods pods' documents collected from their logs and merged, 20 / 20 verified" >&2
