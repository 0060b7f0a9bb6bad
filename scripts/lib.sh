#!/usr/bin/env bash
# Shared helpers for the project's scripts: logging and idempotent installs.
# Source it; it defines functions only.

# Prints a step heading on stderr.
step() { printf '\n==> %s\n' "$*" >&2; }

# Installs the Debian packages that are not installed yet; runs
# `apt-get update` once per call, and only when something is missing.
apt_install() {
  local missing=()
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  step "apt-get install ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Adds rustup components to the active toolchain when they are missing.
rustup_components() {
  local component
  for component in "$@"; do
    rustup component list --installed 2>/dev/null | grep -q "^${component}" \
      || { step "rustup component add $component"; rustup component add "$component"; }
  done
}
