#!/usr/bin/env bash
# A fleet of aesd "boards" on this machine, behind HAProxy, watched by
# Prometheus (docs/fleet.md):
#   * N aesd (release build) on loopback ports, each with a metrics endpoint and
#     HAProxy's address (127.0.0.2) as its only trusted proxy;
#   * HAProxy from deploy/haproxy/haproxy.cfg (ports substituted, the
#     boards as servers, connecting from 127.0.0.2 so the boards can tell
#     it from the clients on 127.0.0.1), waited for until every board
#     passes its health check;
#   * Prometheus from deploy/prometheus/fleet.yml, finding the boards in a
#     generated target file (each labelled board1..N);
# then runs an aesload suite through HAProxy and checks that
#   * every transfer verified (aesload's exit status),
#   * every board served jobs (aesd_jobs_total from its /metrics), and their
#     jobs add up to aesload's transfers,
#   * the boards saw the client's address, not HAProxy's: every "job done"
#     log line names 127.0.0.1, none 127.0.0.2;
#   * the per-client connection cap (aesd's default, 64) is keyed on the
#     client behind HAProxy: 64 × N connections from 127.0.0.3 fill every
#     board's cap for that address, the next one gets `busy` naming
#     127.0.0.3, and a connection from 127.0.0.4 is still welcomed,
#   * Prometheus scrapes every board (up == 1 for all N),
#   * with --etcd: the boards share one keyring in etcd (scripts/etcd.sh):
#     init on one, the same share unseals all, a rotation reaches every
#     board within 2 s, and every board reports the same
#     aesd_keyring_generation; with --etcd 3, a by-name aesload run through
#     HAProxy verifies every transfer while one member is stopped and the
#     key rotated (the rotation on every board within 2 s),
# prints each board's share of the jobs and stops everything it started.
#
#   scripts/fleet.sh                          # 3 boards, basic3 at scale 0.1
#   scripts/fleet.sh --boards 3 --quick       # CI: small suites, < 1 minute
#   scripts/fleet.sh --boards 4 --suite large --scale 0.2 --json run.json
#   scripts/fleet.sh --quick --etcd 3        # keyring in a 3-member etcd
#
# Options:
#   --boards N       aesd instances [3]
#   --suite NAME     aesload suite(s), e.g. basic2 or basic2,large [basic3]
#   --scale F        aesload --scale [0.1]
#   --workers N      worker threads per board [1]
#   --quick          --suite basic2,basic3 --scale 0.02 (CI)
#   --json FILE      keep aesload's JSON (for `aesload compare`)
#   --etcd N         the boards' keyring in etcd with N members (1 or 3),
#                    each board with its HTTP API (--keyring etcd://...)
#   --out DIR        keep the logs and configs here [a temporary directory,
#                    removed at the end]
#   --profile P      release or debug binaries [release]; test.sh uses
#                    debug, which `cargo test` has just built
#   --no-build       use the binaries as they are (no cargo build)
#   -h, --help       this text
#
# Exit status: 0 all checks passed; 1 a check failed (the message says
# which); 2 bad usage or a part did not start.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

boards=3
suite=basic3
scale=0.1
workers=1
json=""
out=""
build=1
profile=release
# HAProxy's source address towards the boards: the one they trust.
proxy_addr=127.0.0.2
etcd_members=0
while (($#)); do
  case "$1" in
    --boards)
      boards="${2:?--boards needs a number}"
      shift
      ;;
    --suite)
      suite="${2:?--suite needs a name}"
      shift
      ;;
    --scale)
      scale="${2:?--scale needs a factor}"
      shift
      ;;
    --workers)
      workers="${2:?--workers needs a number}"
      shift
      ;;
    --quick)
      suite=basic2,basic3
      scale=0.02
      ;;
    --json)
      json="${2:?--json needs a file}"
      shift
      ;;
    --etcd)
      etcd_members="${2:?--etcd needs 1 or 3}"
      shift
      ;;
    --out)
      out="${2:?--out needs a directory}"
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
      echo "fleet.sh: unknown option '$1' (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
[[ "$boards" =~ ^[1-9][0-9]?$ ]] || {
  echo "fleet.sh: --boards must be 1 to 99" >&2
  exit 2
}
[[ "$etcd_members" =~ ^[013]$ ]] || {
  echo "fleet.sh: --etcd must be 1 or 3" >&2
  exit 2
}
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || {
  echo "fleet.sh: --workers must be at least 1" >&2
  exit 2
}
host_bins fleet.sh "$profile" "$build" "aesd-server aesd-client aesd-load" aesd aesload
aesd="$HOST_BIN/aesd"
aesload="$HOST_BIN/aesload"
apt_install haproxy prometheus

keep=1
if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/aesd-fleet.XXXXXX")"
  keep=0
fi
mkdir -p "$out/targets"
pids=()
cleanup() {
  ((${#pids[@]} == 0)) || stop_pids "${pids[@]}"
  if ((keep)); then echo "fleet: logs and configs in $out" >&2; else rm -rf "$out"; fi
}
trap cleanup EXIT
trap 'exit 2' INT TERM

keyring_args=()
if ((etcd_members)); then
  step "fleet: etcd ($etcd_members member(s)) for the shared keyring"
  apt_install etcd-server etcd-client
  # shellcheck source=scripts/etcd.sh
  . "$root/scripts/etcd.sh"
  mkdir -p "$out/etcd"
  etcd_start "$out/etcd" "$etcd_members" || exit 2
  keyring_args=(--keyring "etcd://$ETCD_ENDPOINTS/aesd/fleet")
fi

step "fleet: $boards boards"
ports=()
metrics_ports=()
http_addrs=()
for i in $(seq "$boards"); do
  port="$(free_port)"
  metrics_port="$(free_port)"
  ports+=("$port")
  metrics_ports+=("$metrics_port")
  extra=()
  if ((etcd_members)); then
    http_addrs+=("127.0.0.1:$(free_port)")
    extra=(--http-listen "${http_addrs[i - 1]}" "${keyring_args[@]}")
  fi
  "$aesd" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$metrics_port" \
    --trusted-proxies "$proxy_addr/32" --workers "$workers" --temperature off \
    --max-active-per-client "$((2 * workers))" --max-queued-per-client 64 \
    "${extra[@]}" --log info 2>"$out/board$i.log" &
  pids+=("$!")
  printf -- '- targets: ["127.0.0.1:%s"]\n  labels:\n    board: board%s\n' "$metrics_port" "$i" >>"$out/targets/boards.yml"
done
for i in $(seq "$boards"); do
  wait_port "${ports[i - 1]}" 20
  wait_port "${metrics_ports[i - 1]}" 20
  echo "board$i: aesd on 127.0.0.1:${ports[i - 1]}, metrics on 127.0.0.1:${metrics_ports[i - 1]}" >&2
done

if ((etcd_members)); then
  step "fleet: one keyring for the fleet, in etcd"
  if etcd_keyring_check "$out/root-token" "${http_addrs[@]}"; then
    generations="$(for m in "${metrics_ports[@]}"; do
      curl -fsS "http://127.0.0.1:$m/metrics" | awk '/^aesd_keyring_generation / { print $2 }'
    done | sort -u)"
    echo "aesd_keyring_generation on the boards: $(echo "$generations" | tr '\n' ' ')"
    [[ "$(echo "$generations" | wc -l)" == 1 && -n "$generations" ]] || {
      echo "fleet.sh: the boards disagree on the keyring generation" >&2
      exit 1
    }
  else
    echo "fleet.sh: the shared keyring check failed" >&2
    exit 1
  fi
fi

step "fleet: Prometheus (file-based discovery)"
prometheus_port="$(free_port)"
sed -e 's/scrape_interval: 5s/scrape_interval: 1s/' -e 's/evaluation_interval: 5s/evaluation_interval: 1s/' \
  "$root/deploy/prometheus/fleet.yml" >"$out/fleet.yml"
prometheus --config.file="$out/fleet.yml" --storage.tsdb.path="$out/tsdb" \
  --web.listen-address="127.0.0.1:$prometheus_port" --log.level=warn 2>"$out/prometheus.log" &
pids+=("$!")

step "fleet: HAProxy (leastconn, send-proxy-v2, hello health checks)"
front="$(free_port)"
stats="$(free_port)"
{
  # The shipped file without its example boards, bound to loopback, with
  # faster checks; connecting to the boards from $proxy_addr.
  sed -e "s/^\( *bind \):7878/\1127.0.0.1:$front/" \
    -e '/^ *#\{0,1\} *server board/d' \
    -e "s/^\( *default-server .*\)inter 2s rise 2/\1source $proxy_addr inter 500ms rise 1/" \
    "$root/deploy/haproxy/haproxy.cfg"
  for i in $(seq "$boards"); do
    echo "    server board$i 127.0.0.1:${ports[i - 1]}"
  done
  printf '\nlisten stats\n    mode http\n    bind 127.0.0.1:%s\n    stats enable\n    stats uri /stats\n' "$stats"
} >"$out/haproxy.cfg"
grep -q "source $proxy_addr" "$out/haproxy.cfg" || {
  echo "fleet.sh: the shipped haproxy.cfg changed shape (default-server)" >&2
  exit 2
}
haproxy -c -q -f "$out/haproxy.cfg"
haproxy -db -f "$out/haproxy.cfg" 2>"$out/haproxy.log" &
pids+=("$!")
wait_port "$stats" 20
up=0
for _ in $(seq 100); do
  up="$(curl -fsS "http://127.0.0.1:$stats/stats;csv" 2>/dev/null | awk -F, '$1 == "boards" && $2 ~ /^board/ && $18 == "UP"' | wc -l || true)"
  ((up == boards)) && break
  sleep 0.1
done
if ((up != boards)); then
  echo "fleet.sh: only $up of $boards boards pass HAProxy's health check; haproxy.log:" >&2
  tail -20 "$out/haproxy.log" >&2
  exit 1
fi
echo "haproxy: 127.0.0.1:$front, $up of $boards boards UP" >&2

step "fleet: aesload --suite $suite --scale $scale through HAProxy"
run_json="${json:-$out/aesload.json}"
status=0
"$aesload" --server "127.0.0.1:$front" --suite "$suite" --scale "$scale" --json "$run_json" --quiet || status=$?

step "fleet: each board's share"
failed=0
total=0
declare -a jobs
for i in $(seq "$boards"); do
  count="$(curl -fsS "http://127.0.0.1:${metrics_ports[i - 1]}/metrics" |
    awk '/^aesd_jobs_total\{.*outcome="ok"/ { sum += $NF } END { printf "%d", sum }')"
  jobs[i]="$count"
  total=$((total + count))
done
printf '%-8s %-16s %6s %7s\n' board address jobs share
for i in $(seq "$boards"); do
  share="$(awk -v a="${jobs[i]}" -v t="$total" 'BEGIN { printf "%.1f%%", t ? 100 * a / t : 0 }')"
  printf '%-8s %-16s %6s %7s\n' "board$i" "127.0.0.1:${ports[i - 1]}" "${jobs[i]}" "$share"
  if ((jobs[i] == 0)); then
    echo "fleet.sh: board$i served no job" >&2
    failed=1
  fi
done
verified="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"]["verified"])' "$run_json")"
echo "total    $total jobs on the boards, $verified transfers verified by aesload"
if ((status != 0)); then
  echo "fleet.sh: aesload exit status $status: not every transfer verified" >&2
  failed=1
fi
if ((total != verified)); then
  echo "fleet.sh: the boards finished $total jobs, aesload verified $verified" >&2
  failed=1
fi

step "fleet: the boards saw the client's address, not HAProxy's"
client_lines="$(cat "$out"/board*.log | grep -c 'job done.*peer=127\.0\.0\.1:' || true)"
proxy_lines="$(cat "$out"/board*.log | grep -c "job done.*peer=${proxy_addr//./\\.}:" || true)"
echo "\"job done\" lines naming the client 127.0.0.1: $client_lines; naming HAProxy's $proxy_addr: $proxy_lines"
if ((client_lines != verified || proxy_lines != 0)); then
  echo "fleet.sh: the boards' logs do not name the client for every job" >&2
  failed=1
fi
if cat "$out"/board*.log | grep -E ' (WARN|ERROR) ' >&2; then
  echo "fleet.sh: the boards logged warnings or errors (above)" >&2
  failed=1
fi

step "fleet: the per-client cap is keyed on the client behind HAProxy"
if ! python3 - "$front" 64 "$boards" <<'PY'; then
import resource, socket, struct, sys

front, cap, boards = (int(arg) for arg in sys.argv[1:4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * cap * boards + 64)), hard))
HELLO = bytes.fromhex("4145534400010000")  # PROTOCOL.md: frame-hello-password-only

def exactly(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise SystemExit(f"connection closed after {len(data)} of {count} bytes")
        data += chunk
    return data

def connect(source):
    """Connects through HAProxy from `source`; the answer's kind and payload."""
    sock = socket.create_connection(("127.0.0.1", front), timeout=10, source_address=(source, 0))
    sock.sendall(HELLO)
    head = exactly(sock, 5)
    return sock, head[0], exactly(sock, struct.unpack(">I", head[1:])[0])

held = []
for _ in range(cap * boards):
    sock, kind, payload = connect("127.0.0.3")
    if kind != 0x01:
        raise SystemExit(f"connection {len(held) + 1} from 127.0.0.3 was refused: {payload[4:]!r}")
    held.append(sock)
sock, kind, payload = connect("127.0.0.3")
code, message = struct.unpack(">H", payload[:2])[0], payload[4:].decode(errors="replace")
if kind != 0x7F or code != 30 or "127.0.0.3" not in message:
    raise SystemExit(f"connection {cap * boards + 1} from 127.0.0.3: kind {kind:#x}, {message!r}")
print(f"{cap * boards} connections from 127.0.0.3 held ({cap} per board); the next: busy, \"{message}\"")
other, kind, payload = connect("127.0.0.4")
if kind != 0x01:
    raise SystemExit(f"127.0.0.4 was refused too (a cap keyed on HAProxy's address?): {payload[4:]!r}")
print("a connection from 127.0.0.4 meanwhile: welcomed")
PY
  failed=1
fi

step "fleet: Prometheus scrapes every board"
scraped=0
for _ in $(seq 50); do
  scraped="$(curl -fsS "http://127.0.0.1:$prometheus_port/api/v1/query" --data-urlencode 'query=count(up{job="aesd"} == 1)' 2>/dev/null |
    python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)' 2>/dev/null || echo 0)"
  ((scraped == boards)) && break
  sleep 0.2
done
echo "prometheus: $scraped of $boards boards up (labels board1..board$boards, from $out/targets/boards.yml)"
if ((scraped != boards)); then
  echo "fleet.sh: Prometheus does not scrape every board; prometheus.log:" >&2
  tail -5 "$out/prometheus.log" >&2
  failed=1
fi

if ((etcd_members == 3)); then
  step "fleet: by-name load through HAProxy while an etcd member is lost and the key rotated"
  etcd_member_loss_load "$aesload" "127.0.0.1:$front" "$out/root-token" "${http_addrs[@]}" || failed=1
fi

if ((failed)); then
  keep=1
  echo "fleet: FAILED" >&2
  exit 1
fi
echo "fleet: ok: $boards boards, every transfer verified, every board served jobs for the client's address" >&2
