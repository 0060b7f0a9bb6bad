# Runs the install commands of br2-external/package/aesd/aesd.mk outside
# Buildroot, with stand-ins for the few Buildroot definitions it uses
# (qstrip, INSTALL, SED, TARGET_DIR, generic-package). Used by run.sh:
#
#   make -f br2-harness.mk BR2_EXTERNAL_AESD_PATH=... TARGET_DIR=... \
#        BR2_PACKAGE_AESD_PREBUILT_DIR='"DIR"' install-target install-init-sysv install-init-systemd

qstrip = $(strip $(subst ",,$(1)))
INSTALL = install
SED = sed -i -e
generic-package =

include $(BR2_EXTERNAL_AESD_PATH)/external.mk

.PHONY: install-target install-init-sysv install-init-systemd print-users

install-target:
	$(AESD_INSTALL_TARGET_CMDS)

install-init-sysv:
	$(AESD_INSTALL_INIT_SYSV)

install-init-systemd:
	$(AESD_INSTALL_INIT_SYSTEMD)

# The users the package makes Buildroot add (makeusers syntax).
print-users:
	@echo '$(strip $(AESD_USERS))'
