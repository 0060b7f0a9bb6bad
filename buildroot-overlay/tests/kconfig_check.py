"""Parses the BR2_EXTERNAL tree's Kconfig files and the defconfig fragment
with kconfiglib (a Python implementation of Linux's Kconfig, the language
Buildroot uses), inside a small stand-in for Buildroot's top-level Config.in
that declares the Buildroot symbols they refer to.

Usage: python kconfig_check.py BR2_EXTERNAL_DIR

Checks: no Kconfig warnings; every symbol the fragment sets is declared;
after loading the fragment on a riscv32 configuration BR2_PACKAGE_AESD is y
and each architecture gets its prebuilt-directory default; the package is
not selectable on an architecture without a prebuilt binary. Exit 0 when
all hold, 1 otherwise (with the reasons on stderr).
"""

import os
import sys
import tempfile

import kconfiglib

# Buildroot symbols used by our Config.in files or set by the fragment, with
# their types in Buildroot (arch/Config.in*, Config.in, system/Config.in,
# package/busybox, package/ifupdown-scripts, package/libopenssl).
BUILDROOT_STUB = """
mainmenu "Buildroot stand-in"

choice
	prompt "Target Architecture"
config BR2_riscv
	bool "RISCV"
config BR2_aarch64
	bool "AArch64"
config BR2_x86_64
	bool "x86_64"
config BR2_mips
	bool "MIPS"
endchoice

config BR2_RISCV_32
	bool "32-bit RISC-V"
	depends on BR2_riscv
	default y

config BR2_USE_MMU
	bool "MMU"
	default y

config BR2_ROOTFS_OVERLAY
	string "Root filesystem overlay directories"

config BR2_INIT_BUSYBOX
	bool "BusyBox init"

config BR2_PACKAGE_BUSYBOX
	bool "BusyBox"

config BR2_PACKAGE_IFUPDOWN_SCRIPTS
	bool "ifupdown scripts"

config BR2_PACKAGE_PROCPS_NG
	bool "procps-ng"

config BR2_TARGET_GENERIC_HOSTNAME
	string "System hostname"

config BR2_TARGET_GENERIC_ISSUE
	string "System banner"

config BR2_PACKAGE_LIBOPENSSL
	bool "libopenssl"

config BR2_PACKAGE_LIBOPENSSL_BIN
	bool "openssl binary"
	depends on BR2_PACKAGE_LIBOPENSSL

menu "External options"
source "$BR2_EXTERNAL_AESD_PATH/Config.in"
endmenu
"""


def main() -> int:
    external = os.path.abspath(sys.argv[1])
    os.environ["BR2_EXTERNAL_AESD_PATH"] = external
    # Buildroot's symbols carry their BR2_ prefix in their names; .config
    # lines have no extra prefix (kconfiglib's default is CONFIG_).
    os.environ["CONFIG_"] = ""
    problems = []

    with tempfile.TemporaryDirectory() as tmp:
        top = os.path.join(tmp, "Config.in")
        with open(top, "w", encoding="utf-8") as file:
            file.write(BUILDROOT_STUB)
        kconf = kconfiglib.Kconfig(top, warn_to_stderr=False)
        problems += [f"Kconfig: {w}" for w in kconf.warnings]

        for name in ("BR2_PACKAGE_AESD", "BR2_PACKAGE_AESD_PREBUILT_DIR"):
            if name not in kconf.syms or not kconf.syms[name].nodes:
                problems.append(f"{name} is not declared by the BR2_EXTERNAL tree")

        fragment = os.path.join(external, "configs", "aesd_litex_vexriscv.fragment")
        with open(fragment, encoding="utf-8") as file:
            for number, line in enumerate(file, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                name = line.split("=", 1)[0]
                if name not in kconf.syms or not kconf.syms[name].nodes:
                    problems.append(f"{fragment}:{number}: {name} is not a known symbol")

        # The fragment over a riscv32 base configuration.
        kconf.syms["BR2_riscv"].set_value(2)
        before = len(kconf.warnings)
        kconf.load_config(fragment, replace=False)
        problems += [f"loading the fragment: {w}" for w in kconf.warnings[before:]]
        aesd = kconf.syms["BR2_PACKAGE_AESD"]
        if aesd.str_value != "y":
            problems.append(f"BR2_PACKAGE_AESD is {aesd.str_value!r} after the fragment, not 'y'")
        overlay = kconf.syms["BR2_ROOTFS_OVERLAY"].str_value
        if not {"$(BR2_EXTERNAL_AESD_PATH)/../rootfs", external + "/../rootfs"} & set(overlay.split()):
            problems.append(f"BR2_ROOTFS_OVERLAY does not name the aesd overlay: {overlay!r}")

        # Per-architecture defaults of the prebuilt directory (fragment not loaded).
        expected = {
            "BR2_riscv": "riscv32imac-unknown-linux-musl",
            "BR2_aarch64": "aarch64-unknown-linux-musl",
            "BR2_x86_64": "x86_64-unknown-linux-musl",
        }
        for arch, triple in expected.items():
            kconf.unset_values()
            kconf.syms[arch].set_value(2)
            kconf.syms["BR2_PACKAGE_AESD"].set_value(2)
            value = kconf.syms["BR2_PACKAGE_AESD_PREBUILT_DIR"].str_value
            want = f"$(BR2_EXTERNAL_AESD_PATH)/../../target/{triple}/release"
            # Buildroot's kconfig keeps $(...) for make to expand;
            # kconfiglib, like Linux >= 4.18, expands it from the environment.
            if value not in (want, want.replace("$(BR2_EXTERNAL_AESD_PATH)", external)):
                problems.append(f"with {arch}, the prebuilt directory defaults to {value!r}, not {want!r}")

        kconf.unset_values()
        kconf.syms["BR2_mips"].set_value(2)
        kconf.syms["BR2_PACKAGE_AESD"].set_value(2)
        if kconf.syms["BR2_PACKAGE_AESD"].str_value != "n":
            problems.append("BR2_PACKAGE_AESD can be enabled on MIPS, which has no prebuilt binary")

    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print("Kconfig tree and fragment: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
