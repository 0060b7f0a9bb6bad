# shellcheck shell=bash disable=SC2154,SC2034 # sourced: globals of the sourcing script
# The emulated board: what qemu-system-riscv32 runs (CPU, harts, memory,
# firmware, kernel, initramfs, disk, network) and where build.sh caches it.
# Reads $images (build.sh's out/), $run (the run's work folder) and $disk
# (disk.sh's image); the network is net.sh's (netdev_arg).

TARGET="riscv32imac-unknown-linux-musl"
# The board's CPU: rv32 with C, without F/D, and without what QEMU 7.2's rv32
# enables by default that the VexRiscvSMP lacks (H, Sstc, Zb*, Zihintpause).
CPU="rv32,c=on,f=off,d=off,h=off,sstc=off,zba=off,zbb=off,zbc=off,zbs=off,Zihintpause=off"
SMP=2
MEM=256M
GUEST_AESD_PORT=7878
GUEST_METRICS_PORT=9878
# aesd's HTTP API (OpenBao's), as guest/etc/default/aesd sets it.
GUEST_HTTP_PORT=8200

AESD_QEMU_HOME="${AESD_QEMU_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-qemu}"
export AESD_QEMU_HOME

# qemu_args: qemu-system-riscv32's arguments for the board, one per line.
qemu_args() {
	printf '%s\n' -name aesd-emulated-board -machine virt -cpu "$CPU" -smp "$SMP" -m "$MEM" \
		-bios "$images/fw_dynamic.bin" -kernel "$images/Image" -initrd "$run/initramfs.cpio.gz" \
		-append "console=ttyS0 panic=-1" \
		-netdev "$(netdev_arg)" \
		-device virtio-net-device,netdev=net0 -device virtio-rng-device \
		-drive "file=${disk//,/,,},format=raw,if=none,id=disk0" -device virtio-blk-device,drive=disk0 \
		-no-reboot
}
