# frontend/: libxbdfront, the library a guest links (see
# Documentation/frontend.md).  Its objects are archived as
# $(O)/lib/libxbdfront.a; unit tests name the sources they need in
# tests/unit/test_fe_*.deps.
FRONTEND_LIB_SRCS := $(wildcard frontend/*.c)
LIBXBDFRONT := $(O)/lib/libxbdfront.a

$(LIBXBDFRONT): $(call obj,$(FRONTEND_LIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

all: $(LIBXBDFRONT)
