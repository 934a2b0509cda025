# lib/: code every program shares, archived as libxbd.a and linked into
# every program and test.  Every .c here and in lib/platform/ belongs to it.
LIB_SRCS += $(wildcard lib/*.c lib/platform/*.c)
