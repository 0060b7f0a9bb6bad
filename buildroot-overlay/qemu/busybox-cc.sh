#!/usr/bin/env bash
# C compiler (and linker driver) for BusyBox in the emulated board's
# initramfs: scripts/cross/zigcc.sh for riscv32imac-unknown-linux-musl (zig
# cc, static musl, rv32imac: the board's own binaries are built the same way),
# minus the GNU ld options BusyBox's link step passes that zig's lld driver
# rejects. Used by buildroot-overlay/qemu/build.sh as CC=...; not meant to be
# run by hand.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

args=()
for a in "$@"; do
	case "$a" in
		# GNU ld only (scripts/trylink): common-symbol warnings and sorting,
		# the link map and the verbose linker report that goes with it.
		# None of them changes the program.
		-Wl,--warn-common | -Wl,--sort-common | -Wl,--sort-section,* | -Wl,--sort-section=*) ;;
		-Wl,-Map,* | -Wl,-Map=* | -Wl,--verbose) ;;
		*) args+=("$a") ;;
	esac
done
exec "$here/../../scripts/cross/zigcc.sh" riscv32imac-unknown-linux-musl "${args[@]}"
