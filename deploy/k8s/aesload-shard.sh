#!/bin/sh
# The entry point of an aesload shard's pod (deploy/k8s/job.yaml): runs
# `aesload --shard $JOB_COMPLETION_INDEX/$SHARDS` with the ConfigMap's
# servers, arguments and start time, then prints its --json document on
# stdout between two marker lines, for collect.sh to find in `kubectl logs`.
# The report and progress go to stderr. Exits with aesload's status.
set -eu
: "${JOB_COMPLETION_INDEX:?not in an Indexed Job}"
: "${SHARDS:?set SHARDS to the completions of the Job}"
: "${SERVERS:?set SERVERS in the ConfigMap}"
json="${WORK_DIR:-/work}/shard-$JOB_COMPLETION_INDEX.json"
set -- --server "$SERVERS" --shard "$JOB_COMPLETION_INDEX/$SHARDS" --json "$json" --quiet
if [ -n "${START_AT:-}" ]; then
  set -- "$@" --start-at "$START_AT"
fi
status=0
# AESLOAD_ARGS is a list of words on purpose (no quoting inside it).
# shellcheck disable=SC2086
aesload ${AESLOAD_ARGS:-} "$@" >&2 || status=$?
if [ -s "$json" ]; then
  echo "----- BEGIN AESLOAD SHARD $JOB_COMPLETION_INDEX/$SHARDS -----"
  cat "$json"
  echo # the document has no final newline; the marker needs its own line
  echo "----- END AESLOAD SHARD $JOB_COMPLETION_INDEX/$SHARDS -----"
fi
exit "$status"
