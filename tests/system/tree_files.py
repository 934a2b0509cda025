# SPDX-License-Identifier: MIT
"""The backend's sysfs-style tree as an administrator uses it: `cat` and
`echo >` on $XBD_RUNDIR/sys/REL.  Shared by the tests that read and write
it (test_sysfs, test_io_limits); x is anything with a .rundir (a machine
or a guest fixture)."""
import os


def tree_path(x, rel):
    return os.path.join(x.rundir, "sys", rel)


def cat(x, rel):
    """The file's text, newline included."""
    with open(tree_path(x, rel)) as f:
        return f.read()


def echo(x, rel, value):
    """`echo -n value > file`: 0 or the errno of open or write (a sysfs
    file refuses a bad value at write, EACCES at open)."""
    try:
        fd = os.open(tree_path(x, rel), os.O_WRONLY | os.O_TRUNC)
    except OSError as e:
        return e.errno
    try:
        os.write(fd, value.encode())
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)
