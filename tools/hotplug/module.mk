# tools/hotplug/: files for a Xen host (dom0 or a driver domain), installed
# by `make install`; no build step.  See Documentation/xen-host.md.
#   xbd-block               hotplug script ($(SYSCONFDIR)/xen/scripts)
#   xbd-blkback.service.in  systemd unit ($(SYSTEMD_UNITDIR)), @BINDIR@ set
SYSCONFDIR       ?= /etc
SYSTEMD_UNITDIR  ?= $(PREFIX)/lib/systemd/system

INSTALL_EXTRA += install -D -m 0755 tools/hotplug/xbd-block \
	$(DESTDIR)$(SYSCONFDIR)/xen/scripts/xbd-block || exit 1; \
	install -d $(DESTDIR)$(SYSTEMD_UNITDIR) || exit 1; \
	sed 's|@BINDIR@|$(PREFIX)/bin|g' tools/hotplug/xbd-blkback.service.in \
	> $(DESTDIR)$(SYSTEMD_UNITDIR)/xbd-blkback.service || exit 1;
