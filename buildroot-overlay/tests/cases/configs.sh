# shellcheck shell=bash disable=SC2154 # sourced: globals of the sourcing script
# Tests: the shipped configurations pass `aesd --check-config`; the sysctl
# file names real keys and BusyBox's sysctl parses it; the network example.

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

harness_test "aesd --check-config accepts rootfs/etc/aesd/aesd.toml" t_check_config "$overlay_dir/rootfs/etc/aesd/aesd.toml" 2 16384
harness_test "aesd --check-config accepts systemd/aesd-rpi4.toml" t_check_config "$overlay_dir/systemd/aesd-rpi4.toml" 4 65536

t_metrics_enabled() {
	local file=$overlay_dir/rootfs/etc/aesd/aesd.toml output
	output=$("$bin_dir/aesd" --check-config "$file")
	expect_match '^metrics-listen = "0\.0\.0\.0:9878"$' "$output" "metrics-listen"
	# Scrapes from the local networks only: the lab's 192.168.1.0/24 and
	# loopback, never every address.
	expect_match '^metrics-allow = "127\.0\.0\.0/8,10\.0\.0\.0/8,172\.16\.0\.0/12,192\.168\.0\.0/16,169\.254\.0\.0/16,::1/128,fc00::/7,fe80::/10"$' "$output" "metrics-allow"
	expect_match '^temperature = "auto"$' "$output" "temperature"
}

harness_test "the shipped aesd.toml enables metrics on 0.0.0.0:9878 for local networks only (metrics-allow), temperature auto" t_metrics_enabled

# The sysctl keys exist in this kernel (read only) and BusyBox's sysctl -p
# writes the intended values into a fake /proc/sys in a chroot without /proc.
t_sysctl() {
	local conf=$overlay_dir/rootfs/etc/sysctl.d/50-aesd.conf fake=$test_tmp/sysctl-root key value path
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

harness_test "sysctl keys exist; busybox sysctl -p applies 50-aesd.conf" t_sysctl

t_interfaces() {
	local file=$overlay_dir/rootfs/etc/network/interfaces
	grep -qE '^iface eth0 inet static$' "$file" || die "no static eth0"
	grep -qE '^[[:space:]]+address 192\.168\.1\.50$' "$file" || die "no address 192.168.1.50"
	grep -qE '^[[:space:]]+netmask 255\.255\.255\.0$' "$file" || die "no netmask 255.255.255.0"
}

harness_test "network/interfaces example: static 192.168.1.50/24" t_interfaces
