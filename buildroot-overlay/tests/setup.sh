#!/usr/bin/env bash
# Installs what buildroot-overlay/tests/run.sh needs, idempotently (a second
# run only checks and takes a second or two):
#   apt:    shellcheck, busybox-static, openssl, util-linux (unshare),
#           systemd (systemd-analyze), make, python3-venv (only if missing)
#   rustup: the x86_64-unknown-linux-musl target (static test binaries)
#   PyPI:   kconfiglib, in a venv outside the repository
#           (${XDG_CACHE_HOME:-~/.cache}/aesd-buildroot-overlay/venv)
# Needs root or sudo for apt (CI and the developer machines run as root).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../../scripts/lib.sh"

KCONFIGLIB_VERSION=14.1.0
venv=${XDG_CACHE_HOME:-$HOME/.cache}/aesd-buildroot-overlay/venv

# apt_install (scripts/lib.sh): only what is missing, one apt-get update.
# systemd brings systemd-analyze, util-linux unshare, coreutils od.
apt_install shellcheck busybox-static openssl util-linux systemd make coreutils tar python3 musl-tools

if command -v rustup >/dev/null 2>&1; then
	if ! rustup target list --installed | grep -qx x86_64-unknown-linux-musl; then
		echo "setup: rustup target add x86_64-unknown-linux-musl"
		rustup target add x86_64-unknown-linux-musl
	fi
else
	echo "setup: warning: no rustup; run.sh needs the x86_64-unknown-linux-musl Rust target" >&2
fi

if ! "$venv/bin/python" -c "import kconfiglib" >/dev/null 2>&1; then
	echo "setup: venv $venv with kconfiglib $KCONFIGLIB_VERSION"
	rm -rf "$venv"
	mkdir -p "$(dirname "$venv")"
	if ! python3 -m venv "$venv" >/dev/null 2>&1; then
		rm -rf "$venv"
		apt_install python3-venv
		/usr/bin/python3 -m venv "$venv"
	fi
	"$venv/bin/python" -m pip install -q --disable-pip-version-check "kconfiglib==$KCONFIGLIB_VERSION"
fi

echo "setup: ready (shellcheck, busybox-static, openssl, unshare, systemd-analyze, make, musl target, kconfiglib)"
