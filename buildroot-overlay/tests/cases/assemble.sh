# shellcheck shell=bash disable=SC2154 # sourced: globals of the sourcing script
# Tests: assemble.sh builds the expected tree and tarball with the expected
# modes and refuses wrong, dynamic or missing binaries. t_assemble leaves the
# overlay in $overlay_out for the tarball and sandbox tests.

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

harness_test "assemble.sh: tree, modes, contents" t_assemble

t_assemble_tarball() {
	local listing expected
	listing=$(tar -tvzf "$work/overlay.tar.gz" | awk '{print $1, $2, $6}' |
		sed 's#\./##; s#/$##' | awk 'NF == 3' | sort -k3)
	expected=$(cd "$overlay_out" && find . -mindepth 1 -printf '%M 0/0 %P\n' | sort -k3)
	[ "$listing" = "$expected" ] || die "tarball listing differs:" "$(diff <(echo "$expected") <(echo "$listing"))"
	echo "$listing"
}

harness_test "assemble.sh --tar: root-owned entries, same modes" t_assemble_tarball

t_assemble_wrong_arch() {
	local output rc
	output=$("$overlay_dir/assemble.sh" --bin "$bin_dir" --out "$test_tmp/wrong" 2>&1) && rc=0 || rc=$?
	expect_rc 1 "$rc" "x86_64 binary as riscv32imac"
	expect_match "is an ELF64 for machine 62, not for riscv32imac-unknown-linux-musl" "$output" "message"
	[ ! -e "$test_tmp/wrong/usr/bin/aesd" ] || die "an overlay was assembled anyway"
}

harness_test "assemble.sh refuses a binary of the wrong architecture" t_assemble_wrong_arch

t_assemble_dynamic() {
	local output rc
	mkdir -p "$test_tmp/dynamic"
	cp "$(command -v ls)" "$test_tmp/dynamic/aesd"
	output=$("$overlay_dir/assemble.sh" --target x86_64-unknown-linux-gnu --bin "$test_tmp/dynamic" --out "$test_tmp/dyn-out" 2>&1) && rc=0 || rc=$?
	expect_rc 1 "$rc" "dynamically linked binary"
	expect_match "is dynamically linked" "$output" "message"
}

harness_test "assemble.sh refuses a dynamically linked binary" t_assemble_dynamic

t_assemble_missing() {
	local output rc
	output=$("$overlay_dir/assemble.sh" --bin "$test_tmp/nothing-here" --out "$test_tmp/missing-out" 2>&1) && rc=0 || rc=$?
	expect_rc 1 "$rc" "missing binary"
	expect_match "no aesd binary for riscv32imac-unknown-linux-musl" "$output" "message"
	expect_match "Build it with:" "$output" "build hint"
	expect_match "cargo .*build --release -p aesd-server" "$output" "build command"
	echo "$output"
}

harness_test "assemble.sh names the build command for a missing binary" t_assemble_missing

t_assemble_refuses_foreign_out() {
	local output rc
	mkdir -p "$test_tmp/foreign"
	echo "precious" >"$test_tmp/foreign/data"
	output=$("$overlay_dir/assemble.sh" --target "$musl" --bin "$bin_dir" --out "$test_tmp/foreign" 2>&1) && rc=0 || rc=$?
	expect_rc 1 "$rc" "non-empty --out"
	expect_match "not an earlier aesd overlay" "$output" "message"
	[ "$(cat "$test_tmp/foreign/data")" = precious ] || die "the directory was touched"
}

harness_test "assemble.sh refuses a foreign non-empty --out" t_assemble_refuses_foreign_out
