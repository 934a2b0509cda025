# tools/: the `xbd` toolstack command (see Documentation/xbd.md).
# Xen's disk-spec parser is libxlutil, which needs libxenlight's types.
XLU_LIBS := -lxlutil -lxenlight

test_diskspec_LDLIBS := $(XLU_LIBS)

PROGS += xbd
xbd_SRCS := tools/xbd.c tools/domain.c tools/block.c tools/vbd.c tools/diskspec.c \
	tools/top.c tools/resize.c
xbd_LDLIBS := $(XLU_LIBS) -lm
