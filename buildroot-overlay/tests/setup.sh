#!/usr/bin/env bash
# Installs what buildroot-overlay/tests/run.sh needs, idempotently (a second
# run only checks and takes a second or two):
#   apt:    shellcheck, busybox-static, openssl, util-linux (unshare),
#           systemd (systemd-analyze), make, python3-venv (only if missing)
#   rustup: the x86_64-unknown-linux-musl target (static test binaries)
#   PyPI:   kconfiglib, in a venv outside the repository
#           (${XDG_CACHE_HOME:-~/.cache}/aesd-buildroot-overlay/venv)
# Needs root for apt (CI and the developer machines run as root).
set -euo pipefail

KCONFIGLIB_VERSION=14.1.0
venv=${XDG_CACHE_HOME:-$HOME/.cache}/aesd-buildroot-overlay/venv

apt_updated=0
apt_install() {
	if [ "$apt_updated" = 0 ]; then
		apt-get update -qq
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

missing=()
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
installed busybox-static || missing+=(busybox-static)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v od >/dev/null 2>&1 || missing+=(coreutils)
command -v tar >/dev/null 2>&1 || missing+=(tar)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ "${#missing[@]}" -gt 0 ]; then
	echo "setup: apt-get install ${missing[*]}"
	apt_install "${missing[@]}"
fi

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
