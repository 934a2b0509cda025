# tests/unit/: cmocka unit tests.  One file per module: test_<module>.c.
# Every tests/unit/test_*.c is a test linked with libxbd.a; a test that
# needs more sources names them in tests/unit/<name>.deps (one per line).
UNIT_TESTS += $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c))
$(foreach t,$(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c)),\
  $(eval $(t)_SRCS := tests/unit/$(t).c $(shell cat tests/unit/$(t).deps 2>/dev/null)))
