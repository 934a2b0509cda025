# bench/fuse/: the FUSE transport's floor (xbd-bench-fuse-floor), against
# which make bench sets the FUSE disk file (bench/guest/run.sh).
PROGS += xbd-bench-fuse-floor
xbd-bench-fuse-floor_SRCS := bench/fuse/fuse_floor.c frontend/blkfront/fuse_uring.c
xbd-bench-fuse-floor_LDLIBS := -lfuse3 -luring
$(call obj,bench/fuse/fuse_floor.c): CPPFLAGS += -I/usr/include/fuse3
