# xbd — top-level Makefile.
#
#   make            build everything (optimised, into build/)
#   make deps       install missing Debian packages (apt-get; quiet when none)
#   make check      deps + build + every test under ASan/UBSan (build-asan/),
#                   then check-tsan, then check-xen (real Xen under QEMU,
#                   about 15-20 min)
#   make check-tsan deps + the ThreadSanitizer build (build-tsan/, SAN=thread)
#                   + the unit tests and the multi-threaded system tests
#                   (scripts/check-tsan.sh; 2.5 min on 2 cores at load 7, after
#                   a build of about 3 min); any report fails it
#   make demo       deps + build + the end-to-end demo on the local platform
#   make bench      deps + build + benchmarks (optimised build, no sanitizers)
#   make check-xen  deps + build + boot real Xen under QEMU (tests/xen)
#   make lint       cppcheck and clang-tidy over every C file (scripts/lint.sh;
#                   .clang-tidy, scripts/cppcheck-suppressions.txt); in check
#   make fuzz       build and run the libFuzzer targets (10^7 runs or 1 h each)
#   make soak       deps + build + hours-long leak and fault loops
#                   (tests/soak, then the backend killed under fio; not
#                   in check; SOAK_CYCLES, SOAK_MINUTES, XBD_FAULT_KILLS)
#   make install    PREFIX=/usr/local DESTDIR= (programs, libxbdfront, the fio
#                   engine, manual pages, hotplug script, systemd unit)
#   make deb        Debian packages into build/deb/ (debian/, scripts/deb.sh;
#                   as root installs debhelper, lintian and Build-Depends)
#   make clean
#
# Every folder adds its sources through its own module.mk (see mk/rules.mk
# for the variables a fragment may set).  O= selects the output tree,
# SAN=1 the ASan/UBSan build and SAN=thread the ThreadSanitizer build;
# `make check` drives all three.

PREFIX  ?= /usr/local
DESTDIR ?=
O       ?= build

# The build tree records the SAN it was made with in $(O)/.san
# (mk/rules.mk writes it before the first object).  A make in it without
# SAN= uses the recorded value, so `make install O=build-asan` never
# recompiles a stale object without the sanitizers and links it among
# sanitized ones; a SAN= that differs from the record is refused (make
# clean, or another O=).  A tree built before the record is read from its
# library: ThreadSanitizer's or AddressSanitizer's symbols, else 0.
RECORDED_SAN := $(strip $(shell cat $(O)/.san 2>/dev/null || \
	{ f=$(O)/lib/libxbd.a; [ ! -f $$f ] || \
	  { grep -qa __tsan_ $$f && echo thread; } || \
	  { grep -qa __asan_ $$f && echo 1; } || echo 0; }))
ifeq ($(origin SAN),undefined)
SAN := $(or $(RECORDED_SAN),0)
else ifneq ($(RECORDED_SAN),)
ifneq ($(SAN),$(RECORDED_SAN))
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),all)),)
$(error $(O) was built with SAN=$(RECORDED_SAN), not SAN=$(SAN): make clean, or another O=)
endif
endif
endif

include mk/rules.mk

MODULES := man lib xenstore backend frontend frontend/blkfront frontend/fio tools tools/hotplug tests/unit tests/helpers tests/fuzz bench bench/platform bench/fuse
include $(wildcard $(addsuffix /module.mk,$(MODULES)))

$(eval $(call finish_rules))

.PHONY: all deps check check-tsan check-xen demo bench fuzz soak install deb clean unit-tests system-tests lint
.DEFAULT_GOAL := all

all: $(ALL_TARGETS)

deps:
	@sh scripts/deps.sh

# check: the optimised build must compile too (-Werror differs with -O2),
# then everything is rebuilt and run under AddressSanitizer + UBSan.
# pytest's summary is the last line, after the reason of every skip (-rs).
check: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory O=build-asan SAN=1 all unit-tests be-queue-bench
	@$(MAKE) --no-print-directory O=build-asan SAN=1 run-unit
	@$(MAKE) --no-print-directory -f tests/fuzz/Makefile.fuzz replay
	@$(MAKE) --no-print-directory O=build-asan SAN=1 system-tests
	@$(MAKE) --no-print-directory check-tsan
	@$(MAKE) --no-print-directory check-xen

# check-tsan: data races between the threads of one process (queue,
# control and reaper threads of xbd-blkback; libxbdfront's callers; the
# FUSE workers of xbd-blkfront).  Suppressions: scripts/tsan-suppressions.txt.
check-tsan: deps
	@$(MAKE) --no-print-directory O=build-tsan SAN=thread all unit-tests
	@sh scripts/check-tsan.sh build-tsan

# lint: about 20 s on 2 cores; the fio engine is checked against the
# configured fio source it builds with.
lint: $(FIO_TREE)/config-host.h
	@sh scripts/lint.sh $(FIO_TREE)

run-unit: unit-tests
	@sh scripts/run-unit-tests.sh $(UNIT_TEST_BINS)

system-tests:
	@XBD_BUILD=$(abspath $(O)) /usr/bin/python3 -m pytest -p no:cacheprovider -q -rs tests/system

# check-xen: real Xen 4.17 + a Linux PV dom0 under qemu-system-x86_64 (TCG),
# images built from Debian packages into build/xen (Documentation/xen-testing.md).
check-xen:
	@sh scripts/deps.sh --xen
	@$(MAKE) --no-print-directory all
	@XBD_BUILD=$(abspath build) XBD_XEN_OUT=$(abspath build/xen) sh tests/xen/check.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@XBD_BUILD=$(abspath build) sh scripts/demo.sh

bench: deps
	@$(MAKE) --no-print-directory all
	@XBD_BUILD=$(abspath build) sh bench/run.sh

# soak: long leak hunts, not in check (tests/soak/test_soak.py): 1000
# attach/detach cycles, 10 guests x 4 disks of fio verify for SOAK_MINUTES
# (10), then the backend SIGKILLed XBD_FAULT_KILLS (50) times under fio.
soak: deps
	@$(MAKE) --no-print-directory all
	@XBD_BUILD=$(abspath build) /usr/bin/python3 -m pytest -p no:cacheprovider -q -s tests/soak
	@XBD_BUILD=$(abspath build) XBD_FAULT_KILLS=$${XBD_FAULT_KILLS:-50} \
		/usr/bin/python3 -m pytest -p no:cacheprovider -q -s tests/system/test_faults_restart.py

fuzz: deps
	@$(MAKE) --no-print-directory -f tests/fuzz/Makefile.fuzz run

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/xbd
	for p in $(filter-out xbd-test-% xbd-bench-% %-bench,$(PROGS)); do install -m 0755 $(O)/bin/$$p $(DESTDIR)$(PREFIX)/bin/; done
	$(INSTALL_EXTRA)

deb:
	@sh scripts/deb.sh

clean:
	rm -rf build build-asan build-tsan build-fuzz
