#!/usr/bin/env bash
# Collects the --json documents of an aesload Job's shards from their pods'
# logs (between the marker lines deploy/k8s/aesload-shard.sh prints) and
# merges them with `aesload merge` (docs/sharded-load.md).
#
#   deploy/k8s/collect.sh                       # Job "aesload", current namespace
#   deploy/k8s/collect.sh --job aesload --namespace load --out results
#   deploy/k8s/collect.sh --logs pod0.log pod1.log pod2.log   # saved logs, no cluster
#
# Options:
#   --job NAME        the Job [aesload]
#   --namespace NS    its namespace [kubectl's current one]
#   --out DIR         where shard-I.json and merged.json go [aesload-results]
#   --timeout T       how long to wait for the Job to complete [30m]
#   --aesload PATH    the aesload binary [aesload on PATH]
#   --logs FILE...    read these saved pod logs instead of asking kubectl
#   -h, --help        this text
#
# Exit status: 0 merged; 1 the Job failed, a shard's document is missing,
# or the merge refused the documents (aesload says why); 2 bad usage.
set -euo pipefail

job=aesload
namespace=()
out="aesload-results"
timeout=30m
aesload=aesload
logs=()
while (($#)); do
  case "$1" in
    --job)
      job="${2:?--job needs a name}"
      shift
      ;;
    --namespace)
      namespace=(--namespace "${2:?--namespace needs a name}")
      shift
      ;;
    --out)
      out="${2:?--out needs a directory}"
      shift
      ;;
    --timeout)
      timeout="${2:?--timeout needs a duration}"
      shift
      ;;
    --aesload)
      aesload="${2:?--aesload needs a path}"
      shift
      ;;
    --logs)
      shift
      logs=("$@")
      break
      ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    *)
      echo "collect.sh: unknown option '$1' (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
mkdir -p "$out"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if ((${#logs[@]} == 0)); then
  echo "collect: waiting for job/$job to complete (at most $timeout)" >&2
  if ! kubectl "${namespace[@]}" wait --for=condition=complete "job/$job" --timeout="$timeout"; then
    echo "collect.sh: job/$job did not complete; its pods:" >&2
    kubectl "${namespace[@]}" get pods -l "job-name=$job" >&2 || true
    exit 1
  fi
  mapfile -t pods < <(kubectl "${namespace[@]}" get pods -l "job-name=$job" \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
  for pod in "${pods[@]}"; do
    kubectl "${namespace[@]}" logs "$pod" >"$tmp/$pod.log"
    logs+=("$tmp/$pod.log")
  done
fi

# Each log holds one document between
#   ----- BEGIN AESLOAD SHARD I/N -----   and   ----- END AESLOAD SHARD I/N -----
rm -f "$out"/shard-*.json
for log in "${logs[@]}"; do
  awk -v out="$out" '
    /^----- BEGIN AESLOAD SHARD [0-9]+\/[0-9]+ -----$/ {
      split($5, shard, "/"); file = out "/shard-" shard[1] ".json"; printf "" > file; next
    }
    /^----- END AESLOAD SHARD / { close(file); file = ""; next }
    file != "" { print >> file }
  ' "$log"
done
shopt -s nullglob
files=("$out"/shard-*.json)
if ((${#files[@]} == 0)); then
  echo "collect.sh: no shard document in the logs (did aesload fail before writing it?)" >&2
  exit 1
fi
echo "collect: ${#files[@]} shard documents in $out" >&2
"$aesload" merge "${files[@]}" --json "$out/merged.json"
