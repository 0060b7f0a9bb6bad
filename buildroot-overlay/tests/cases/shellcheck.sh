# shellcheck shell=bash disable=SC2154 # sourced: globals of the sourcing script
# Tests: shellcheck on the overlay's scripts (S50aesd and /etc/default/aesd
# as POSIX sh, the build and test scripts as bash, with their sources).

t_shellcheck_sh() {
	shellcheck --shell=sh "$1"
}

t_shellcheck_bash() {
	cd "$repo" || return
	shellcheck -x "$1"
}

harness_test "shellcheck --shell=sh rootfs/etc/init.d/S50aesd" t_shellcheck_sh "$overlay_dir/rootfs/etc/init.d/S50aesd"
harness_test "shellcheck --shell=sh rootfs/etc/default/aesd" t_shellcheck_sh "$overlay_dir/rootfs/etc/default/aesd"
for script in assemble.sh tests/run.sh tests/setup.sh tests/harness.sh; do
	harness_test "shellcheck $script" t_shellcheck_bash "buildroot-overlay/$script"
done
