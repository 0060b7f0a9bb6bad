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

bash scripts/setup.sh

step "shellcheck"
mapfile -t scripts < <(git ls-files '*.sh' 'buildroot-overlay/**/S*' | sort -u)
[ "${#scripts[@]}" -eq 0 ] || shellcheck -x "${scripts[@]}"

step "shfmt (the shell scripts' formatting, .editorconfig; fix with: shfmt -w \$(shfmt -f .))"
mapfile -t formatted < <(git ls-files -z | xargs -0 shfmt -f | sort)
shfmt -d "${formatted[@]}"

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

step "cargo test"
cargo test --workspace --locked

step "cargo bench (quick: the benches build and run; cost self-check)"
cargo bench -p aesd-bench --locked -- --quick

[ "$only_rust" -eq 1 ] && exit 0

step "fleet: 3 aesd behind HAProxy (PROXY v2), Prometheus file discovery, an aesload suite through it"
bash scripts/fleet.sh --boards 3 --quick --profile debug

step "sharded load: 3 aesload shards from 127.0.0.2-4 against one aesd, merged, beside the unsharded run"
bash scripts/shards.sh --shards 3 --quick --profile debug

step "TLS load run: every study suite through aesload's embedded aesd over TLS with its defaults, all verified (scripts/tls-load.sh)"
bash scripts/tls-load.sh --profile debug

step "loopback floor (quick): the echo servers of scripts/bench/loopback-floor.sh move and check their bytes"
bash scripts/bench/loopback-floor.sh --quick

step "deploy/k8s/: the manifests against the Kubernetes schemas (kubernetes-validate --strict)"
bash scripts/k8s-validate.sh
bash scripts/k8s-rehearse.sh --pods 3 --profile debug

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
bash buildroot-overlay/tests/run.sh

step "board targets: cross builds, no-FPU check, smoke tests under qemu"
bash scripts/cross/ci.sh

step "buildroot-overlay/qemu/: emulated board (qemu-system-riscv32): boot, aesload (48 clients, 4 at a time), /metrics, poweroff"
# 48 clients, not run.sh's default 8: jobs sharing the board's lanes from
# two harts under the guest's scheduler caught a chunk-order race that 8
# clients saw in one run of two (about 25 s more).
bash buildroot-overlay/qemu/run.sh --smoke --aesload "${CARGO_TARGET_DIR:-target}/debug/aesload" \
  --load "--clients 48 --chunk 4 --sizes 64K,1M,2M --iter 1000"

step "buildroot-overlay/qemu/: broken overlays make --smoke fail, saying why"
bash buildroot-overlay/qemu/tests.sh --aesload "${CARGO_TARGET_DIR:-target}/debug/aesload"

step "fuzzing: frame decoder and session state machine, 20 s each"
bash scripts/fuzz.sh --time 20
