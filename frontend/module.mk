# frontend/: libxbdfront, the library a guest links (see
# Documentation/frontend.md).  Its objects are archived as
# $(O)/lib/libxbdfront.a; unit tests name the sources they need in
# tests/unit/test_fe_*.deps.
#   xbdfront-io   a guest program on the library (info, verify)
FRONTEND_PROG_SRCS := frontend/xbdfront_io.c
FRONTEND_LIB_SRCS := $(filter-out $(FRONTEND_PROG_SRCS),$(wildcard frontend/*.c))
LIBXBDFRONT := $(O)/lib/libxbdfront.a

$(LIBXBDFRONT): $(call obj,$(FRONTEND_LIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

all: $(LIBXBDFRONT)

# The shared library (soname libxbdfront.so.0; frontend/libxbdfront.map
# exports xbdfront.h's functions only), its header and a pkg-config file,
# installed by `make install` into $(LIBDIR) and $(INCLUDEDIR).
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
XBD_VERSION := $(shell head -n1 debian/changelog | cut -d' ' -f2 | tr -d '()')
LIBXBDFRONT_SO := $(O)/lib/libxbdfront.so.0
$(LIBXBDFRONT_SO): $(call obj,$(FRONTEND_LIB_SRCS)) $(LIBXBD) frontend/libxbdfront.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libxbdfront.so.0 \
		-Wl,--version-script=frontend/libxbdfront.map -o $@ \
		$(filter %.o,$^) $(LIBXBD) $(XEN_LIBS) -lm
$(O)/lib/xbdfront.pc: frontend/xbdfront.pc.in debian/changelog
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
		-e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@VERSION@|$(XBD_VERSION)|' $< > $@
all: $(LIBXBDFRONT_SO) $(O)/lib/xbdfront.pc

INSTALL_EXTRA += install -D -m 0644 $(LIBXBDFRONT_SO) \
	$(DESTDIR)$(LIBDIR)/libxbdfront.so.0 || exit 1; \
	ln -sf libxbdfront.so.0 $(DESTDIR)$(LIBDIR)/libxbdfront.so || exit 1; \
	install -m 0644 $(LIBXBDFRONT) $(DESTDIR)$(LIBDIR)/ || exit 1; \
	install -D -m 0644 frontend/xbdfront.h $(DESTDIR)$(INCLUDEDIR)/xbdfront.h || exit 1; \
	install -D -m 0644 $(O)/lib/xbdfront.pc \
	$(DESTDIR)$(LIBDIR)/pkgconfig/xbdfront.pc || exit 1;

PROGS += xbdfront-io
xbdfront-io_SRCS := frontend/xbdfront_io.c $(FRONTEND_LIB_SRCS)
