# frontend/fio/: xbd-fio.so, the fio external ioengine (fio 3.33):
#   fio --ioengine=external:$(O)/lib/xbd-fio.so --xbd_domain=NAME --xbd_vdev=xvdb ...
# See Documentation/guest.md.
SHLIBS += xbd-fio
xbd-fio_SRCS := frontend/fio/engine.c frontend/blkfront/domain.c $(FRONTEND_LIB_SRCS)
