# tests/helpers/: programs the system tests drive (not installed).
#   xbd-test-platform   scriptable guest/backend for tests/system/test_platform*.py
PROGS += xbd-test-platform
xbd-test-platform_SRCS := tests/helpers/test_platform_helper.c
#   xbd-test-hostile-front  a frontend writing straight into the ring and
#                           grant table, for tests/system/test_hostile_*.py
PROGS += xbd-test-hostile-front
xbd-test-hostile-front_SRCS := tests/helpers/hostile_front.c
#   xbd-test-eio-fs         a FUSE file whose chosen byte ranges fail with EIO
PROGS += xbd-test-eio-fs
xbd-test-eio-fs_SRCS := tests/helpers/eio_fs.c
xbd-test-eio-fs_LDLIBS := -lfuse3
#   xbd-test-hostile-back   a backend that breaks the protocol on purpose,
#                           for tests/system/test_hostile_backend.py
PROGS += xbd-test-hostile-back
xbd-test-hostile-back_SRCS := tests/helpers/hostile_back.c
#   xbd-test-front-probe    a libxbdfront guest that checks its buffers after
#                           a hostile backend's answers
PROGS += xbd-test-front-probe
xbd-test-front-probe_SRCS := tests/helpers/front_probe.c $(FRONTEND_LIB_SRCS)
#   xbd-test-xen-dd     dd-like steps through libxbdfront on one connection
#                       (phase R of make check-xen, tests/system/test_xen_dd.py)
PROGS += xbd-test-xen-dd
xbd-test-xen-dd_SRCS := tests/helpers/xen_dd.c $(FRONTEND_LIB_SRCS)
