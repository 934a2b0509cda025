# backend/: xbd-blkback.  Until the daemon can serve, the backend code is
# built into libxbdbackend.a (so `make all` compiles it with -O2 -Werror)
# and linked into the unit tests through tests/unit/test_*.deps.
BACKEND_SRCS := $(wildcard backend/*.c backend/storage/*.c)

$(O)/lib/libxbdbackend.a: $(call obj,$(BACKEND_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

all: $(O)/lib/libxbdbackend.a

# Unit tests that link the io_uring engine need liburing.
test_io_uring_LDLIBS := -luring
test_gnt_LDLIBS := -luring
test_be_queue_LDLIBS := -luring
