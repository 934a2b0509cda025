# bench/pool/: the page pool's benchmark (make bench runs bench/pool/run.sh).
# It drives a real xbd-blkback as the guest, with the helpers of
# tests/unit/test_pressure_fx.h.
POOL_BENCH_SRCS := bench/pool/pool_bench.c backend/ring.c
$(O)/bench/xbd-pool-bench: $(call obj,$(POOL_BENCH_SRCS)) $(LIBXBD)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBXBD) -lcmocka $(XEN_LIBS) -lm
$(call obj,bench/pool/pool_bench.c): CPPFLAGS += -Itests/unit
all: $(O)/bench/xbd-pool-bench
