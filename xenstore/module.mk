# xenstore/: xbd-xenstored, the local xenstore daemon.
PROGS += xbd-xenstored
xbd-xenstored_SRCS := $(wildcard xenstore/*.c)
