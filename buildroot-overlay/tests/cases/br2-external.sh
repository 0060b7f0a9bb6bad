# shellcheck shell=bash disable=SC2154,SC2016 # sourced: globals of the sourcing script; literal $ and backquotes in patterns
# Tests: the Buildroot package's install commands (run by make with
# stand-ins for Buildroot, br2-harness.mk) and the Kconfig files + defconfig
# fragment (kconfiglib).

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

harness_test "br2-external: layout and conventions" t_br2_external_layout

# The package's install commands, run by make with stand-ins for Buildroot.
t_br2_package_install() {
	local dest=$test_tmp/br2-target tree
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
	# expanded by make (only when the default cargo target directory is used;
	# the profile's folder, release or debug, that run.sh built into).
	if [ "$target_dir" = "$repo/target" ]; then
		rm -rf "$dest"
		make -s -f "$here/br2-harness.mk" BR2_EXTERNAL_AESD_PATH="$overlay_dir/br2-external" TARGET_DIR="$dest" \
			BR2_PACKAGE_AESD_PREBUILT_DIR='"$(BR2_EXTERNAL_AESD_PATH)/../../target/x86_64-unknown-linux-musl/'"${bin_dir##*/}"'"' \
			install-target
		cmp "$bin_dir/aesd" "$dest/usr/bin/aesd"
	fi
}

harness_test "br2-external: package install commands (make, Buildroot stand-ins)" t_br2_package_install

t_br2_package_missing_binary() {
	local output rc
	output=$(make -s -f "$here/br2-harness.mk" BR2_EXTERNAL_AESD_PATH="$overlay_dir/br2-external" \
		TARGET_DIR="$test_tmp/br2-none" BR2_PACKAGE_AESD_PREBUILT_DIR='"/nonexistent"' install-target 2>&1) && rc=0 || rc=$?
	[ "$rc" != 0 ] || die "install succeeded without a binary"
	expect_match "aesd: no prebuilt binary at /nonexistent/aesd" "$output" "message"
	[ ! -e "$test_tmp/br2-none/usr/bin/aesd" ] || die "something was installed"
}

harness_test "br2-external: package fails clearly without the prebuilt binary" t_br2_package_missing_binary

# The package adds the aesd user S50aesd runs aesd as: the same line as the
# users table an image without the package names (and the tests apply).
t_br2_package_user() {
	local users table
	users=$(make -s -f "$here/br2-harness.mk" BR2_EXTERNAL_AESD_PATH="$overlay_dir/br2-external" print-users)
	table=$(grep -v '^#' "$overlay_dir/users.table")
	[ "$users" = "$table" ] || die "AESD_USERS '$users' differs from users.table '$table'"
	read -r name uid group gid password home shell _ <<<"$users"
	[ "$name $uid $group $gid $password $home $shell" = "aesd -1 aesd -1 * - -" ] ||
		die "not a system user aesd without login, home or shell: $users"
}

harness_test "br2-external: AESD_USERS adds the system user aesd (as users.table)" t_br2_package_user

t_kconfig() {
	[ -x "$venv/bin/python" ] || die "no kconfiglib venv at $venv: run buildroot-overlay/tests/setup.sh"
	"$venv/bin/python" "$here/kconfig_check.py" "$overlay_dir/br2-external"
}

harness_test "br2-external: Kconfig files and fragment parse (kconfiglib)" t_kconfig
