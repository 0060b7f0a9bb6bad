#!/usr/bin/env bash
# etcd on loopback for a fleet's shared keyring (aesd --keyring etcd://...):
# Debian's etcd-server (3.4), one member or three, on free ports, with its
# data in DIR; runs until Ctrl-C (then stops the members it started).
#
#   scripts/etcd.sh                    # one member, data in a temporary dir
#   scripts/etcd.sh --members 3 --dir /tmp/etcd-fleet
#
# It prints the --keyring value to give each board, e.g.
#   aesd --http-listen 127.0.0.1:8200 --keyring etcd://127.0.0.1:2379/aesd/fleet
# scripts/fleet.sh --etcd sources it for etcd_start, etcd_keyring_check and
# etcd_member_loss_load.
#
# Options:
#   --members N   1 or 3 [1]
#   --dir DIR     data and logs [a temporary directory, removed at the end]
#   -h, --help    this text

# etcd_start DIR MEMBERS: starts the members (logs in DIR/mN.log), appends
# their pids to the caller's `pids` array (and to ETCD_PIDS, in member
# order), waits until each answers, and sets ETCD_ENDPOINTS (HOST:PORT,...).
ETCD_PIDS=()
etcd_start() {
  local dir="$1" members="$2" i cluster="" name
  local -a clients=() peers=()
  command -v etcd >/dev/null || {
    echo "etcd.sh: etcd is not installed (Debian's etcd-server: bash scripts/setup.sh)" >&2
    return 2
  }
  for i in $(seq 0 $((members - 1))); do
    clients+=("127.0.0.1:$(free_port)")
    peers+=("127.0.0.1:$(free_port)")
    cluster="${cluster:+$cluster,}m$i=http://${peers[i]}"
  done
  for i in $(seq 0 $((members - 1))); do
    name="m$i"
    etcd --name "$name" --data-dir "$dir/$name" \
      --listen-client-urls "http://${clients[i]}" --advertise-client-urls "http://${clients[i]}" \
      --listen-peer-urls "http://${peers[i]}" --initial-advertise-peer-urls "http://${peers[i]}" \
      --initial-cluster "$cluster" --initial-cluster-token aesd-fleet \
      --heartbeat-interval 50 --election-timeout 500 2>"$dir/$name.log" &
    pids+=("$!")
    ETCD_PIDS+=("$!")
  done
  for i in $(seq 0 $((members - 1))); do
    wait_port "${clients[i]#127.0.0.1:}" 20 || return 1
    # A linearizable read: answered once the cluster has a leader.
    for _ in $(seq 100); do
      curl -fsS -X POST "http://${clients[i]}/v3/kv/range" -d '{"key":"AA=="}' >/dev/null 2>&1 && break
      sleep 0.1
    done
  done
  ETCD_ENDPOINTS="$(
    IFS=,
    echo "${clients[*]}"
  )"
  echo "etcd: $members member(s) on $ETCD_ENDPOINTS, data in $dir" >&2
}

# etcd_keyring_check TOKEN_FILE HTTP_ADDR...: the boards' shared keyring,
# through their HTTP APIs: sys/init on the first, the same share unseals every
# board, a key `fleet-key` made on the first and rotated on the second (or the
# first) is at version 2 on every board within 2 s. Prints the share and root
# token's use, not them; the root token goes to TOKEN_FILE (mode 600).
etcd_keyring_check() {
  python3 - "$@" <<'PY'
import json, os, sys, time, urllib.error, urllib.request

token_file, boards = sys.argv[1], sys.argv[2:]

def call(board, method, path, body=None, token=None, retry_on=()):
    """The JSON answer; an HTTP status in retry_on is retried for 2 s (a
    board that has not loaded the fleet's newest generation yet)."""
    request = urllib.request.Request(f"http://{board}/v1/{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode())
    if token:
        request.add_header("X-Vault-Token", token)
    deadline = time.time() + 2
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                text = answer.read()
            return json.loads(text) if text else None
        except urllib.error.HTTPError as err:
            if err.code not in retry_on or time.time() > deadline:
                raise SystemExit(f"{board}: {method} {path}: HTTP {err.code} {err.read()[:200]!r}")
            time.sleep(0.02)

init = call(boards[0], "PUT", "sys/init", {"secret_shares": 1, "secret_threshold": 1})
share, token = init["keys_base64"][0], init["root_token"]
with open(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
    file.write(token)
for board in boards:
    deadline = time.time() + 2
    while not call(board, "GET", "sys/seal-status")["initialized"]:
        if time.time() > deadline:
            raise SystemExit(f"{board} does not see the fleet's keyring within 2 s")
        time.sleep(0.05)
    if call(board, "PUT", "sys/unseal", {"key": share})["sealed"]:
        raise SystemExit(f"{board}: the fleet's share does not unseal it")
call(boards[0], "POST", "transit/keys/fleet-key", {}, token)
# The second board may not have loaded the key yet: 404 (or 409 if it
# loads it while storing), retried.
call(boards[min(1, len(boards) - 1)], "POST", "transit/keys/fleet-key/rotate", None, token,
     retry_on=(404, 409))
start = time.time()
for board in boards:
    while call(board, "GET", "transit/keys/fleet-key", None, token,
               retry_on=(404,))["data"]["latest_version"] != 2:
        if time.time() - start > 2:
            raise SystemExit(f"{board} does not use the rotation within 2 s")
        time.sleep(0.02)
print(f"keyring: init on one board, the same share unsealed {len(boards)}; "
      f"a rotation reached every board in {(time.time() - start) * 1e3:.0f} ms")
PY
}

# etcd_member_loss_load AESLOAD FRONT TOKEN_FILE HTTP_ADDR...: a by-name
# aesload run (`fleet-key`, every transfer decrypted again and compared)
# through FRONT while the first etcd member is stopped and the key is rotated
# on the last board; every transfer must verify, the rotation must be
# accepted, and every board must use the new version within 2 s.
etcd_member_loss_load() {
  local aesload="$1" front="$2" token_file="$3" load_pid status=0
  shift 3
  "$aesload" --server "$front" --key fleet-key --token-file "$token_file" \
    --suite basic3,large --scale 0.05 --quiet >"$token_file.load" 2>&1 &
  load_pid=$!
  sleep 0.3
  kill "${ETCD_PIDS[0]}"
  echo "etcd: member m0 stopped during the run" >&2
  python3 - "$token_file" "$@" <<'PY' || status=1
import json, sys, time, urllib.request

token, boards = open(sys.argv[1]).read(), sys.argv[2:]

def call(board, method, path):
    request = urllib.request.Request(f"http://{board}/v1/{path}", method=method)
    request.add_header("X-Vault-Token", token)
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read()
    return json.loads(text) if text else None

before = call(boards[-1], "GET", "transit/keys/fleet-key")["data"]["latest_version"]
call(boards[-1], "POST", "transit/keys/fleet-key/rotate")
start = time.time()
for board in boards:
    while call(board, "GET", "transit/keys/fleet-key")["data"]["latest_version"] != before + 1:
        if time.time() - start > 2:
            raise SystemExit(f"{board} does not use the rotation within 2 s of a member's loss")
        time.sleep(0.02)
print(f"keyring: rotated to version {before + 1} with one member of three down; "
      f"every board used it within {(time.time() - start) * 1e3:.0f} ms")
PY
  wait "$load_pid" || status=1
  grep '^Transfers Verified' "$token_file.load" || true
  if ((status)); then
    echo "etcd.sh: the by-name run or the rotation failed with a member down; aesload said:" >&2
    tail -20 "$token_file.load" >&2
  fi
  return "$status"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  # shellcheck source=scripts/lib.sh
  . "$root/scripts/lib.sh"
  members=1
  dir=""
  while (($#)); do
    case "$1" in
      --members)
        members="${2:?--members needs 1 or 3}"
        shift
        ;;
      --dir)
        dir="${2:?--dir needs a directory}"
        shift
        ;;
      -h | --help)
        sed -n '2,/^# etcd_start/{/^# etcd_start/d;/^#/s/^# \{0,1\}//p}' "$0"
        exit 0
        ;;
      *)
        echo "etcd.sh: unknown option '$1' (try --help)" >&2
        exit 2
        ;;
    esac
    shift
  done
  [[ "$members" == 1 || "$members" == 3 ]] || {
    echo "etcd.sh: --members must be 1 or 3" >&2
    exit 2
  }
  keep=1
  if [[ -z "$dir" ]]; then
    dir="$(mktemp -d "${TMPDIR:-/tmp}/aesd-etcd.XXXXXX")"
    keep=0
  fi
  mkdir -p "$dir"
  pids=()
  cleanup() {
    ((${#pids[@]} == 0)) || stop_pids "${pids[@]}"
    ((keep)) || rm -rf "$dir"
  }
  trap cleanup EXIT
  trap 'exit 0' INT TERM
  etcd_start "$dir" "$members"
  echo "aesd --http-listen 127.0.0.1:8200 --keyring etcd://$ETCD_ENDPOINTS/aesd/fleet"
  echo "etcd.sh: running; Ctrl-C stops it" >&2
  wait
fi
