#!/usr/bin/env bash
# A TLS load run as a new user makes it (issue 37): a certificate from
# `aesd --tls-self-signed`, then every study suite through aesload's
# embedded aesd speaking TLS with its default TLS limits (4 handshakes in
# progress per client, tls-handshake-rate 600 a minute), all from 127.0.0.1.
# Checks that aesload exits 0 (every transfer verified) and that its JSON
# has every suite, each with every planned transfer verified.
#
#   scripts/tls-load.sh                      # --suite all --scale 0.001, debug binaries
#   scripts/tls-load.sh --profile release -- --suite basic2 --scale 0.1
#
# Options:
#   --profile P   release or debug binaries [debug]
#   --no-build    use the binaries as they are (no cargo build)
#   -- ARGS...    aesload's suite arguments [--suite all --scale 0.001]
#   -h, --help    this text
#
# Exit status: 0 every suite verified; 1 a check failed (the message says
# which); 2 bad usage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

profile=debug
build=1
suite_args=(--suite all --scale 0.001)
while [ $# -gt 0 ]; do
  case "$1" in
    --profile)
      profile="${2:?--profile needs release or debug}"
      shift 2
      ;;
    --no-build)
      build=0
      shift
      ;;
    --)
      shift
      suite_args=("$@")
      break
      ;;
    -h | --help)
      sed -n '2,19p' "$0"
      exit 0
      ;;
    *)
      echo "tls-load.sh: unknown option $1 (try --help)" >&2
      exit 2
      ;;
  esac
done

host_bins tls-load.sh "$profile" "$build" "aesd-server aesd-load" aesd aesload

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$HOST_BIN/aesd" --tls-self-signed "$work/tls" >/dev/null
status=0
"$HOST_BIN/aesload" --embedded-tls-cert "$work/tls/aesd-cert.pem" \
  --embedded-tls-key "$work/tls/aesd-key.pem" --tls-ca "$work/tls/aesd-cert.pem" \
  --json "$work/run.json" --quiet "${suite_args[@]}" || status=$?
if [ "$status" -ne 0 ]; then
  echo "tls-load.sh: aesload exited $status: not every transfer verified over TLS (see above)" >&2
  exit 1
fi
python3 - "$work/run.json" "${suite_args[*]}" <<'EOF'
import json
import sys

document = json.load(open(sys.argv[1]))
suites = {suite["name"]: suite["summary"] for suite in document["suites"]}
expected = ["basic1", "basic2", "basic3", "large", "thousand", "drowning"]
if "--suite all" in sys.argv[2]:
    missing = [name for name in expected if name not in suites]
    if missing:
        sys.exit(f"tls-load.sh: suites missing from the run: {missing}")
bad = {
    name: f"{summary['verified']} of {summary['transfers']}"
    for name, summary in suites.items()
    if summary["verified"] != summary["transfers"] or summary["transfers"] == 0
}
if document.get("interrupted") or bad:
    sys.exit(f"tls-load.sh: not every transfer verified: {bad}")
print(
    "tls-load.sh: every transfer verified over TLS: "
    + ", ".join(f"{name} {summary['verified']}" for name, summary in suites.items())
)
EOF
