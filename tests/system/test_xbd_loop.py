# SPDX-License-Identifier: MIT
"""100 disks attached to one domain (each waited to InitWait by a backend),
listed, then detached (each waited to Closed): nothing is left behind."""
import os

from xbd_fixtures import FakeBackend, machine  # noqa: F401  (fixture)

DISKS = 100


def test_attach_detach_100_disks(machine):
    d = machine.create("guest")
    img = os.path.join(machine.rundir, "disk.img")
    open(img, "wb").close()
    os.truncate(img, 1 << 20)
    before = machine.tree()
    # d0..d15 use the 202<<8 encoding, d16.. the extended 1<<28 one.
    vdevs = [f"d{i}" for i in range(DISKS)]
    with FakeBackend(machine.sock) as fb:
        for vdev in vdevs:
            machine.ok("block-attach", "guest", f"{img},,{vdev},r", leaks=False)
        rows = machine.ok("block-list", "guest").splitlines()[1:]
        assert len(rows) == DISKS
        ids = [int(r.split()[0]) for r in rows]
        assert ids == sorted([(202 << 8) | (i << 4) for i in range(16)] +
                             [(1 << 28) | (i << 8) for i in range(16, DISKS)])
        assert len(fb.seen) == DISKS
        for vdev in vdevs:
            machine.ok("block-detach", "guest", vdev, leaks=False)
    assert machine.tree() == before
    assert machine.ok("block-list", "guest").splitlines()[1:] == []
