#!/usr/bin/env bash
# Idempotent setup for soc/ (LiteX SoC generator + its tests).
#
#   bash soc/setup.sh              # dtc + Python venv at soc/.venv (generation + tests)
#   bash soc/setup.sh --with-sim   # also Verilator, RISC-V GCC and the sim packages (slow test)
#
# Then:  soc/.venv/bin/python -m pytest soc/tests
#
# Re-running is fast: apt packages already installed are skipped, and pip runs only when the
# requirements files changed since the last successful install (stamp file in the venv).
# Environment: AESD_SOC_VENV (venv path, default soc/.venv), AESD_SOC_WITH_SIM=1 (= --with-sim),
#              PYTHON (interpreter used to create the venv, default python3).
set -euo pipefail

SOC_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${AESD_SOC_VENV:-${SOC_DIR}/.venv}"
PYTHON="${PYTHON:-python3}"
WITH_SIM="${AESD_SOC_WITH_SIM:-0}"

usage() {
  sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

for arg in "$@"; do
  case "${arg}" in
    --with-sim) WITH_SIM=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "setup.sh: unknown argument '${arg}'" >&2
      usage >&2
      exit 2
      ;;
  esac
done

log() { echo "[soc/setup] $*"; }

# APT packages ------------------------------------------------------------------------------------

APT_PACKAGES=(device-tree-compiler)
if [[ "${WITH_SIM}" == "1" ]]; then
  # Verilator + host toolchain for the simulator, RISC-V GCC for the LiteX BIOS,
  # libevent/json-c/zlib for LiteX's simulation modules.
  APT_PACKAGES+=(verilator gcc-riscv64-unknown-elf build-essential libevent-dev libjson-c-dev zlib1g-dev)
fi

apt_missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q "install ok installed"; then
    apt_missing+=("${pkg}")
  fi
done

if [[ ${#apt_missing[@]} -gt 0 ]]; then
  SUDO=()
  if [[ "$(id -u)" -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      SUDO=(sudo)
    else
      echo "[soc/setup] ERROR: need root (or sudo) to install: ${apt_missing[*]}" >&2
      exit 1
    fi
  fi
  log "apt-get install ${apt_missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${apt_missing[@]}"
else
  log "apt packages present: ${APT_PACKAGES[*]}"
fi

# Python virtualenv -------------------------------------------------------------------------------

if [[ ! -x "${VENV}/bin/python" ]]; then
  log "creating virtualenv ${VENV} (${PYTHON})"
  if ! "${PYTHON}" -m venv "${VENV}"; then
    # Debian's system python needs python3-venv.
    log "venv creation failed; installing python3-venv and retrying"
    rm -rf "${VENV}"
    if [[ "$(id -u)" -ne 0 ]]; then SUDO=(sudo); else SUDO=(); fi
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends python3-venv
    "${PYTHON}" -m venv "${VENV}"
  fi
fi

REQ_FILES=("${SOC_DIR}/requirements.txt")
if [[ "${WITH_SIM}" == "1" ]]; then
  REQ_FILES+=("${SOC_DIR}/requirements-sim.txt")
fi

STAMP="${VENV}/.aesd-soc-requirements.sha256"
want="$(cat "${REQ_FILES[@]}" | sha256sum | cut -d' ' -f1)"
have="$(cat "${STAMP}" 2>/dev/null || true)"

if [[ "${want}" == "${have}" ]] && "${VENV}/bin/python" -c "import litex, liteeth, litedram, litex_boards, pytest" 2>/dev/null; then
  log "python packages up to date in ${VENV}"
else
  pip_args=()
  for req in "${REQ_FILES[@]}"; do
    pip_args+=(-r "${req}")
  done
  log "pip install ${pip_args[*]}"
  "${VENV}/bin/python" -m pip install --disable-pip-version-check -q "${pip_args[@]}"
  echo "${want}" >"${STAMP}"
fi

log "done. Run the tests with: ${VENV}/bin/python -m pytest ${SOC_DIR}/tests"
