# shellcheck shell=bash disable=SC2154 # sourced: globals of the sourcing script
# Tests: the systemd unit (hardening keys, systemd-analyze verify, offline
# security score).

t_systemd_hardening() {
	local unit=$overlay_dir/systemd/aesd.service key
	for key in 'DynamicUser=yes' 'NoNewPrivileges=yes' 'ProtectSystem=strict' 'ProtectHome=yes' \
		'PrivateTmp=yes' 'PrivateDevices=yes' 'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' \
		'CapabilityBoundingSet=' 'MemoryDenyWriteExecute=yes' 'LockPersonality=yes' \
		'SystemCallFilter=@system-service' \
		'ExecStartPre=/usr/local/bin/aesd --check-config /etc/aesd/aesd.toml' \
		'ExecStart=/usr/local/bin/aesd --config /etc/aesd/aesd.toml' 'Type=notify' 'LimitCORE=0' \
		'MemoryMax=128M' 'TasksMax=64'; do
		grep -qxF "$key" "$unit" || die "missing: $key"
	done
}

harness_test "systemd: aesd.service has the hardening, the config check and the memory and task caps" t_systemd_hardening

# systemd-analyze checks that ExecStart's binary exists: verify a copy that
# points at the built binary.
unit_copy() {
	mkdir -p "$test_tmp/unit"
	sed "s#/usr/local/bin/aesd#$bin_dir/aesd#g" "$overlay_dir/systemd/aesd.service" >"$test_tmp/unit/aesd.service"
	echo "$test_tmp/unit/aesd.service"
}

t_systemd_verify() {
	command -v systemd-analyze >/dev/null 2>&1 || harness_skip "systemd-analyze not installed"
	local unit output
	unit=$(unit_copy)
	output=$(systemd-analyze verify "$unit" 2>&1) || die "systemd-analyze verify failed:" "$output"
	[ -z "$output" ] || die "systemd-analyze verify warned:" "$output"
}

harness_test "systemd: systemd-analyze verify aesd.service" t_systemd_verify

t_systemd_security() {
	command -v systemd-analyze >/dev/null 2>&1 || harness_skip "systemd-analyze not installed"
	local unit output
	unit=$(unit_copy)
	# Exposure on systemd's 0-10 scale; --threshold is in tenths. 2.0 or less is "OK".
	output=$(systemd-analyze security --offline=true --threshold=20 "$unit" 2>&1) ||
		die "exposure above 2.0:" "$(tail -n 1 <<<"$output")"
	tail -n 1 <<<"$output"
}

harness_test "systemd: offline security exposure <= 2.0" t_systemd_security
