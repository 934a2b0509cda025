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

PROGS += xbdfront-io
xbdfront-io_SRCS := frontend/xbdfront_io.c $(FRONTEND_LIB_SRCS)
