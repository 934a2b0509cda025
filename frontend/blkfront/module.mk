# frontend/blkfront/: xbd-blkfront, a local guest that shows its disks as
# files through FUSE (see Documentation/guest.md).
PROGS += xbd-blkfront
xbd-blkfront_SRCS := $(wildcard frontend/blkfront/*.c) $(FRONTEND_LIB_SRCS)
xbd-blkfront_LDLIBS := -lfuse3 -luring
$(call obj,$(wildcard frontend/blkfront/*.c)): CPPFLAGS += -I/usr/include/fuse3
