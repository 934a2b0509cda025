# backend/: xbd-blkback, the backend daemon.  Its code is also archived in
# libxbdbackend.a; unit tests link the sources they need through
# tests/unit/test_*.deps.
BACKEND_SRCS := $(wildcard backend/*.c backend/storage/*.c)

PROGS += xbd-blkback
xbd-blkback_SRCS := $(BACKEND_SRCS)
xbd-blkback_LDLIBS := -luring -lfuse3 -lnbd -lrbd -lrados

$(O)/lib/libxbdbackend.a: $(call obj,$(BACKEND_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

all: $(O)/lib/libxbdbackend.a

# Unit tests that link the io_uring engine need liburing.
test_io_uring_LDLIBS := -luring -lnbd -lrbd -lrados
test_gnt_LDLIBS := -luring -lnbd -lrbd -lrados
test_be_queue_LDLIBS := -luring -lnbd -lrbd -lrados
test_pressure_LDLIBS := -luring -lnbd -lrbd -lrados
test_pressure_daemon_LDLIBS := -luring -lnbd -lrbd -lrados

# The transport micro-benchmark (not installed): make be-xport-bench, then
# $(O)/bench/xbd-be-xport-bench [iterations].  See Documentation/backend.md.
XPORT_BENCH_SRCS := backend/bench/xport_bench.c backend/gnt.c backend/gntpool.c \
	backend/tunables.c
$(O)/bench/xbd-be-xport-bench: $(call obj,$(XPORT_BENCH_SRCS)) $(LIBXBD)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBXBD) $(XEN_LIBS) -lm
.PHONY: be-xport-bench
be-xport-bench: $(O)/bench/xbd-be-xport-bench
test_be_xenbus_LDLIBS := -luring -lnbd -lrbd -lrados

# One queue serving an in-process guest: make be-queue-bench, then
# $(O)/bench/xbd-be-queue-bench FILE [--bs B] [--qd N] [--write] ...
QUEUE_BENCH_SRCS := backend/bench/queue_bench.c $(filter-out backend/main.c \
	backend/devtab.c backend/xenbus.c backend/sysfs.c,$(BACKEND_SRCS))
$(O)/bench/xbd-be-queue-bench: $(call obj,$(QUEUE_BENCH_SRCS)) $(LIBXBD)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBXBD) -luring -lnbd -lrbd -lrados $(XEN_LIBS) -lm
.PHONY: be-queue-bench
be-queue-bench: $(O)/bench/xbd-be-queue-bench

# The sysfs-style tree (backend/sysfs.c) is a libfuse3 file system.
$(call obj,backend/sysfs.c): CPPFLAGS += $(shell pkg-config --cflags fuse3)

# The page pool's benchmark (bench/pool/, make bench).
include bench/pool/module.mk
test_storage_LDLIBS := -luring -lnbd -lrbd -lrados
