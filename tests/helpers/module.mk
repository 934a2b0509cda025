# tests/helpers/: programs the system tests drive (not installed).
#   xbd-test-platform   scriptable guest/backend for tests/system/test_platform*.py
PROGS += xbd-test-platform
xbd-test-platform_SRCS := tests/helpers/test_platform_helper.c
