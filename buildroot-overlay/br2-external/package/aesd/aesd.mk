################################################################################
#
# aesd
#
################################################################################

# aesd is written in Rust but is not compiled by Buildroot: Buildroot's Rust
# support (package/rust, cargo-package) covers the Rust targets its toolchain
# maps to, and there is no built-in Rust target for riscv32imac Linux (the
# riscv32 Linux targets rustc ships are rv32gc, i.e. with the F and D
# floating-point extensions, which the study's VexRiscv-SMP has not). The
# aesd repository cross-builds a static riscv32imac-unknown-linux-musl
# binary from its own target specification instead, and this package
# installs that prebuilt file, taken from BR2_PACKAGE_AESD_PREBUILT_DIR.
# Being statically linked against musl, it does not care which C library
# the image uses.
#
# There is nothing to download (no _VERSION, no _SITE, like
# skeleton-init-sysv): after rebuilding the binary, run
# `make aesd-reinstall` (or `make aesd-dirclean all`).
#
# The configuration and init script come from the rootfs overlay beside
# this BR2_EXTERNAL tree (buildroot-overlay/rootfs), the single copy that
# every install method uses.

AESD_LICENSE = MIT or Apache-2.0

# S50aesd runs aesd as this unprivileged user (makeusers syntax: a system
# uid and group chosen by Buildroot, no login, no home). The same line as
# buildroot-overlay/users.table, which an image without this package names
# in BR2_ROOTFS_USERS_TABLES.
define AESD_USERS
	aesd -1 aesd -1 * - - - aesd encryption server
endef

AESD_PREBUILT_BIN = $(call qstrip,$(BR2_PACKAGE_AESD_PREBUILT_DIR))/aesd
AESD_OVERLAY_DIR = $(BR2_EXTERNAL_AESD_PATH)/../rootfs
AESD_SYSTEMD_UNIT = $(BR2_EXTERNAL_AESD_PATH)/../systemd/aesd.service

define AESD_INSTALL_TARGET_CMDS
	@if [ ! -f "$(AESD_PREBUILT_BIN)" ]; then \
		echo "aesd: no prebuilt binary at $(AESD_PREBUILT_BIN)" >&2; \
		echo "aesd: build it first (buildroot-overlay/assemble.sh prints the command)" >&2; \
		echo "aesd: or set BR2_PACKAGE_AESD_PREBUILT_DIR to the directory holding it" >&2; \
		exit 1; \
	fi
	$(INSTALL) -D -m 0755 "$(AESD_PREBUILT_BIN)" $(TARGET_DIR)/usr/bin/aesd
	$(INSTALL) -D -m 0644 $(AESD_OVERLAY_DIR)/etc/aesd/aesd.toml \
		$(TARGET_DIR)/etc/aesd/aesd.toml
endef

define AESD_INSTALL_INIT_SYSV
	$(INSTALL) -D -m 0755 $(AESD_OVERLAY_DIR)/etc/init.d/S50aesd \
		$(TARGET_DIR)/etc/init.d/S50aesd
endef

# The unit is written for a hand install in /usr/local/bin (Raspberry Pi OS);
# Buildroot installs the binary in /usr/bin.
define AESD_INSTALL_INIT_SYSTEMD
	$(INSTALL) -D -m 0644 $(AESD_SYSTEMD_UNIT) \
		$(TARGET_DIR)/usr/lib/systemd/system/aesd.service
	$(SED) 's,/usr/local/bin/aesd,/usr/bin/aesd,g' \
		$(TARGET_DIR)/usr/lib/systemd/system/aesd.service
endef

$(eval $(generic-package))
