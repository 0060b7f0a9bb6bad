#!/usr/bin/env bash
# Fuzzes aesd with cargo-fuzz (libFuzzer + AddressSanitizer, nightly):
#   frame_decoder  arbitrary bytes through the protocol's FrameReader; every
#                  accepted frame must re-encode to exactly its bytes
#   session        arbitrary client byte streams through the connection
#                  state machine the server runs (aesd-core's, with its job
#                  transform and lane engine, served from memory; with and
#                  without a required access token); the server must answer
#                  only with valid frames and leave no job holding a slot
#   proxy_header   arbitrary connection starts through the PROXY protocol
#                  header parser (v1 and v2); a header never takes bytes
#                  past its end, re-encodes to the same addresses
#   client         arbitrary server byte streams (welcome included) against
#                  the client library running one job: it must end within
#                  its idle timeout, and a done job's counts must be true
#   job_core       arbitrary inputs, in chunks of every size, through
#                  aesd-core's format-1 job transform: an encryption decrypts
#                  back, a file that decrypts re-encrypts to exactly itself
#
#   scripts/fuzz.sh                      # 20 s per target, one at a time
#   scripts/fuzz.sh --parallel 2         # CI: two targets at a time
#   scripts/fuzz.sh --time 600           # a longer run for a person
#   scripts/fuzz.sh --time 0 session     # until stopped (Ctrl-C)
#
# Options:
#   --time SECS   fuzzing time per target; 0 = until stopped [20]
#   --jobs N      parallel fuzzing processes per target [1]
#   --parallel N  targets fuzzed at the same time [1] (each for --time)
#   TARGET...     frame_decoder, session, proxy_header, client and/or
#                 job_core [all]
#   --build-only     install what fuzzing needs (Debian packages,
#                 cargo-fuzz) and build the targets, then exit
#   --packages-only  install only the Debian packages, then exit
#                 (scripts/test.sh: then --build-only in the background)
#   -h, --help    this text
#
# Each run starts from a seed corpus written from the hex test vectors of
# crates/proto/PROTOCOL.md (fuzz/corpus/TARGET/seed-*), plus whatever
# earlier runs added to fuzz/corpus/ (ignored by git). Installs cargo-fuzz
# (cargo install --locked) when it is missing. Builds into $AESD_FUZZ_TARGET
# [~/.cache/aesd-fuzz/target], outside the checkout so that a fresh clone
# reuses the sanitizer build of the dependencies (the first build takes a
# few minutes). Logs: fuzz/artifacts/logs/.
#
# Exit status: 0 no crash; 1 a target crashed, leaked or failed a check
# (the input is in fuzz/artifacts/TARGET/; the message says how to replay
# it); 2 bad usage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

time_per_target=20
jobs=1
parallel=1
build_only=0
packages_only=0
targets=()
while (($#)); do
  case "$1" in
    --time)
      time_per_target="${2:?--time needs seconds}"
      shift
      ;;
    --jobs)
      jobs="${2:?--jobs needs a number}"
      shift
      ;;
    --parallel)
      parallel="${2:?--parallel needs a number}"
      shift
      ;;
    --build-only) build_only=1 ;;
    --packages-only) packages_only=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    frame_decoder | session | proxy_header | client | job_core) targets+=("$1") ;;
    *)
      echo "fuzz.sh: unknown option or target '$1' (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
[[ "$time_per_target" =~ ^[0-9]+$ ]] || {
  echo "fuzz.sh: --time must be whole seconds" >&2
  exit 2
}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || {
  echo "fuzz.sh: --jobs must be at least 1" >&2
  exit 2
}
[[ "$parallel" =~ ^[1-9][0-9]*$ ]] || {
  echo "fuzz.sh: --parallel must be at least 1" >&2
  exit 2
}
((${#targets[@]})) || targets=(frame_decoder session proxy_header client job_core)

apt_install python3 g++
((packages_only == 0)) || exit 0
if ! cargo fuzz --version >/dev/null 2>&1; then
  step "cargo install cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet
fi
fuzz_target="${AESD_FUZZ_TARGET:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-fuzz/target}"
if ((build_only)); then
  for target in "${targets[@]}"; do
    step "fuzz: build $target"
    (cd "$root/fuzz" && cargo fuzz build --target-dir "$fuzz_target" "$target")
  done
  exit 0
fi

step "fuzz: seed corpus from PROTOCOL.md"
python3 - "$root/crates/proto/PROTOCOL.md" "$root/fuzz/corpus" <<'PY'
import pathlib, re, sys

text = pathlib.Path(sys.argv[1]).read_text()
corpus = pathlib.Path(sys.argv[2])
vectors = {
    name: bytes.fromhex("".join(body.split()))
    for name, body in re.findall(r"```hex (\S+)\n(.*?)```", text, re.S)
}

def frame(kind, payload):
    return bytes([kind]) + len(payload).to_bytes(4, "big") + payload

hello, begin = vectors["frame-hello"], vectors["frame-begin"]
# The fuzzed server allows 1..=4 PBKDF2 iterations: the vector asks 10000.
cheap_begin = begin[:5 + 5] + (1).to_bytes(4, "big") + begin[5 + 9:]
decrypt_begin = cheap_begin[:5] + b"\x02" + cheap_begin[6:]
data, end, auth = vectors["frame-data"], vectors["frame-end"], vectors["frame-auth"]
file_abc = frame(0x11, vectors["file-abc-iter10000"])
frames = [v for k, v in sorted(vectors.items()) if k.startswith("frame-") and k != "frame-hello"]

seeds = {
    "frame_decoder": {
        **{name: v for name, v in vectors.items() if name.startswith("frame-")},
        "hello-then-every-frame": hello + b"".join(frames),
    },
    "session": {
        "encrypt-abc": b"\x00" + hello + cheap_begin + data + end,
        "decrypt-wrong-key": b"\x00" + hello + decrypt_begin + file_abc + end,
        "two-jobs": b"\x00" + hello + cheap_begin + data + end + cheap_begin + data + data + end,
        "too-many-iterations": b"\x00" + hello + begin + data + end,
        "data-before-begin": b"\x00" + hello + data + end,
        "token-then-job": b"\x01" + hello + auth + cheap_begin + data + end,
        "job-without-token": b"\x01" + hello + cheap_begin + data + end,
        "token-not-asked-for": b"\x00" + hello + auth + cheap_begin + end,
    },
    "proxy_header": {
        "v1-tcp4": b"PROXY TCP4 192.0.2.1 198.51.100.7 56324 7878\r\n" + hello,
        "v1-tcp6": b"PROXY TCP6 2001:db8::1 2001:db8::2 1 7878\r\n" + hello,
        "v1-unknown": b"PROXY UNKNOWN\r\n" + hello,
        "v2-tcp4": b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c"
        + bytes([192, 0, 2, 1, 10, 0, 0, 2]) + (40000).to_bytes(2, "big") + (7878).to_bytes(2, "big") + hello,
        "v2-local": b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00" + hello,
        "hello-only": hello,
    },
    # The first byte picks the job (bit 0: decrypt, bit 1: the server derives).
    "client": {
        "welcome-only": b"\x00" + vectors["frame-welcome"],
        "welcome-derived": b"\x00" + vectors["frame-welcome-derived"],
        "welcome-then-error": b"\x00" + vectors["frame-welcome"] + vectors["frame-error"],
        "welcome-started-data-done": b"\x00" + vectors["frame-welcome"]
        + vectors["frame-started"] + data + vectors["frame-done"],
    },
    # The first byte: bit 0 picks decryption, the rest the chunking.
    "job_core": {
        "encrypt-abc": b"\x00abc",
        "decrypt-abc": b"\x01" + vectors["file-abc-iter10000"],
        "decrypt-short": b"\x03Salted__",
    },
}
for target, named in seeds.items():
    folder = corpus / target
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in named.items():
        (folder / f"seed-{name}").write_bytes(content)
    print(f"{target}: {len(named)} seeds", file=sys.stderr)
PY

logs="$root/fuzz/artifacts/logs"
cd "$root/fuzz"
mkdir -p "$logs"
# fuzz_one TARGET: fuzzes TARGET for the given time; prints libFuzzer's
# milestones and a one-line verdict; fails if it crashed, leaked or did
# not finish.
fuzz_one() {
  local target="$1" log="$logs/$1.log" args runs
  mkdir -p "$root/fuzz/artifacts/$target"
  args=(-max_total_time="$time_per_target" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
  ((jobs > 1)) && args+=(-jobs="$jobs" -workers="$jobs")
  if cargo fuzz run --target-dir "$fuzz_target" "$target" "corpus/$target" -- "${args[@]}" >"$log" 2>&1; then
    :
  fi
  grep -E '^(#[0-9]+ +(INITED|DONE)|Done|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)' "$log" | sed "s/^/$target: /" || true
  if grep -qE '^(==[0-9]+==ERROR|SUMMARY: libFuzzer|Test unit written)|panicked at' "$log" ||
    ! grep -q '^Done [0-9]* runs' "$log"; then
    echo "fuzz.sh: $target FAILED; log: $log" >&2
    grep -E 'panicked at|Test unit written' "$log" >&2 || tail -20 "$log" >&2
    echo "fuzz.sh: replay with: (cd fuzz && cargo fuzz run --target-dir $fuzz_target $target artifacts/$target/<file>)" >&2
    return 1
  fi
  runs="$(grep -o '^Done [0-9]* runs in [0-9]* second' "$log" | tail -1)"
  echo "fuzz: $target: ${runs#Done }s, no crash; corpus $(find "corpus/$target" -type f | wc -l) inputs" >&2
}

status=0
# Up to --parallel targets at once, each its own process; a target's
# output is printed when it ends, in one piece.
declare -A running=()
# reap_one: waits for the next target to end, prints its output.
reap_one() {
  local done_pid rc=0
  wait -n -p done_pid "${!running[@]}" || rc=$?
  ((rc == 0)) || status=1
  cat "${running[$done_pid]}"
  rm -f "${running[$done_pid]}"
  unset "running[$done_pid]"
}
for target in "${targets[@]}"; do
  while ((${#running[@]} >= parallel)); do reap_one; done
  step "fuzz: $target for ${time_per_target}s"
  out="$(mktemp)"
  fuzz_one "$target" >"$out" 2>&1 &
  running[$!]="$out"
done
while ((${#running[@]})); do reap_one; done
exit "$status"
