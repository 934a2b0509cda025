# SPDX-License-Identifier: MIT
"""Phase N (guest/phase-n.sh): the real `xl block-attach` of an NBD export
(nbdkit in dom0), of a qcow2 image and of an RBD image (a single-node Ceph
cluster in dom0) through script=xbd-block, served by
xbd-blkback --platform xen to the domU's Linux xen-blkfront, which writes,
reads back and discards; dom0 checks each store with its own tools."""
import pytest

from test_xen import ZERO_MIB_MD5, kv, mb


def n_kv(xen, label, index=-1):
    return kv(xen.replies("N", label)[index].split())


@pytest.fixture
def phase_n(xen):
    if "N" not in xen.results:
        pytest.skip("phase N did not run (run.sh --phases without N)")
    return xen


def check_io(xen, store):
    """The domU's `io` command on the disk: pattern written and read back,
    MiB 1 discarded; returns the md5 of the whole disk after it."""
    size = mb(xen)
    assert n_kv(xen, f"{store}.dev")["sectors"] == str(size * 2048)
    write, read = (kv(x.split()) for x in xen.replies("N", f"{store}.dd"))
    assert write["op"] == "write" and read["op"] == "read"
    assert write["bytes"] == read["bytes"] == str(size << 20)
    assert n_kv(xen, f"{store}.readback") == {"md5": write["md5"],
                                              "expected": write["md5"]}
    assert int(n_kv(xen, f"{store}.discard-max")["bytes"]) > 0
    assert n_kv(xen, f"{store}.blkdiscard") == {"rc": "0"}
    assert n_kv(xen, f"{store}.discarded") == {"md5": ZERO_MIB_MD5, "zero": ZERO_MIB_MD5}
    assert xen.reply("N", f"{store}.ack") == ["0"]
    after = n_kv(xen, f"{store}.after-discard")["md5"]
    assert after != write["md5"]
    return after


def test_xl_attaches_an_nbd_export_through_xbd_block(phase_n):
    xen = phase_n
    if "nbd.skip" in xen.results["N"]:
        pytest.skip("nbdkit is not in the dom0 image (apt-get install nbdkit)")
    assert xen.reply("N", "start") == ["alive=1", "sysfs=1"]
    assert n_kv(xen, "nbd.server") == {"alive": "1"}
    assert xen.time("N-attach-nbd")[1] == 0
    assert xen.reply("N", "nbd.storage") == ["nbd:nbd+unix:///?socket=/run/n.sock"]
    after = check_io(xen, "nbd")
    assert xen.time("N-detach-nbd")[1] == 0
    assert xen.reply("N", "N-detach-nbd.ack") == ["0"], "the disk did not leave the domU"
    assert xen.reply("N", "nbd.file") == [after], "the domU's data is not in nbdkit's file"


def test_xl_attaches_a_qcow2_image_through_xbd_block(phase_n):
    xen = phase_n
    if "qcow2.skip" in xen.results["N"]:
        pytest.skip("qemu-storage-daemon / qemu-img are not in the dom0 image")
    assert n_kv(xen, "qcow2.create") == {"rc": "0"}
    assert xen.time("N-attach-qcow2")[1] == 0
    assert n_kv(xen, "qcow2.daemon") == {"count": "1"}
    after = check_io(xen, "qcow2")
    assert xen.time("N-detach-qcow2")[1] == 0
    assert n_kv(xen, "qcow2.check") == {"rc": "0"}
    assert xen.reply("N", "qcow2.file") == [after], "the domU's data is not in the image"


def test_xl_attaches_an_rbd_image_through_xbd_block(phase_n):
    xen = phase_n
    if "rbd.skip" in xen.results["N"]:
        pytest.skip(xen.results["N"]["rbd.skip"][-1])
    made = n_kv(xen, "rbd.create")
    assert (made.get("rc"), made["mon"], made["osd"]) == ("0", "1", "1"), \
        f"the Ceph cluster did not come up in dom0, or made no image: {made}"
    assert xen.time("N-attach-rbd")[1] == 0
    assert xen.reply("N", "rbd.storage") == ["rbd:rbd/n:conf=/run/xbd-ceph/ceph.conf"]
    after = check_io(xen, "rbd")
    assert xen.time("N-detach-rbd")[1] == 0
    assert xen.reply("N", "N-detach-rbd.ack") == ["0"], "the disk did not leave the domU"
    size = mb(xen)
    assert n_kv(xen, "rbd.export") == {"rc": "0", "md5": after, "bytes": str(size << 20)}, \
        "the domU's data is not in the RBD image"
    # 1 MiB objects, every MiB written by the domU: the discard of MiB 1
    # removed its object, and only it
    assert n_kv(xen, "rbd.objects") == {"data": str(size - 1), "mib1": "0"}, \
        "the domU's discard did not reach the RBD image"
