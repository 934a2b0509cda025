# frontend/fio/: xbd-fio.so, the fio external ioengine, built against the
# installed fio's own headers:
#   fio --ioengine=external:$(O)/lib/xbd-fio.so --xbd_domain=NAME --xbd_vdev=xvdb ...
# scripts/fio-src.sh unpacks Debian's source package of exactly the
# installed fio version into $(O)/fio-src/fio (apt-get source with a
# private deb-src entry) and runs its configure; the engine includes its
# fio.h and ioengines.h (warnings of fio's headers are fio's: -isystem).
# See Documentation/guest.md.
FIO_SRC := $(O)/fio-src
FIO_TREE := $(FIO_SRC)/fio
ENGINE_OBJ := $(call obj,frontend/fio/engine.c)

$(FIO_TREE)/config-host.h: scripts/fio-src.sh
	sh scripts/fio-src.sh $(FIO_SRC) >/dev/null
	touch $@

$(ENGINE_OBJ): $(FIO_TREE)/config-host.h
$(ENGINE_OBJ): CPPFLAGS = -D_GNU_SOURCE -I. -isystem $(FIO_TREE) \
	-include $(FIO_TREE)/config-host.h \
	-DXBD_FIO_VERSION='"$(shell cat $(FIO_TREE)/xbd-fio-version 2>/dev/null)"'

SHLIBS += xbd-fio
# installed as $(PREFIX)/lib/xbd/xbd-fio.so (man/xbd-fio.7)
INSTALL_EXTRA += install -D -m 0644 $(O)/lib/xbd-fio.so \
	$(DESTDIR)$(PREFIX)/lib/xbd/xbd-fio.so || exit 1;
xbd-fio_SRCS := frontend/fio/engine.c $(FRONTEND_LIB_SRCS)
