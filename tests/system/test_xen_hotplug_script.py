# SPDX-License-Identifier: MIT
"""tools/hotplug/xbd-block against xbd-xenstored, run as libxl runs it.

(make check-xen runs it under the real libxl too: tests/xen/test_xen.py.)
"""
import os
import subprocess

import pytest

from xenstored_fixtures import xenstored  # noqa: F401  (fixture)

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "hotplug", "xbd-block")
BE = "backend/vbd/1/51712"


@pytest.fixture
def hotplug(xenstored, tmp_path):
    """run(command, params=..., mode=...) -> (CompletedProcess, nodes)."""
    def run(command, params=None, mode="w", env=None):
        if params is not None:
            xenstored.tool("xenstore-write", f"{BE}/params", params, f"{BE}/mode", mode)
        e = dict(xenstored.env, XENBUS_PATH=BE, XENBUS_TYPE="vbd",
                 XENBUS_BASE_PATH="backend",
                 XBD_BLKBACK_MODULE_DIR=str(tmp_path / "no-such-module"))
        e.update(env or {})
        r = subprocess.run(["sh", SCRIPT, command], env=e, capture_output=True,
                           text=True, timeout=30)
        nodes = {}
        for key in ("hotplug-status", "hotplug-error"):
            got = xenstored.tool("xenstore-read", f"{BE}/{key}", check=False)
            nodes[key] = got.stdout.strip() if got.returncode == 0 else None
        return r, nodes
    return run


def test_add_of_a_file_reports_connected(hotplug, tmp_path):
    img = tmp_path / "disk.img"
    img.write_bytes(b"\0" * 4096)
    r, nodes = hotplug("add", params=str(img))
    assert r.returncode == 0, r.stderr
    assert nodes == {"hotplug-status": "connected", "hotplug-error": None}
    assert f"xbd-block: add {BE} params={img} mode=w: connected" in r.stderr


@pytest.mark.parametrize("params,why", [
    ("/nonexistent/disk.img", "/nonexistent/disk.img does not exist"),
    ("disk.img", "params 'disk.img' is not an absolute path"),
    ("", "params is empty"),
    ("/", "/ is neither a regular file nor a block device"),
])
def test_add_refuses_bad_targets_with_hotplug_error(hotplug, params, why):
    r, nodes = hotplug("add", params=params)
    assert r.returncode == 1
    assert nodes["hotplug-status"] == "error"
    assert why in nodes["hotplug-error"]
    assert why in r.stderr


def test_add_refuses_while_kernel_blkback_is_loaded(hotplug, tmp_path):
    img = tmp_path / "disk.img"
    img.write_bytes(b"\0" * 4096)
    r, nodes = hotplug("add", params=str(img),
                       env={"XBD_BLKBACK_MODULE_DIR": str(tmp_path)})
    assert r.returncode == 1
    assert "xen-blkback module is loaded" in nodes["hotplug-error"]


def test_remove_succeeds_and_touches_nothing(hotplug):
    r, nodes = hotplug("remove")
    assert r.returncode == 0
    assert f"xbd-block: remove {BE}" in r.stderr
    assert nodes == {"hotplug-status": None, "hotplug-error": None}


def test_unknown_command_and_missing_xenbus_path_fail(hotplug):
    r, _ = hotplug("online")
    assert r.returncode == 1 and "unknown command 'online'" in r.stderr
    r, _ = hotplug("add", env={"XENBUS_PATH": ""})
    assert r.returncode == 1 and "XENBUS_PATH is not set" in r.stderr


@pytest.mark.parametrize("params", [
    "nbd://storage1:10809/vm", "nbd+unix:///vm?socket=/run/vm.sock",
    "rbd:rbd/vm1:conf=/etc/ceph/ceph.conf", "qcow2:IMG", "raw:IMG"])
def test_add_of_other_storage_drivers_reports_connected(hotplug, tmp_path, params):
    """Targets of the nbd, rbd and qcow2 drivers (Documentation/storage.md):
    network ones are the backend's to reach; FORMAT:PATH checks PATH."""
    img = tmp_path / "disk.img"
    img.write_bytes(b"\0" * 4096)
    params = params.replace("IMG", str(img))
    r, nodes = hotplug("add", params=params)
    assert r.returncode == 0, r.stderr
    assert nodes == {"hotplug-status": "connected", "hotplug-error": None}


def test_add_checks_the_path_of_a_format_prefix(hotplug):
    r, nodes = hotplug("add", params="qcow2:/nonexistent/vm.qcow2")
    assert r.returncode == 1
    assert "/nonexistent/vm.qcow2 does not exist" in nodes["hotplug-error"]
    r, nodes = hotplug("add", params="rbd:")
    assert r.returncode == 1 and nodes["hotplug-status"] == "error"
