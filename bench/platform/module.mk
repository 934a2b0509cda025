# bench/platform/: micro-benchmark of the platform layer (make bench).
PROGS += xbd-bench-platform
xbd-bench-platform_SRCS := bench/platform/bench_platform.c
