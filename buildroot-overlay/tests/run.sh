#!/usr/bin/env bash
# Tests of buildroot-overlay/ (run buildroot-overlay/tests/setup.sh first):
#   - shellcheck on every script (S50aesd and /etc/default/aesd as POSIX sh);
#   - the shipped configurations pass `aesd --check-config`; the sysctl file
#     names real keys and BusyBox's sysctl parses it;
#   - assemble.sh builds the expected tree and tarball with the expected modes
#     and refuses wrong, dynamic or missing binaries;
#   - the Buildroot package's install commands (run with stand-ins for
#     Buildroot) and the Kconfig files + defconfig fragment (kconfiglib);
#   - the systemd unit (systemd-analyze verify, offline security score);
#   - S50aesd for real: a chroot built from Debian's busybox-static plus the
#     assembled overlay with a static x86_64 musl aesd, driven through
#     start / status / restart / stop and failure cases, with real jobs sent
#     by aescrypt from the host over 127.0.0.1 and checked with openssl.
# Only loopback addresses are used. Every process started in the sandbox or
# in the background is killed on exit, also on failure or interruption.
#
#   buildroot-overlay/tests/run.sh [--no-build] [--keep] [-v]
#     --no-build  use the existing target/x86_64-unknown-linux-musl/release
#                 binaries instead of running cargo build first
#     --keep      keep the work directory (sandbox, logs) for inspection
#     -v          also print the output of passing tests
#
# Honours CARGO_TARGET_DIR. The last line is "N passed, M failed"; the exit
# status is 0 only when nothing failed.
# shellcheck disable=SC2016 # literal $ and backquotes in patterns on purpose
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
overlay_dir=$(cd "$here/.." && pwd)
repo=$(cd "$overlay_dir/.." && pwd)
# free_port (scripts/lib.sh is checked on its own by scripts/test.sh)
# shellcheck disable=SC1091
. "$repo/scripts/lib.sh"
musl=x86_64-unknown-linux-musl
target_dir=${CARGO_TARGET_DIR:-$repo/target}
bin_dir=$target_dir/$musl/release
venv=${XDG_CACHE_HOME:-$HOME/.cache}/aesd-buildroot-overlay/venv

build=1
keep=0
verbose=0
for arg in "$@"; do
	case "$arg" in
		--no-build) build=0 ;;
		--keep) keep=1 ;;
		-v | --verbose) verbose=1 ;;
		-h | --help)
			sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
			exit 0
			;;
		*)
			echo "run.sh: unknown argument: $arg" >&2
			exit 2
			;;
	esac
done

passed=0
failed=0
skipped=0
work=$(cd "$(mktemp -d /tmp/aesd-overlay-test.XXXXXX)" && pwd -P)
sandbox=$work/root
overlay_out=$work/overlay
host_pids_file=$work/host.pids
: >"$host_pids_file"

# --- processes and cleanup ---------------------------------------------------

# Prints the pids of processes whose root directory is inside the work
# directory: everything started in the sandbox (aesd, test fakes).
sandbox_pids() {
	local proc root
	for proc in /proc/[0-9]*; do
		root=$(readlink "$proc/root" 2>/dev/null) || continue
		case "$root" in
			"$work" | "$work"/*) echo "${proc#/proc/}" ;;
		esac
	done
}

kill_pids() {
	local pid
	for pid in "$@"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		local alive=0
		for pid in "$@"; do
			if kill -0 "$pid" 2>/dev/null; then alive=1; fi
		done
		[ "$alive" = 1 ] || return 0
		sleep 0.2
	done
	for pid in "$@"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
}

cleanup() {
	local rc=$? pids
	trap - EXIT INT TERM
	mapfile -t pids < <(
		sandbox_pids
		cat "$host_pids_file" 2>/dev/null
	)
	if [ "${#pids[@]}" -gt 0 ]; then
		kill_pids "${pids[@]}"
	fi
	if [ "$keep" = 1 ]; then
		echo "run.sh: kept $work"
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- test harness ------------------------------------------------------------

# run_test NAME FUNCTION [ARG...]: runs FUNCTION in a subshell with errexit;
# status 0 passes, 77 skips (last output line says why), anything else fails.
run_test() {
	local name=$1 log=$work/current.log rc
	shift
	set +e
	(
		set -e
		"$@"
	) >"$log" 2>&1 </dev/null
	rc=$?
	set -e
	if [ "$rc" = 0 ]; then
		passed=$((passed + 1))
		echo "ok   $name"
		if [ "$verbose" = 1 ] && [ -s "$log" ]; then sed 's/^/       /' "$log"; fi
	elif [ "$rc" = 77 ]; then
		skipped=$((skipped + 1))
		echo "skip $name: $(tail -n 1 "$log")"
	else
		failed=$((failed + 1))
		echo "FAIL $name"
		sed 's/^/       /' "$log"
		reset_sandbox
	fi
}

# After a failure: kill whatever runs in the sandbox and drop its pid files,
# so that one failure does not cascade into the following tests.
reset_sandbox() {
	local pids
	mapfile -t pids < <(sandbox_pids)
	if [ "${#pids[@]}" -gt 0 ]; then
		kill_pids "${pids[@]}"
	fi
	rm -f "$sandbox"/var/run/*.pid
}

die() {
	printf '%s\n' "$*" >&2
	return 1
}

# expect_rc WANT GOT WHAT
expect_rc() {
	[ "$2" = "$1" ] || die "$3: exit status $2, expected $1"
}

# expect_match ERE TEXT WHAT
expect_match() {
	grep -qE -- "$1" <<<"$2" || die "$3: /$1/ not found in:" "$2"
}

expect_no_match() {
	if grep -qE -- "$1" <<<"$2"; then die "$3: /$1/ unexpectedly found in:" "$2"; fi
}

# --- the sandbox ---------------------------------------------------------------

# sbx [NAME=VALUE...] COMMAND [ARG...]: runs COMMAND chrooted into the
# sandbox, with only PATH and the given variables in its environment, in a
# private mount namespace that has /proc and /dev/null mounted inside the
# sandbox (the mounts vanish with the namespace's last process). The network
# namespace is the host's: aesd listens on 127.0.0.1 only.
sbx() {
	local -a vars=()
	while [ $# -gt 0 ] && [[ $1 == [A-Za-z_]*=* ]]; do
		vars+=("$1")
		shift
	done
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${vars[@]}" \
		unshare --mount --propagation private \
		sh -c 'root=$1; shift; mount -t proc proc "$root/proc" && mount --bind /dev/null "$root/dev/null" && exec chroot "$root" "$@"' \
		sbx "$sandbox" "$@"
}

# initd [NAME=VALUE...] ACTION: S50aesd in the sandbox; sets $out and $rc.
initd() {
	out=$(sbx "$@" 2>&1) && rc=0 || rc=$?
}

init_script() {
	local -a args=("$@")
	local action=${args[-1]}
	unset 'args[-1]'
	initd "${args[@]}" /etc/init.d/S50aesd "$action"
}

sandbox_pid() {
	cat "$sandbox/var/run/aesd.pid"
}

comm_of() {
	cat "/proc/$1/comm" 2>/dev/null
}

# gone PID: the process has exited (or is a zombie waiting to be reaped).
gone() {
	local state
	[ -r "/proc/$1/stat" ] || return 0
	state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
	[ -z "$state" ] || [ "$state" = Z ] || [ "$state" = X ]
}

aescrypt() {
	"$bin_dir/aescrypt" "$@"
}

# --- static tests ----------------------------------------------------------------

t_shellcheck_sh() {
	shellcheck --shell=sh "$1"
}

t_shellcheck_bash() {
	shellcheck "$1"
}

t_check_config() {
	local file=$1 workers=$2 chunk=$3 output
	output=$("$bin_dir/aesd" --check-config "$file")
	echo "$output"
	expect_match ": ok$" "$output" "check-config"
	expect_match "^workers = $workers$" "$output" "workers"
	expect_match "^chunk-size = $chunk$" "$output" "chunk-size"
	expect_match '^max-iter = 20000$' "$output" "max-iter"
	expect_match '^listen = "0\.0\.0\.0:7878"$' "$output" "listen"
}

t_metrics_enabled() {
	local file=$overlay_dir/rootfs/etc/aesd/aesd.toml output
	output=$("$bin_dir/aesd" --check-config "$file")
	expect_match '^metrics-listen = "0\.0\.0\.0:9878"$' "$output" "metrics-listen"
	expect_match '^temperature = "auto"$' "$output" "temperature"
}

# The sysctl keys exist in this kernel (read only) and BusyBox's sysctl -p
# writes the intended values into a fake /proc/sys in a chroot without /proc.
t_sysctl() {
	local conf=$overlay_dir/rootfs/etc/sysctl.d/50-aesd.conf fake=$work/sysctl-root key value path
	rm -rf "$fake"
	mkdir -p "$fake/bin" "$fake/etc" "$fake/proc/sys"
	cp "$(command -v busybox)" "$fake/bin/busybox"
	cp "$conf" "$fake/etc/50-aesd.conf"
	local -A want=()
	while IFS= read -r line; do
		case "$line" in '' | '#'*) continue ;; esac
		key=${line%%=*}
		key=${key//[[:space:]]/}
		value=${line#*=}
		value=${value#"${value%%[![:space:]]*}"}
		path=${key//.//}
		[ -e "/proc/sys/$path" ] || die "$key: no /proc/sys/$path in this kernel"
		mkdir -p "$(dirname "$fake/proc/sys/$path")"
		: >"$fake/proc/sys/$path"
		want[$path]=$value
	done <"$conf"
	[ "${#want[@]}" -ge 6 ] || die "only ${#want[@]} settings found"
	mountpoint -q "$fake/proc" && die "fake /proc is a mount point"
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$fake" /bin/busybox sysctl -p /etc/50-aesd.conf
	for path in "${!want[@]}"; do
		value=$(cat "$fake/proc/sys/$path")
		[ "$value" = "${want[$path]}" ] || die "$path: busybox wrote '$value', want '${want[$path]}'"
	done
}

t_interfaces() {
	local file=$overlay_dir/rootfs/etc/network/interfaces
	grep -qE '^iface eth0 inet static$' "$file" || die "no static eth0"
	grep -qE '^[[:space:]]+address 192\.168\.1\.50$' "$file" || die "no address 192.168.1.50"
	grep -qE '^[[:space:]]+netmask 255\.255\.255\.0$' "$file" || die "no netmask 255.255.255.0"
}

expected_tree="755 etc
755 etc/aesd
644 etc/aesd/aesd.toml
755 etc/default
644 etc/default/aesd
755 etc/init.d
755 etc/init.d/S50aesd
755 etc/network
644 etc/network/interfaces
755 etc/sysctl.d
644 etc/sysctl.d/50-aesd.conf
755 usr
755 usr/bin
755 usr/bin/aesd"

t_assemble() {
	"$overlay_dir/assemble.sh" --target "$musl" --bin "$bin_dir" --out "$overlay_out" --tar "$work/overlay.tar.gz"
	local tree
	tree=$(cd "$overlay_out" && find . -mindepth 1 -printf '%m %P\n' | sort -k2)
	[ "$tree" = "$expected_tree" ] || die "tree differs:" "$(diff <(echo "$expected_tree") <(echo "$tree"))"
	cmp "$bin_dir/aesd" "$overlay_out/usr/bin/aesd"
	cmp "$overlay_dir/rootfs/etc/init.d/S50aesd" "$overlay_out/etc/init.d/S50aesd"
	cmp "$overlay_dir/rootfs/etc/aesd/aesd.toml" "$overlay_out/etc/aesd/aesd.toml"
	# Assembling again over the earlier result replaces it.
	"$overlay_dir/assemble.sh" --target "$musl" --bin "$bin_dir" --out "$overlay_out" >/dev/null
}

t_assemble_tarball() {
	local listing expected
	listing=$(tar -tvzf "$work/overlay.tar.gz" | awk '{print $1, $2, $6}' |
		sed 's#\./##; s#/$##' | awk 'NF == 3' | sort -k3)
	expected=$(cd "$overlay_out" && find . -mindepth 1 -printf '%M 0/0 %P\n' | sort -k3)
	[ "$listing" = "$expected" ] || die "tarball listing differs:" "$(diff <(echo "$expected") <(echo "$listing"))"
	echo "$listing"
}

t_assemble_wrong_arch() {
	local output rc
	output=$("$overlay_dir/assemble.sh" --bin "$bin_dir" --out "$work/wrong" 2>&1) && rc=0 || rc=$?
	expect_rc 1 "$rc" "x86_64 binary as riscv32imac"
	expect_match "is an ELF64 for machine 62, not for riscv32imac-unknown-linux-musl" "$output" "message"
	[ ! -e "$work/wrong/usr/bin/aesd" ] || die "an overlay was assembled anyway"
}

t_assemble_dynamic() {
	local output rc
	mkdir -p "$work/dynamic"
	cp "$(command -v ls)" "$work/dynamic/aesd"
	output=$("$overlay_dir/assemble.sh" --target x86_64-unknown-linux-gnu --bin "$work/dynamic" --out "$work/dyn-out" 2>&1) && rc=0 || rc=$?
	expect_rc 1 "$rc" "dynamically linked binary"
	expect_match "is dynamically linked" "$output" "message"
}

t_assemble_missing() {
	local output rc
	output=$("$overlay_dir/assemble.sh" --bin "$work/nothing-here" --out "$work/missing-out" 2>&1) && rc=0 || rc=$?
	expect_rc 1 "$rc" "missing binary"
	expect_match "no aesd binary for riscv32imac-unknown-linux-musl" "$output" "message"
	expect_match "Build it with:" "$output" "build hint"
	expect_match "cargo .*build --release -p aesd-server" "$output" "build command"
	echo "$output"
}

t_assemble_refuses_foreign_out() {
	local output rc
	mkdir -p "$work/foreign"
	echo "precious" >"$work/foreign/data"
	output=$("$overlay_dir/assemble.sh" --target "$musl" --bin "$bin_dir" --out "$work/foreign" 2>&1) && rc=0 || rc=$?
	expect_rc 1 "$rc" "non-empty --out"
	expect_match "not an earlier aesd overlay" "$output" "message"
	[ "$(cat "$work/foreign/data")" = precious ] || die "the directory was touched"
}

# The package's install commands, run by make with stand-ins for Buildroot.
t_br2_package_install() {
	local dest=$work/br2-target tree
	rm -rf "$dest"
	make -s -f "$here/br2-harness.mk" BR2_EXTERNAL_AESD_PATH="$overlay_dir/br2-external" \
		TARGET_DIR="$dest" BR2_PACKAGE_AESD_PREBUILT_DIR="\"$bin_dir\"" \
		install-target install-init-sysv install-init-systemd
	tree=$(cd "$dest" && find . -type f -printf '%m %P\n' | sort -k2)
	[ "$tree" = "644 etc/aesd/aesd.toml
755 etc/init.d/S50aesd
755 usr/bin/aesd
644 usr/lib/systemd/system/aesd.service" ] || die "installed tree:" "$tree"
	cmp "$bin_dir/aesd" "$dest/usr/bin/aesd"
	grep -q '^ExecStart=/usr/bin/aesd --config /etc/aesd/aesd.toml$' "$dest/usr/lib/systemd/system/aesd.service" ||
		die "unit not rewritten to /usr/bin/aesd"
	# The Kconfig default, $(BR2_EXTERNAL_AESD_PATH)/../../target/<triple>/release,
	# expanded by make (only when the default cargo target directory is used).
	if [ "$target_dir" = "$repo/target" ]; then
		rm -rf "$dest"
		make -s -f "$here/br2-harness.mk" BR2_EXTERNAL_AESD_PATH="$overlay_dir/br2-external" TARGET_DIR="$dest" \
			BR2_PACKAGE_AESD_PREBUILT_DIR='"$(BR2_EXTERNAL_AESD_PATH)/../../target/x86_64-unknown-linux-musl/release"' \
			install-target
		cmp "$bin_dir/aesd" "$dest/usr/bin/aesd"
	fi
}

t_br2_package_missing_binary() {
	local output rc
	output=$(make -s -f "$here/br2-harness.mk" BR2_EXTERNAL_AESD_PATH="$overlay_dir/br2-external" \
		TARGET_DIR="$work/br2-none" BR2_PACKAGE_AESD_PREBUILT_DIR='"/nonexistent"' install-target 2>&1) && rc=0 || rc=$?
	[ "$rc" != 0 ] || die "install succeeded without a binary"
	expect_match "aesd: no prebuilt binary at /nonexistent/aesd" "$output" "message"
	[ ! -e "$work/br2-none/usr/bin/aesd" ] || die "something was installed"
}

t_br2_external_layout() {
	local ext=$overlay_dir/br2-external
	grep -qx 'name: AESD' "$ext/external.desc" || die "external.desc: name is not AESD"
	grep -q '^desc: ' "$ext/external.desc" || die "external.desc: no desc"
	grep -qF 'source "$BR2_EXTERNAL_AESD_PATH/package/aesd/Config.in"' "$ext/Config.in" || die "Config.in does not source the package"
	grep -qF '$(BR2_EXTERNAL_AESD_PATH)/package/*/*.mk' "$ext/external.mk" || die "external.mk does not include the packages"
	grep -q '^\$(eval \$(generic-package))$' "$ext/package/aesd/aesd.mk" || die "aesd.mk is not a generic-package"
	# Variables of aesd.mk all carry the package's prefix.
	local bad
	bad=$(grep -oE '^[A-Z0-9_]+ *[:+?]?=' "$ext/package/aesd/aesd.mk" | grep -v '^AESD_' || true)
	[ -z "$bad" ] || die "aesd.mk sets non-AESD_ variables: $bad"
	# Config.in help text: tab + 2 spaces, at most 72 columns (Buildroot style).
	bad=$(expand -t 8 "$ext/package/aesd/Config.in" | awk '/^          / && length > 72')
	[ -z "$bad" ] || die "help lines over 72 columns:" "$bad"
}

t_kconfig() {
	[ -x "$venv/bin/python" ] || die "no kconfiglib venv at $venv: run buildroot-overlay/tests/setup.sh"
	"$venv/bin/python" "$here/kconfig_check.py" "$overlay_dir/br2-external"
}

# systemd-analyze checks that ExecStart's binary exists: verify a copy that
# points at the built binary.
unit_copy() {
	mkdir -p "$work/unit"
	sed "s#/usr/local/bin/aesd#$bin_dir/aesd#g" "$overlay_dir/systemd/aesd.service" >"$work/unit/aesd.service"
	echo "$work/unit/aesd.service"
}

t_systemd_verify() {
	command -v systemd-analyze >/dev/null 2>&1 || {
		echo "systemd-analyze not installed"
		return 77
	}
	local unit output
	unit=$(unit_copy)
	output=$(systemd-analyze verify "$unit" 2>&1) || die "systemd-analyze verify failed:" "$output"
	[ -z "$output" ] || die "systemd-analyze verify warned:" "$output"
}

t_systemd_security() {
	command -v systemd-analyze >/dev/null 2>&1 || {
		echo "systemd-analyze not installed"
		return 77
	}
	local unit output
	unit=$(unit_copy)
	# Exposure on systemd's 0-10 scale; --threshold is in tenths. 2.0 or less is "OK".
	output=$(systemd-analyze security --offline=true --threshold=20 "$unit" 2>&1) ||
		die "exposure above 2.0:" "$(tail -n 1 <<<"$output")"
	tail -n 1 <<<"$output"
}

t_systemd_hardening() {
	local unit=$overlay_dir/systemd/aesd.service key
	for key in 'DynamicUser=yes' 'NoNewPrivileges=yes' 'ProtectSystem=strict' 'ProtectHome=yes' \
		'PrivateTmp=yes' 'PrivateDevices=yes' 'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' \
		'CapabilityBoundingSet=' 'MemoryDenyWriteExecute=yes' 'LockPersonality=yes' \
		'SystemCallFilter=@system-service' \
		'ExecStartPre=/usr/local/bin/aesd --check-config /etc/aesd/aesd.toml' \
		'ExecStart=/usr/local/bin/aesd --config /etc/aesd/aesd.toml'; do
		grep -qxF "$key" "$unit" || die "missing: $key"
	done
}

# --- the init script in the sandbox -----------------------------------------------

t_sandbox() {
	[ -d "$overlay_out/usr/bin" ] || die "no assembled overlay (assemble test failed)"
	rm -rf "$sandbox"
	mkdir -p "$sandbox"/{bin,sbin,usr/bin,usr/sbin,proc,dev,tmp,var/run,var/log,opt}
	chmod 1777 "$sandbox/tmp"
	cp "$(command -v busybox)" "$sandbox/bin/busybox"
	: >"$sandbox/dev/null"
	sbx /bin/busybox --install -s /bin
	cp -a "$overlay_out/." "$sandbox/"
	sed -i -e "s/^listen = .*/listen = \"127.0.0.1:$port\"/" \
		-e "s/^metrics-listen = .*/metrics-listen = \"127.0.0.1:0\"/" "$sandbox/etc/aesd/aesd.toml"
	for tool in sh start-stop-daemon sed tail grep date sleep kill cat wc mv mkdir; do
		[ -e "$sandbox/bin/$tool" ] || die "busybox in the sandbox lacks $tool"
	done
	sbx /usr/bin/aesd --check-config /etc/aesd/aesd.toml
}

t_status_initially_stopped() {
	init_script status
	expect_rc 3 "$rc" "status"
	expect_match '^aesd is stopped$' "$out" "status"
}

t_start() {
	init_script start
	echo "$out"
	expect_rc 0 "$rc" "start"
	expect_match '^Starting aesd: OK$' "$out" "start"
	local pid
	pid=$(sandbox_pid)
	[[ $pid =~ ^[0-9]+$ ]] || die "pid file holds '$pid'"
	[ "$(comm_of "$pid")" = aesd ] || die "pid $pid is '$(comm_of "$pid")', not aesd"
	[ "$(readlink "/proc/$pid/root")" = "$sandbox" ] || die "pid $pid is not in the sandbox"
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--config /etc/aesd/aesd.toml" || die "cmdline: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
	grep -q "listening listen=127.0.0.1:$port" "$sandbox/var/log/aesd.log" || die "log:" "$(cat "$sandbox/var/log/aesd.log")"
	echo "$pid" >"$work/pid.started"
}

t_start_when_running() {
	local pid
	pid=$(cat "$work/pid.started")
	init_script start
	expect_rc 0 "$rc" "second start"
	expect_match "^Starting aesd: already running \(pid $pid\)$" "$out" "second start"
	[ "$(sandbox_pid)" = "$pid" ] || die "pid file changed"
}

t_status_running() {
	local pid
	pid=$(cat "$work/pid.started")
	init_script status
	expect_rc 0 "$rc" "status"
	expect_match "^aesd is running \(pid $pid\)$" "$out" "status"
}

# job SIZE NAME: encrypts SIZE random bytes through the sandbox's aesd with
# aescrypt and decrypts the result with openssl.
job() {
	local size=$1 name=$2
	head -c "$size" /dev/urandom >"$work/$name.plain"
	aescrypt encrypt --server "127.0.0.1:$port" --password-file "$work/pw" -i "$work/$name.plain" -o "$work/$name.enc" -v
	openssl enc -d -aes-256-cbc -pbkdf2 -pass "file:$work/pw" -in "$work/$name.enc" -out "$work/$name.dec"
	cmp "$work/$name.plain" "$work/$name.dec"
}

t_jobs() {
	# 3 MB, not a multiple of the block size: encrypted by aesd, decrypted by openssl.
	job 3000001 big
	# And the other way: encrypted by openssl, decrypted by aesd.
	openssl enc -aes-256-cbc -pbkdf2 -salt -pass "file:$work/pw" -in "$work/big.plain" -out "$work/big.ossl"
	aescrypt decrypt --server "127.0.0.1:$port" --password-file "$work/pw" -i "$work/big.ossl" -o "$work/big.back"
	cmp "$work/big.plain" "$work/big.back"
	[ "$(grep -c 'job done' "$sandbox/var/log/aesd.log")" -ge 2 ] || die "the log has no 'job done' lines"
}

t_restart() {
	local old new
	old=$(cat "$work/pid.started")
	init_script restart
	echo "$out"
	expect_rc 0 "$rc" "restart"
	expect_match '^Stopping aesd: OK$' "$out" "restart"
	expect_match '^Starting aesd: OK$' "$out" "restart"
	new=$(sandbox_pid)
	[ "$new" != "$old" ] || die "same pid $new after restart"
	gone "$old" || die "old aesd $old still running"
	[ "$(comm_of "$new")" = aesd ] || die "new pid $new is not aesd"
	job 100000 after-restart
	echo "$new" >"$work/pid.started"
}

t_stop() {
	local pid
	pid=$(cat "$work/pid.started")
	init_script stop
	expect_rc 0 "$rc" "stop"
	expect_match '^Stopping aesd: OK$' "$out" "stop"
	gone "$pid" || die "aesd $pid still running"
	[ ! -e "$sandbox/var/run/aesd.pid" ] || die "pid file left behind"
	grep -q 'SIGTERM received' "$sandbox/var/log/aesd.log" || die "aesd did not log SIGTERM"
}

t_status_after_stop() {
	init_script status
	expect_rc 3 "$rc" "status"
	expect_match '^aesd is stopped$' "$out" "status"
	[ ! -e "$sandbox/var/run/aesd.pid" ] || die "pid file exists"
}

t_stop_when_stopped() {
	init_script stop
	expect_rc 0 "$rc" "stop"
	expect_match '^Stopping aesd: not running$' "$out" "stop"
}

# stop while a job is in flight: aesd gets SIGTERM, lets the job finish
# (within shutdown-grace), and stop returns once aesd has exited.
t_stop_waits_for_job() {
	init_script start
	expect_rc 0 "$rc" "start"
	local pid client started elapsed
	pid=$(sandbox_pid)
	head -c 200000 /dev/urandom >"$work/slow.a"
	head -c 200000 /dev/urandom >"$work/slow.b"
	cat "$work/slow.a" "$work/slow.b" >"$work/slow.plain"
	{
		cat "$work/slow.a"
		sleep 3
		cat "$work/slow.b"
	} | aescrypt encrypt --server "127.0.0.1:$port" --password-file "$work/pw" -i - -o "$work/slow.enc" &
	client=$!
	echo "$client" >>"$host_pids_file"
	sleep 1
	started=$(date +%s%N)
	init_script stop
	elapsed=$((($(date +%s%N) - started) / 1000000))
	echo "$out (${elapsed} ms)"
	expect_rc 0 "$rc" "stop"
	expect_match '^Stopping aesd: OK$' "$out" "stop"
	wait "$client" || die "the in-flight job failed"
	[ "$elapsed" -ge 1000 ] || die "stop returned after ${elapsed} ms, before the job could finish"
	openssl enc -d -aes-256-cbc -pbkdf2 -pass "file:$work/pw" -in "$work/slow.enc" -out "$work/slow.dec"
	cmp "$work/slow.plain" "$work/slow.dec"
	gone "$pid" || die "aesd still running"
	grep -q 'shutting down: 30.0 s grace for running jobs active=1' "$sandbox/var/log/aesd.log" ||
		die "aesd did not report one active job at shutdown:" "$(tail -n 5 "$sandbox/var/log/aesd.log")"
}

nothing_running() {
	local pids
	pids=$(sandbox_pids)
	[ -z "$pids" ] || die "left running in the sandbox: $pids"
}

# bad_config NAME TOML-LINE REASON-ERE: start with a config that has the line
# appended must fail with exit 6 and aesd's reason, leaving nothing behind.
bad_config() {
	local name=$1 line=$2 reason=$3
	{
		grep -v '^workers' "$sandbox/etc/aesd/aesd.toml"
		echo "$line"
	} >"$sandbox/etc/aesd/$name.toml"
	init_script "AESD_CONFIG=/etc/aesd/$name.toml" start
	echo "$out"
	expect_rc 6 "$rc" "start with $name.toml"
	expect_match '^Starting aesd: FAIL$' "$out" "start"
	expect_match "^aesd: not started: invalid configuration: " "$out" "message"
	expect_match "$reason" "$out" "aesd's reason"
	[ ! -e "$sandbox/var/run/aesd.pid" ] || die "pid file left behind"
	nothing_running
	grep -q "S50aesd: not started: invalid configuration" "$sandbox/var/log/aesd.log" || die "reason not in the log"
}

t_bad_config_workers() {
	bad_config zero-workers 'workers = 0' 'setting `workers`: must be 1 to 1024, got 0'
}

t_bad_config_unknown_key() {
	bad_config unknown-key 'wrokers = 2' 'unknown field `wrokers`'
}

t_missing_binary() {
	init_script AESD_BIN=/usr/bin/no-such-aesd start
	expect_rc 5 "$rc" "start"
	expect_match '^aesd: not started: /usr/bin/no-such-aesd is missing or not executable$' "$out" "message"
	nothing_running
}

t_stale_pidfile() {
	# pid 1 is alive but is not aesd.
	echo 1 >"$sandbox/var/run/aesd.pid"
	init_script status
	expect_rc 1 "$rc" "status with a stale pid file"
	expect_match '^aesd is dead, but /var/run/aesd.pid exists$' "$out" "status"
	init_script start
	expect_rc 0 "$rc" "start over a stale pid file"
	expect_match '^Starting aesd: OK$' "$out" "start"
	[ "$(sandbox_pid)" != 1 ] || die "pid file not replaced"
	[ "$(comm_of "$(sandbox_pid)")" = aesd ] || die "not aesd"
}

# A second instance on the same port passes the config check but cannot
# bind: start must notice it died and report aesd's reason.
t_start_failure_reported() {
	init_script AESD_PIDFILE=/var/run/aesd-b.pid AESD_LOGFILE=/var/log/aesd-b.log start
	echo "$out"
	expect_rc 1 "$rc" "second instance"
	expect_match '^Starting aesd: FAIL$' "$out" "start"
	expect_match 'exited during startup' "$out" "message"
	expect_match '(in use|AddrInUse)' "$out" "aesd's reason"
	[ ! -e "$sandbox/var/run/aesd-b.pid" ] || die "pid file of the failed instance left behind"
	init_script status
	expect_rc 0 "$rc" "the first instance"
	init_script stop
	expect_rc 0 "$rc" "stop"
	nothing_running
}

t_defaults_file() {
	cat >"$sandbox/etc/default/aesd-test" <<'EOF'
AESD_ARGS="--max-queue 7 --log debug"
AESD_LOGFILE=/var/log/aesd-test.log
AESD_LOG=warn
EOF
	init_script AESD_DEFAULTS=/etc/default/aesd-test start
	expect_rc 0 "$rc" "start"
	local pid
	pid=$(sandbox_pid)
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- '--max-queue 7 --log debug' ||
		die "AESD_ARGS not passed: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
	tr '\0' '\n' <"/proc/$pid/environ" | grep -qx 'AESD_LOG=warn' || die "AESD_LOG not exported to aesd"
	# max-queue is 128 in aesd.toml: the flag wins.
	grep -q 'max_queue=7' "$sandbox/var/log/aesd-test.log" || die "log not in AESD_LOGFILE or flag not applied"
	init_script AESD_DEFAULTS=/etc/default/aesd-test stop
	expect_rc 0 "$rc" "stop"
	rm -f "$sandbox/etc/default/aesd-test"
}

t_log_rotation() {
	head -c 5000 /dev/zero | tr '\0' 'x' >"$sandbox/var/log/aesd.log"
	init_script AESD_LOG_MAX=4096 start
	expect_rc 0 "$rc" "start"
	[ "$(wc -c <"$sandbox/var/log/aesd.log.1")" = 5000 ] || die "old log not moved to aesd.log.1"
	grep -q 'listening' "$sandbox/var/log/aesd.log" || die "new log lacks 'listening'"
	[ "$(wc -c <"$sandbox/var/log/aesd.log")" -lt 4096 ] || die "new log too big"
	init_script stop
	expect_rc 0 "$rc" "stop"
}

# An aesd that ignores SIGTERM: stop waits shutdown-grace (1 s, from
# --print-config) + AESD_STOP_MARGIN (1 s), then sends SIGKILL.
t_stop_escalates_to_kill() {
	mkdir -p "$sandbox/opt/fake"
	cat >"$sandbox/opt/fake/aesd" <<'EOF'
#!/bin/sh
case "$*" in
	*--check-config*) echo "fake: ok"; exit 0 ;;
	*--print-config*) echo "shutdown-grace = 1.0"; exit 0 ;;
esac
trap '' TERM
echo "fake aesd listening" >&2
while :; do sleep 1; done
EOF
	chmod 755 "$sandbox/opt/fake/aesd"
	local -a env=(AESD_BIN=/opt/fake/aesd AESD_STOP_MARGIN=1 AESD_LOGFILE=/var/log/fake.log)
	init_script "${env[@]}" start
	expect_rc 0 "$rc" "start"
	local pid started elapsed
	pid=$(sandbox_pid)
	[ "$(comm_of "$pid")" = aesd ] || die "fake runs as '$(comm_of "$pid")'"
	started=$(date +%s%N)
	init_script "${env[@]}" stop
	elapsed=$((($(date +%s%N) - started) / 1000000))
	echo "$out (${elapsed} ms)"
	expect_rc 0 "$rc" "stop"
	expect_match '^Stopping aesd: still running after 2s, sending SIGKILL: OK$' "$out" "stop"
	[ "$elapsed" -ge 1000 ] || die "SIGKILL after only ${elapsed} ms"
	gone "$pid" || die "fake aesd survived"
	[ ! -e "$sandbox/var/run/aesd.pid" ] || die "pid file left behind"
}

t_nothing_left() {
	# The fake's last `sleep 1` may linger for up to a second.
	for _ in $(seq 1 20); do
		[ -n "$(sandbox_pids)" ] || return 0
		sleep 0.2
	done
	nothing_running
}

# --- main ------------------------------------------------------------------------

missing=()
for tool in shellcheck busybox openssl unshare make od tar; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "run.sh: missing ${missing[*]}: run buildroot-overlay/tests/setup.sh first" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

if [ "$build" = 1 ]; then
	echo "building static aesd + aescrypt ($musl, release)..."
	start_time=$SECONDS
	if ! (cd "$repo" && cargo build --release --locked --target "$musl" -p aesd-server -p aesd-client) >"$work/build.log" 2>&1; then
		tail -n 30 "$work/build.log"
		echo "run.sh: cargo build failed"
		echo "0 passed, 1 failed"
		exit 1
	fi
	echo "built in $((SECONDS - start_time)) s"
fi
for binary in aesd aescrypt; do
	if [ ! -x "$bin_dir/$binary" ]; then
		echo "run.sh: no $bin_dir/$binary (drop --no-build)" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
done
printf 'aesd test password %s\n' "$RANDOM$RANDOM" >"$work/pw"
chmod 600 "$work/pw"
port=$(free_port)

run_test "shellcheck --shell=sh rootfs/etc/init.d/S50aesd" t_shellcheck_sh "$overlay_dir/rootfs/etc/init.d/S50aesd"
run_test "shellcheck --shell=sh rootfs/etc/default/aesd" t_shellcheck_sh "$overlay_dir/rootfs/etc/default/aesd"
for script in assemble.sh tests/run.sh tests/setup.sh; do
	run_test "shellcheck $script" t_shellcheck_bash "$overlay_dir/$script"
done
run_test "aesd --check-config accepts rootfs/etc/aesd/aesd.toml" t_check_config "$overlay_dir/rootfs/etc/aesd/aesd.toml" 2 16384
run_test "aesd --check-config accepts systemd/aesd-rpi4.toml" t_check_config "$overlay_dir/systemd/aesd-rpi4.toml" 4 65536
run_test "the shipped aesd.toml enables metrics on 0.0.0.0:9878 with temperature auto" t_metrics_enabled
run_test "sysctl keys exist; busybox sysctl -p applies 50-aesd.conf" t_sysctl
run_test "network/interfaces example: static 192.168.1.50/24" t_interfaces
run_test "assemble.sh: tree, modes, contents" t_assemble
run_test "assemble.sh --tar: root-owned entries, same modes" t_assemble_tarball
run_test "assemble.sh refuses a binary of the wrong architecture" t_assemble_wrong_arch
run_test "assemble.sh refuses a dynamically linked binary" t_assemble_dynamic
run_test "assemble.sh names the build command for a missing binary" t_assemble_missing
run_test "assemble.sh refuses a foreign non-empty --out" t_assemble_refuses_foreign_out
run_test "br2-external: layout and conventions" t_br2_external_layout
run_test "br2-external: package install commands (make, Buildroot stand-ins)" t_br2_package_install
run_test "br2-external: package fails clearly without the prebuilt binary" t_br2_package_missing_binary
run_test "br2-external: Kconfig files and fragment parse (kconfiglib)" t_kconfig
run_test "systemd: aesd.service has the hardening and the config check" t_systemd_hardening
run_test "systemd: systemd-analyze verify aesd.service" t_systemd_verify
run_test "systemd: offline security exposure <= 2.0" t_systemd_security
run_test "sandbox: busybox-static chroot + assembled overlay (port $port)" t_sandbox
run_test "S50aesd status before start: stopped, exit 3" t_status_initially_stopped
run_test "S50aesd start: OK, pid file names aesd" t_start
run_test "S50aesd start again: already running, same pid" t_start_when_running
run_test "S50aesd status: running (pid N), exit 0" t_status_running
run_test "jobs through the daemon: aesd->openssl and openssl->aesd" t_jobs
run_test "S50aesd restart: new pid, still serving" t_restart
run_test "S50aesd stop: SIGTERM, process and pid file gone" t_stop
run_test "S50aesd status after stop: stopped, exit 3" t_status_after_stop
run_test "S50aesd stop when stopped: exit 0" t_stop_when_stopped
run_test "S50aesd stop lets an in-flight job finish" t_stop_waits_for_job
run_test "bad config (workers = 0): start refused with the reason, exit 6" t_bad_config_workers
run_test "bad config (unknown key): start refused with the reason, exit 6" t_bad_config_unknown_key
run_test "missing binary: start refused, exit 5" t_missing_binary
run_test "stale pid file: status exit 1, start replaces it" t_stale_pidfile
run_test "startup failure (port in use) is detected and explained" t_start_failure_reported
run_test "/etc/default file: AESD_ARGS, AESD_LOGFILE, exported AESD_* settings" t_defaults_file
run_test "log rotation past AESD_LOG_MAX at start" t_log_rotation
run_test "S50aesd stop escalates to SIGKILL after grace + margin" t_stop_escalates_to_kill
run_test "nothing left running in the sandbox" t_nothing_left

if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" = 0 ]
