#!/usr/bin/env bash
# The project's test command (CI runs exactly this): sets up, then checks
# formatting, lints, and runs every test suite.
#
#   bash scripts/test.sh            # everything
#   bash scripts/test.sh --rust     # only the Rust workspace (fmt, clippy, tests)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

only_rust=0
for arg in "$@"; do
  case "$arg" in
    --rust) only_rust=1 ;;
    -h | --help)
      sed -n '2,6p' "$0"
      exit 0
      ;;
    *)
      echo "test.sh: unknown option $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

# Where the minutes go: every step below (and in the scripts they run) is
# timed, and the table is printed at the end, also on failure
# (target/test-times.md; docs/testing.md keeps the last fresh-machine run's).
AESD_STEP_LOG="$(mktemp)"
export AESD_STEP_LOG
times_file="${CARGO_TARGET_DIR:-target}/test-times.md"
print_times() {
  local rc=$?
  background_stop_all
  mkdir -p "$(dirname "$times_file")"
  local end=$(($(date +%s) - AESD_STEP_T0))
  children_cpu
  step_table "$AESD_STEP_LOG" test.sh "$end" "$CHILDREN_CPU" | tee "$times_file" >&2
  {
    printf '\nEvery step, nested scripts included:\n'
    step_table "$AESD_STEP_LOG" '*' "$end"
  } >>"$times_file"
  echo "test.sh: the steps' times are in $times_file" >&2
  rm -f "$AESD_STEP_LOG"
  exit "$rc"
}
trap print_times EXIT

# Preparations that build while the steps run (a lower priority, in the
# gaps the Rust steps leave: test runs, single-threaded links), each a
# process group with its output in a file; a later step waits for its own.
declare -A background_pids background_logs
# background_start NAME CMD...: starts CMD (niced) in the background.
background_start() {
  local name="$1" log
  shift
  log="$(mktemp)"
  setsid nice -n 5 "$@" >"$log" 2>&1 &
  background_pids[$name]=$!
  background_logs[$name]=$log
}
# background_wait NAME: waits for NAME; fails with its output if it failed.
background_wait() {
  local name="$1"
  if ! wait "${background_pids[$name]}"; then
    cat "${background_logs[$name]}" >&2
    echo "test.sh: $name failed in the background (its output is above)" >&2
    unset "background_pids[$name]"
    exit 1
  fi
  unset "background_pids[$name]"
}
# background_stop_all: ends what still runs (the test command is ending).
background_stop_all() {
  local name
  for name in "${!background_pids[@]}"; do
    kill -- -"${background_pids[$name]}" 2>/dev/null || true
  done
}

step "setup (scripts/setup.sh: apt, the pinned nightly, kubernetes-validate)"
bash scripts/setup.sh

if [ "$only_rust" -eq 0 ]; then
  # The emulated board's kernel, OpenSBI and BusyBox (10 minutes of make on
  # a fresh machine), cargo-fuzz and the fuzz targets' sanitizer build
  # build in the background; their packages and zig are installed first,
  # here, so that no two apt-get runs meet.
  step "background: the emulated board's images (buildroot-overlay/qemu/build.sh), cargo-fuzz and the fuzz targets; their packages and zig first"
  bash scripts/cross/setup.sh
  bash buildroot-overlay/qemu/build.sh --deps-only
  bash scripts/fuzz.sh --packages-only
  background_start "buildroot-overlay/qemu/build.sh" bash buildroot-overlay/qemu/build.sh
  background_start "scripts/fuzz.sh --build-only" bash scripts/fuzz.sh --build-only
  # The board binaries (fat LTO, mostly single-threaded links) likewise:
  # their own profiles and targets lock other build folders than clippy's
  # and cargo test's, so they fill the gaps those leave.
  background_start "scripts/cross/ci.sh --build-only" bash scripts/cross/ci.sh --build-only
fi

step "shellcheck"
mapfile -t scripts < <(git ls-files '*.sh' 'buildroot-overlay/**/S*' | sort -u)
[ "${#scripts[@]}" -eq 0 ] || shellcheck -x "${scripts[@]}"

step "shfmt (the shell scripts' formatting, .editorconfig; fix with: shfmt -w \$(shfmt -f .))"
mapfile -t formatted < <(git ls-files -z | xargs -0 shfmt -f | sort)
shfmt -d "${formatted[@]}"

step "shell scripts (*.sh) under 400 lines each (split a longer one by concern)"
long_scripts="$(git ls-files -z '*.sh' | xargs -0 wc -l | awk '$2 != "total" && $1 >= 400 { print "  " $2 ": " $1 " lines" }')"
if [[ -n "$long_scripts" ]]; then
  printf 'test.sh: shell scripts of 400 lines or more:\n%s\n' "$long_scripts" >&2
  exit 1
fi

step "Markdown renders as written: fences balance, headings are headings (scripts/check-markdown.py)"
python3 scripts/check-markdown.py --self-test
python3 scripts/check-markdown.py

step "Prometheus alerting rules (promtool test rules deploy/prometheus/alerts.test.yml)"
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts.test.yml

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings
# aesd without the keyring and its HTTP API (the keyless board build,
# docs/performance.md): it must build and stay lint-clean too.
cargo clippy --locked -p aesd-server --no-default-features --bin aesd -- -D warnings

step "cargo test"
# The tests that run another crate's binary (aesd, aescrypt, aesload) take
# the ones this same cargo test builds, not a cargo build of their own
# (aesd-testkit's workspace_binary).
test_bin_dir="${CARGO_TARGET_DIR:-target}/debug"
[[ "$test_bin_dir" == /* ]] || test_bin_dir="$PWD/$test_bin_dir"
AESD_TEST_BIN_DIR="$test_bin_dir" cargo test --workspace --locked
# The later steps use those binaries too (--no-build, AESD_NATIVE_BINS_BUILT):
# a cargo build of a few packages would pick other features and rebuild.
export AESD_NATIVE_BINS_BUILT=1

# The benches in criterion's test mode (each bench once, the cost
# workloads' self-check), built with the test build's profile and its
# artifacts: that they build and run is what CI checks; their figures come
# from `cargo bench` (the release profile), a benchmark command
# (docs/performance.md).
step "cargo test --benches (the benches build and run once each; cost self-check)"
cargo test -p aesd-bench --benches --locked

[ "$only_rust" -eq 1 ] && exit 0

# The board step's cross test builds (cargo test --no-run of the same
# commands) and bench executables build in the background too, now that
# cargo test no longer holds both cores: the steps below mostly wait on
# servers and qemu.
background_start "scripts/cross/ci.sh --test-builds-only" bash scripts/cross/ci.sh --test-builds-only

step "fleet: 3 aesd behind HAProxy (PROXY v2), Prometheus file discovery, their keyring in a 3-member etcd, an aesload suite through it"
bash scripts/fleet.sh --boards 3 --quick --etcd 3 --profile debug --no-build

step "sharded load: 3 aesload shards from 127.0.0.2-4 against one aesd, merged, beside the unsharded run"
bash scripts/shards.sh --shards 3 --quick --profile debug --no-build

step "TLS load run: every study suite through aesload's embedded aesd over TLS with its defaults, all verified (scripts/tls-load.sh)"
bash scripts/tls-load.sh --profile debug --no-build

step "loopback floor (quick): the echo servers of scripts/bench/loopback-floor.sh move and check their bytes"
bash scripts/bench/loopback-floor.sh --quick

step "figures table: scripts/bench/figures-table.py on sample JSON of every bench script and criterion (self-test)"
python3 scripts/bench/figures-table.py --self-test

step "deploy/k8s/: the manifests against the Kubernetes schemas (kubernetes-validate --strict)"
bash scripts/k8s-validate.sh
bash scripts/k8s-rehearse.sh --pods 3 --profile debug --no-build

step "soc/: LiteX SoC generation (pytest)"
bash soc/setup.sh
soc/.venv/bin/python -m pytest soc/tests -m "not slow" -q

step "firmware/ (VexRiscv RTL benchmark): host tests and lints, bare-metal riscv32imac build"
# The benchmark itself (scripts/bench/vexriscv-cycles.sh: Verilator, LiteX's
# sim SoC) does not fit in CI's time; docs/performance.md "Measured on the RTL".
(cd firmware && cargo fmt -- --check && cargo clippy --all-targets --locked -- -D warnings &&
  cargo test --locked --quiet)
bash scripts/bench/vexriscv-cycles.sh --build-only

step "buildroot-overlay/: init script in a busybox chroot, assemble, configs"
bash buildroot-overlay/tests/setup.sh
bash buildroot-overlay/tests/run.sh --profile overlay-test

step "board targets: cross builds (built in the background), no-FPU check, smoke tests under qemu"
background_wait "scripts/cross/ci.sh --build-only"
background_wait "scripts/cross/ci.sh --test-builds-only"
bash scripts/cross/ci.sh

step "the emulated board's images: waiting for the background build"
background_wait "buildroot-overlay/qemu/build.sh"

step "buildroot-overlay/qemu/: emulated board (qemu-system-riscv32): boot, keyring (bao init, unseal, a file by name), aesload (48 clients, 4 at a time), /metrics, poweroff; reboot: sealed, unsealed, the file decrypted"
# 48 clients, not run.sh's default 8: jobs sharing the board's lanes from
# two harts under the guest's scheduler caught a chunk-order race that 8
# clients saw in one run of two (about 25 s more).
bash buildroot-overlay/qemu/run.sh --smoke --aesload "${CARGO_TARGET_DIR:-target}/debug/aesload" \
  --aescrypt "${CARGO_TARGET_DIR:-target}/debug/aescrypt" --load "--clients 48 --chunk 4 --sizes 64K,1M,2M --iter 1000"

step "buildroot-overlay/qemu/: broken overlays make --smoke fail, saying why"
bash buildroot-overlay/qemu/tests.sh --aesload "${CARGO_TARGET_DIR:-target}/debug/aesload" \
  --aescrypt "${CARGO_TARGET_DIR:-target}/debug/aescrypt"

step "fuzzing: every target 20 s, two at a time (built in the background)"
background_wait "scripts/fuzz.sh --build-only"
bash scripts/fuzz.sh --time 20 --parallel 2
