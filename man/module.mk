# man/: the manual pages, installed by `make install` into $(MANDIR).
# Every man/*.[1-8] is written by hand; xbd-sysfs(5) is generated from the
# sysfs entries of Documentation/ABI/testing by man/abi2man.py, so that the
# page cannot drift from the ABI.  tests/system/test_manpages.py checks
# that each program's --help options appear in its page and that every
# page renders without a groff warning.
MANDIR        ?= $(PREFIX)/share/man
MAN_PAGES     := $(wildcard man/*.[1-8])
MAN_SYSFS_ABI := $(sort $(wildcard Documentation/ABI/testing/sysfs-*))
MAN_GENERATED := $(O)/man/xbd-sysfs.5

$(O)/man/xbd-sysfs.5: man/abi2man.py $(MAN_SYSFS_ABI)
	@mkdir -p $(dir $@)
	python3 man/abi2man.py $(MAN_SYSFS_ABI) > $@.tmp
	mv $@.tmp $@

all: $(MAN_GENERATED)

INSTALL_EXTRA += for m in $(MAN_PAGES) $(MAN_GENERATED); do \
	s=$${m\#\#*.}; install -D -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/$${m\#\#*/} || exit 1; \
	done;
