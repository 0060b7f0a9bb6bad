# shellcheck shell=bash disable=SC2154 # sourced by soc/sim/build-board.sh: its globals
# What the simulated board boots, besides the SoC itself: the kernel (the
# emulated board's build machinery with the LiteX fragment, in a cache of
# its own), BusyBox (the emulated board's), OpenSBI 1.6 for VexRiscv, the
# riscv32 aesd (board profile), rtlprobe and the initramfs. A failed step
# exits 1 with the end of its log.

# run_logged NAME CMD...: CMD's output goes to $logs/NAME.log.
run_logged() {
  local name=$1
  shift
  "$@" >>"$logs/$name.log" 2>&1 || {
    grep -v '^ *Compiling' "$logs/$name.log" | tail -n 30 >&2
    echo "build-board.sh: $name failed: $* (log: $logs/$name.log)" >&2
    exit 1
  }
}

# build_kernel: Image and gen_init_cpio into $kernel_home/out.
build_kernel() {
  step "kernel: Debian's linux-source-6.1, kernel.fragment + soc/sim/kernel-litex.fragment (cached)"
  : >"$logs/kernel.log"
  run_logged kernel env AESD_QEMU_HOME="$kernel_home" AESD_JOBS="$jobs" nice -n 19 \
    "$repo/buildroot-overlay/qemu/build.sh" --kernel-only --extra-fragment "$here/kernel-litex.fragment"
  # BusyBox (and the OpenSBI tarball) from the emulated board's cache.
  : >"$logs/busybox.log"
  run_logged busybox env AESD_JOBS="$jobs" nice -n 19 "$repo/buildroot-overlay/qemu/build.sh"
}

# patch_opensbi TREE: the two changes VexRiscv needs (DESIGN.md): no
# mstatush (the rv32 CLEAR_MDT would trap and hang before any output), and
# no semihosting (ebreak is a no-op on this core, so the probe succeeds and
# the console loops).
patch_opensbi() {
  local tree=$1
  local base="$tree/firmware/fw_base.S" defconfig="$tree/platform/generic/configs/defconfig"
  grep -q 'csrc	CSR_MSTATUSH, \\tmp' "$base" || {
    echo "build-board.sh: $base has no mstatush clear to remove: check the OpenSBI version" >&2
    exit 1
  }
  sed -i -e '/^	li 	\\tmp, MSTATUSH_MDT$/d' -e '/^	csrc	CSR_MSTATUSH, \\tmp$/d' "$base"
  if grep -q 'CSR_MSTATUSH, \\tmp' "$base"; then
    echo "build-board.sh: the mstatush clear is still in $base" >&2
    exit 1
  fi
  sed -i '/^CONFIG_SERIAL_SEMIHOSTING=y$/d' "$defconfig"
}

# build_opensbi DTB OUT: fw_jump.bin with DTB embedded, at 0x40f00000,
# jumping to the kernel at 0x40000000 with the device tree at 0x40ef0000.
build_opensbi() {
  local dtb=$1 out=$2 tarball
  tarball="${AESD_QEMU_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-qemu}/src/opensbi_1.6.orig.tar.gz"
  [[ -f "$tarball" ]] || {
    echo "build-board.sh: $tarball missing (buildroot-overlay/qemu/build.sh fetches it)" >&2
    exit 1
  }
  step "OpenSBI 1.6 fw_jump for VexRiscv (no mstatush, no semihosting), device tree embedded"
  local work="$variant_dir/opensbi"
  rm -rf "$work"
  mkdir -p "$work"
  : >"$logs/opensbi.log"
  run_logged opensbi tar -xzf "$tarball" -C "$work"
  local tree="$work/opensbi-1.6"
  patch_opensbi "$tree"
  run_logged opensbi nice -n 19 make -C "$tree" "-j$jobs" "O=$work/build" CROSS_COMPILE=riscv64-linux-gnu- \
    PLATFORM=generic PLATFORM_RISCV_XLEN=32 PLATFORM_RISCV_ISA=rv32imac_zicsr_zifencei \
    PLATFORM_RISCV_ABI=ilp32 FW_TEXT_START=0x40f00000 FW_JUMP_ADDR=0x40000000 \
    FW_JUMP_FDT_ADDR=0x40ef0000 "FW_FDT_PATH=$dtb"
  cp "$work/build/platform/generic/firmware/fw_jump.bin" "$out"
  rm -rf "$tree"
}

# build_userland: the riscv32 aesd (board profile) assembled with the overlay
# into $variant_dir/overlay, rtlprobe, and vexriscv_count (aesd's CBC kernel
# on the AES instruction alone, timed in user space: board-rtl.sh's cipher
# rows; release profile, the opt-level aesd instantiates the kernel at).
build_userland() {
  step "aesd for riscv32imac-unknown-linux-musl (board profile), rtlprobe and vexriscv_count"
  : >"$logs/cargo.log"
  # shellcheck source=scripts/cross/env.sh
  . "$repo/scripts/cross/env.sh"
  run_logged cargo env -C "$repo" nice -n 19 cargo build --locked --target riscv32imac-unknown-linux-musl \
    --profile board --workspace --bin aesd "-j$jobs"
  rm -rf "$variant_dir/overlay"
  run_logged cargo "$repo/buildroot-overlay/assemble.sh" --target riscv32imac-unknown-linux-musl \
    --bin "${CARGO_TARGET_DIR:-$repo/target}/riscv32imac-unknown-linux-musl/board" --out "$variant_dir/overlay"
  run_logged cargo "$AESD_ZIG" cc -target riscv32-linux-musl -mcpu=generic_rv32+m+a+c -O2 -static -s \
    -o "$variant_dir/rtlprobe" "$here/guest/rtlprobe.c" "$here/guest/primitives.c"
  run_logged cargo env -C "$repo" nice -n 19 cargo build --locked --target riscv32imac-unknown-linux-musl \
    --release -p aesd-vexriscv --features emulate --example vexriscv_count "-j$jobs"
  install -m 0755 "${CARGO_TARGET_DIR:-$repo/target}/riscv32imac-unknown-linux-musl/release/examples/vexriscv_count" \
    "$variant_dir/vexriscv_count"
}

# build_initramfs: the emulated board's initramfs (skeleton, BusyBox, the
# overlay with aesd, users) with the simulated board's changes: its own
# network settings and /etc/default/aesd back (the overlay's 192.168.1.50
# and its defaults, which the emulated board replaces), no S10disk (the
# emulated board's keyring disk: the simulated SoC has no disk, so aesd
# keeps no keyring), the console on ttyLXU0, aesd with one worker per core,
# and rtlprobe started before aesd, its ready line printed after. Written
# uncompressed to $variant_dir/initramfs.cpio.
build_initramfs() {
  step "initramfs: BusyBox, the overlay (S50aesd, aesd.toml, aesd), rtlprobe"
  local images="$variant_dir/images"
  mkdir -p "$images"
  ln -sf "${AESD_QEMU_HOME:-$HOME/.cache/aesd-qemu}/out/busybox" "$images/busybox"
  ln -sf "${AESD_QEMU_HOME:-$HOME/.cache/aesd-qemu}/out/busybox.links" "$images/busybox.links"
  ln -sf "$kernel_home/out/gen_init_cpio" "$images/gen_init_cpio"
  # shellcheck source=buildroot-overlay/qemu/lib/initramfs.sh
  . "$repo/buildroot-overlay/qemu/lib/initramfs.sh"
  # shellcheck source=buildroot-overlay/qemu/lib/builds.sh
  . "$repo/buildroot-overlay/qemu/lib/builds.sh"
  say() { printf '[board-rtl] %s\n' "$*" >&2; }
  # (make_initramfs reads $run, $images and $overlay; it packs once, and the
  # image is packed again below with the changes.)
  local run="$variant_dir/initramfs" overlay="$variant_dir/overlay"
  rm -rf "$run"
  mkdir -p "$run"
  make_initramfs
  local root="$run/rootfs"
  install -m 0644 "$repo/buildroot-overlay/rootfs/etc/network/interfaces" "$root/etc/network/interfaces"
  install -m 0644 "$overlay/etc/default/aesd" "$root/etc/default/aesd"
  rm -f "$root/etc/init.d/S10disk"
  sed -i 's/^ttyS0::/ttyLXU0::/' "$root/etc/inittab"
  grep -q '^ttyLXU0::' "$root/etc/inittab" || {
    echo "build-board.sh: no ttyS0 console line to move in the inittab" >&2
    exit 1
  }
  printf 'AESD_ARGS="--workers %s"\n# A simulated second is 200 s of wall time: give aesd time.\nAESD_START_WAIT=60\n' \
    "$cores" >>"$root/etc/default/aesd"
  install -m 0755 "$variant_dir/rtlprobe" "$root/usr/bin/rtlprobe"
  install -m 0755 "$variant_dir/vexriscv_count" "$root/usr/bin/vexriscv_count"
  install -m 0755 "$here/guest/S45rtlprobe" "$root/etc/init.d/S45rtlprobe"
  install -m 0755 "$here/guest/S99ready" "$root/etc/init.d/S99ready"
  pack_initramfs "$root"
  # Uncompressed in RAM: inflating it would cost the simulated core tens
  # of millions of cycles at every boot.
  gzip -dc "$run/initramfs.cpio.gz" >"$variant_dir/initramfs.cpio"
  rm -rf "$root"
}
