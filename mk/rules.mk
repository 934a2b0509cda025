# Build rules shared by every module.mk fragment.
#
# A fragment may set:
#   LIB_SRCS          += sources of libxbd.a (lib/), linked into everything
#   PROGS             += name          a program, built as $(O)/bin/name
#                     (xbd-test-*, xbd-bench-* and *-bench are not installed)
#   name_SRCS         := sources       its sources
#   name_LDLIBS       := -l...         extra libraries
#   UNIT_TESTS        += name          a cmocka test, built as $(O)/tests/name
#   name_SRCS/_LDLIBS as for programs (cmocka is added automatically)
#   SHLIBS            += name          a shared object $(O)/lib/name.so
#   INSTALL_EXTRA     += shell command run by `make install`
#
# Objects go to $(O)/obj/<path>.o with dependency files next to them, so
# incremental builds and `make -j2` work.

CC      ?= gcc
ifeq ($(origin CC),default)
CC := gcc
endif

XEN_LIBS := -lxenstore -lxengnttab -lxenevtchn -lxenctrl -lxentoolcore

CPPFLAGS += -D_GNU_SOURCE -I. -Ilib
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -Wall -Wextra -Werror -fPIC -pthread -MMD -MP
LDFLAGS  += -pthread

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
# SAN=thread: ThreadSanitizer (gcc's libtsan), for `make check-tsan` into
# build-tsan/.  -Wno-tsan: gcc warns that TSan ignores
# __atomic_thread_fence; our fences order the rings and event-channel
# words shared with another process (the xen_mb family), memory TSan does
# not see in any case.  Its instrumentation also makes gcc 12 see
# maybe-uninitialized values the other builds do not (a test's variable
# set by a helper that fails the test otherwise): those stay warnings
# here; the optimised and ASan builds keep them errors.
ifeq ($(SAN),thread)
CFLAGS  += -fsanitize=thread -fno-omit-frame-pointer -Wno-tsan \
	   -Wno-error=maybe-uninitialized
LDFLAGS += -fsanitize=thread
endif

LIBXBD := $(O)/lib/libxbd.a

obj = $(patsubst %.c,$(O)/obj/%.o,$(1))

# The SAN this tree is built with (read back by the top Makefile).
$(O)/.san:
	@mkdir -p $(dir $@)
	echo $(SAN) >$@

$(O)/obj/%.o: %.c | $(O)/.san
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

define prog_rule
$(O)/bin/$(1): $(call obj,$($(1)_SRCS)) $(LIBXBD)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(LIBXBD) $($(1)_LDLIBS) $(XEN_LIBS) -lm
DEPFILES += $(call obj,$($(1)_SRCS):.o=.d)
endef

define test_rule
$(O)/tests/$(1): $(call obj,$($(1)_SRCS)) $(LIBXBD)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(LIBXBD) $($(1)_LDLIBS) -lcmocka $(XEN_LIBS) -lm
endef

define shlib_rule
$(O)/lib/$(1).so: $(call obj,$($(1)_SRCS)) $(LIBXBD)
	@mkdir -p $$(dir $$@)
	$$(CC) -shared $$(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(LIBXBD) $($(1)_LDLIBS) $(XEN_LIBS) -lm
endef

define finish_rules
$(LIBXBD): $(call obj,$(LIB_SRCS))
	@mkdir -p $$(dir $$@)
	rm -f $$@
	ar rcs $$@ $$^
$(foreach p,$(PROGS),$(eval $(call prog_rule,$(p))))
$(foreach t,$(UNIT_TESTS),$(eval $(call test_rule,$(t))))
$(foreach s,$(SHLIBS),$(eval $(call shlib_rule,$(s))))
ALL_TARGETS := $(LIBXBD) $(addprefix $(O)/bin/,$(PROGS)) $(addprefix $(O)/lib/,$(addsuffix .so,$(SHLIBS)))
UNIT_TEST_BINS := $(addprefix $(O)/tests/,$(UNIT_TESTS))
unit-tests: $$(UNIT_TEST_BINS)
-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
endef
