# SPDX-License-Identifier: MIT
"""Grants between separate processes: a guest shares, a backend maps/copies."""
import errno
import signal

import pytest

from platform_fixtures import helpers  # noqa: F401  (fixture)

MiB = 1 << 20


@pytest.fixture
def pair(helpers):
    """(guest as domain 1 with a gntshr handle, backend as domain 0)."""
    guest = helpers.start("guest")
    guest.ok(f"create 1 guest {MiB}")
    guest.ok("claim 1")
    guest.ok("gntshr")
    backend = helpers.start("backend")
    backend.ok("gnttab 0")
    return guest, backend


def share(guest, count, mode, remote=0):
    v = guest.ok(f"share {remote} {count} {mode}")
    return v[0], v[1:]


def test_map_sees_grantor_bytes_both_ways(pair):
    guest, backend = pair
    area, refs = share(guest, 2, "rw")
    assert all(int(r) >= 8 for r in refs), "refs 0-7 are reserved"
    guest.ok(f"fill {area} 0 165")
    m = backend.ok(f"map 1 rw {' '.join(refs)}")[0]
    assert backend.ok(f"mpeek {m} 0") == ["165"]
    assert backend.ok(f"mpeek {m} 8191") == ["165"]
    backend.ok(f"mpoke {m} 4100 66")
    assert guest.ok(f"peek {area} 4100") == ["66"]


def test_scattered_refs_map_contiguously(pair):
    guest, backend = pair
    a1, r1 = share(guest, 1, "rw")
    a2, r2 = share(guest, 1, "rw")
    a3, r3 = share(guest, 1, "rw")
    guest.ok(f"fill {a1} 0 1")
    guest.ok(f"fill {a3} 0 3")
    m = backend.ok(f"map 1 ro {r3[0]} {r1[0]}")[0]   # frames out of order
    assert backend.ok(f"mpeek {m} 0") == ["3"]
    assert backend.ok(f"mpeek {m} 4096") == ["1"]
    backend.ok(f"unmap {m}")


def test_readonly_grant_faults_on_write_and_refuses_rw_map(pair):
    guest, backend = pair
    area, refs = share(guest, 1, "ro")
    guest.ok(f"fill {area} 0 7")
    assert backend.err(f"map 1 rw {refs[0]}") == -errno.EPERM
    m = backend.ok(f"map 1 ro {refs[0]}")[0]
    assert backend.ok(f"mpeek {m} 0") == ["7"]
    assert backend.ok(f"mpokefault {m} 0") == [f"signal={int(signal.SIGSEGV)}"]
    assert guest.ok(f"peek {area} 0") == ["7"]
    # a writable grant, mapped the same way, takes the store
    a2, r2 = share(guest, 1, "rw")
    m2 = backend.ok(f"map 1 rw {r2[0]}")[0]
    assert backend.ok(f"mpokefault {m2} 0") == ["exited=0"]


def test_revoke_busy_while_mapped_ok_after_unmap(pair):
    guest, backend = pair
    area, refs = share(guest, 2, "rw")
    m = backend.ok(f"map 1 ro {refs[1]}")[0]
    assert guest.err(f"unshare {area}") == -errno.EBUSY
    # all or nothing: the unmapped first grant is still usable
    m0 = backend.ok(f"map 1 rw {refs[0]}")[0]
    backend.ok(f"unmap {m0}")
    backend.ok(f"unmap {m}")
    guest.ok(f"unshare {area}")
    assert backend.err(f"map 1 ro {refs[0]}") == -errno.EINVAL
    assert guest.err(f"unshare {area}") == -errno.EINVAL


def test_pins_of_a_dead_mapper_are_reclaimed(pair, helpers):
    guest, backend = pair
    area, refs = share(guest, 1, "rw")
    backend.ok(f"map 1 rw {refs[0]}")
    assert guest.err(f"unshare {area}") == -errno.EBUSY
    backend.kill()
    guest.ok(f"unshare {area}")


def test_grants_mapped_across_a_guest_takeover_stay_reserved(pair, helpers):
    guest, backend = pair
    area, refs = share(guest, 1, "rw")
    guest.ok(f"fill {area} 0 9")
    m = backend.ok(f"map 1 rw {refs[0]}")[0]
    guest.kill()
    heir = helpers.start("heir")
    heir.ok("claim 1")
    heir.ok("gntshr")
    _, new_refs = share(heir, 4, "rw")
    assert refs[0] not in new_refs
    assert backend.ok(f"mpeek {m} 0") == ["9"]


def test_foreign_grant_is_refused(pair, helpers):
    guest, backend = pair
    helpers.start("tool").ok(f"create 2 other {MiB}")
    area, refs = share(guest, 1, "rw", remote=2)
    assert backend.err(f"map 1 ro {refs[0]}") == -errno.EPERM
    assert backend.ok(f"copyfrom 1 {refs[0]} 0 16") == [str(-errno.EPERM), "0"]


def test_grant_copy_both_directions_with_permissions(pair):
    guest, backend = pair
    rw_area, rw = share(guest, 1, "rw")
    ro_area, ro = share(guest, 1, "ro")
    guest.ok(f"fill {ro_area} 0 33")
    assert backend.ok(f"copyfrom 1 {ro[0]} 100 512") == ["0", "33"]
    assert backend.ok(f"copyto 1 {rw[0]} 4000 96 77") == ["0"]
    assert guest.ok(f"peek {rw_area} 4000") == ["77"]
    assert guest.ok(f"peek {rw_area} 3999") == ["0"]
    assert backend.ok(f"copyto 1 {ro[0]} 0 16 1") == [str(-errno.EPERM)]
    assert guest.ok(f"peek {ro_area} 0") == ["33"]
    # within one page only, refs in range and in use
    assert backend.ok(f"copyfrom 1 {rw[0]} 4000 97") == [str(-errno.EINVAL), "0"]
    assert backend.ok("copyfrom 1 32768 0 16") == [str(-errno.EINVAL), "0"]
    assert backend.ok("copyfrom 1 500 0 16") == [str(-errno.EINVAL), "0"]
    assert backend.ok(f"copyfrom 7 {rw[0]} 0 16") == [str(-errno.ENOENT), "0"]


def test_bad_map_requests(pair):
    guest, backend = pair
    area, refs = share(guest, 1, "rw")
    assert backend.err("map 1 ro 32768") == -errno.EINVAL     # ref out of range
    assert backend.err("map 1 ro 4000") == -errno.EINVAL      # not in use
    assert backend.err(f"map 9 ro {refs[0]}") == -errno.ENOENT
    # all or nothing: one bad ref, nothing stays mapped, revoke works
    assert backend.err(f"map 1 rw {refs[0]} 4000") == -errno.EINVAL
    guest.ok(f"unshare {area}")
    area, refs = share(guest, 1, "rw")
    m = backend.ok(f"map 1 rw {refs[0]}")[0]
    backend.ok(f"unmap {m}")
    assert backend.err(f"unmap {m}") == -errno.EINVAL          # double unmap


def test_guest_scribbling_its_grant_table_cannot_hurt_the_backend(pair, rundir):
    """A hostile guest writes garbage entries naming us: frames out of range,
    bad types.  The backend refuses them without crashing."""
    import os
    import struct
    guest, backend = pair
    path = os.path.join(rundir, "dom1", "gnttab")
    with open(path, "r+b") as f:
        f.seek(100 * 8)
        # permit_access to dom0, frame far beyond the 1 MiB of memory
        f.write(struct.pack("<HHI", 1, 0, 0xfffffff0))
        f.seek(101 * 8)
        f.write(struct.pack("<HHI", 3, 0, 1))          # transitive: not ours
    assert backend.err("map 1 rw 100") == -errno.EINVAL
    assert backend.err("map 1 ro 101") == -errno.EINVAL
    assert backend.ok("copyfrom 1 100 0 16") == [str(-errno.EINVAL), "0"]
