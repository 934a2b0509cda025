# SPDX-License-Identifier: MIT
"""The real clients against xbd-xenstored: Xen's test-xenstore, the
xenstore-* tools, xen.lowlevel.xs and python3-pyxs."""
import os
import subprocess
import sys
import threading

from xenstored_fixtures import xenstored, xs, Xenstored  # noqa: F401


def run_test_xenstore(xd, *args):
    r = xd.tool("test-xenstore", *args, check=False, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "Exhaustive transaction retries" not in r.stdout + r.stderr
    return r


def test_test_xenstore_all(xenstored):
    r = run_test_xenstore(xenstored)
    for name in ("read 1", "write 2000", "dir", "rm dir", "ta rmw", "ta err"):
        assert name in r.stdout


def test_test_xenstore_random_and_iterations(xenstored):
    run_test_xenstore(xenstored, "-r", "2", "-i", "5")


def test_test_xenstore_parallel(xenstored):
    procs = [subprocess.Popen(["/usr/lib/xen-4.17/bin/test-xenstore", "-r", "3"],
                              env=xenstored.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for _ in range(4)]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
        assert "Exhaustive transaction retries" not in out


def test_tools_write_read_ls_rm(xenstored):
    t = xenstored.tool
    t("xenstore-write", "/tools/a", "hello", "/tools/b/c", "x y")
    assert t("xenstore-read", "/tools/a").stdout == "hello\n"
    assert t("xenstore-read", "-p", "/tools/b/c").stdout == "/tools/b/c: x y\n"
    assert t("xenstore-list", "/tools").stdout.split() == ["a", "b"]
    ls = t("xenstore-ls", "-f", "/tools").stdout
    assert '/tools/a = "hello"' in ls and '/tools/b/c = "x y"' in ls
    assert t("xenstore-exists", "/tools/b").returncode == 0
    assert t("xenstore-exists", "/tools/zz", check=False).returncode == 1
    t("xenstore-rm", "/tools/b")
    assert t("xenstore-list", "/tools").stdout.split() == ["a"]
    r = t("xenstore-read", "/tools/b/c", check=False)
    assert r.returncode == 1


def test_tools_chmod_and_perms(xenstored):
    t = xenstored.tool
    t("xenstore-write", "/p/x", "1")
    t("xenstore-chmod", "/p/x", "r1", "b2")
    assert "(r1,b2)" in t("xenstore-ls", "-p", "/p").stdout


def test_tools_watch(xenstored):
    w = subprocess.Popen(["/usr/bin/xenstore-watch", "-n", "3", "/wt"],
                         env=xenstored.env, stdout=subprocess.PIPE, text=True)
    try:
        c = xenstored.conn()
        # the initial event proves the watch is registered
        line = w.stdout.readline()
        assert line == "/wt\n"
        c.write("/wt/x", "1")
        c.call("RM", "/wt")
        out, _ = w.communicate(timeout=10)
        assert out == "/wt/x\n/wt\n"
        assert w.returncode == 0
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


def test_tools_list_many_children_uses_directory_part(xenstored):
    args = []
    for i in range(600):
        args += [f"/many/child-with-a-long-name-{i:04d}", "v"]
    xenstored.tool("xenstore-write", *args)
    names = xenstored.tool("xenstore-list", "/many").stdout.split()
    assert len(names) == 600 and len(set(names)) == 600


def test_xenstore_control(xenstored):
    r = xenstored.tool("xenstore-control", "foo", check=False)
    assert r.returncode == 3
    assert "Command not supported" in r.stdout + r.stderr
    r = xenstored.tool("xenstore-control", "help")
    assert "quota" in r.stdout


LOWLEVEL = r'''
import sys
sys.path.insert(0, "/usr/lib/xen-4.17/lib/python")
from xen.lowlevel import xs
h = xs.xs()
h.write("", "/ll/a", "va")
assert h.read("", "/ll/a") == b"va"
assert h.ls("", "/ll") == ["a"]
t = h.transaction_start()
h.write(t, "/ll/b", "vb")
assert h.read("", "/ll/b") is None
assert h.transaction_end(t, True)      # abort
assert h.read("", "/ll/b") is None
t = h.transaction_start()
h.write(t, "/ll/b", "vb")
assert h.transaction_end(t, False)     # commit
assert h.read("", "/ll/b") == b"vb"
h.set_permissions("", "/ll/a", [{"dom": 0}, {"dom": 3, "read": True}])
p = h.get_permissions("", "/ll/a")
assert p[1]["dom"] == 3 and p[1]["read"] and not p[1]["write"], p
h.watch("/ll", "tok")
assert h.read_watch() == ("/ll", "tok")
h.write("", "/ll/c", "vc")
import select
r, _, _ = select.select([h.fileno()], [], [], 5)   # xs_fileno() pipe
assert r, "no watch pipe wake-up"
assert h.read_watch() == ("/ll/c", "tok")
h.unwatch("/ll", "tok")
h.write("", "/ll/d", "vd")
assert h.get_domain_path(7) == "/local/domain/7"
h.introduce_domain(5, 0, 1)
h.release_domain(5)
h.rm("", "/ll")
assert h.read("", "/ll/a") is None
h.close()
print("ok")
'''


def test_python_lowlevel_xs(xenstored):
    r = subprocess.run([sys.executable, "-c", LOWLEVEL], env=xenstored.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout == "ok\n", (r.stdout, r.stderr)


PYXS = r'''
import threading
import pyxs
with pyxs.Client() as c:
    c[b"/px/a"] = b"1"
    assert c[b"/px/a"] == b"1"
    errors = []
    def worker(i):
        try:
            for j in range(30):
                p = b"/px/w%d/%d" % (i, j)
                c[p] = b"%d" % j
                assert c[p] == b"%d" % j
        except Exception as e:
            errors.append(e)
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in ts: t.start()
    for t in ts: t.join()
    assert not errors, errors
    assert len(c.list(b"/px")) == 7
    c.transaction()
    c[b"/px/t"] = b"in-tx"
    assert c.commit()
    assert c[b"/px/t"] == b"in-tx"
    m = c.monitor()
    m.watch(b"/px/t", b"tok")
    ev = next(m.wait())
    assert ev == (b"/px/t", b"tok"), ev
    c[b"/px/t"] = b"again"
    ev = next(m.wait())
    assert ev == (b"/px/t", b"tok"), ev
print("ok")
'''


def test_pyxs_pipelined(xenstored):
    r = subprocess.run(["/usr/bin/python3", "-c", PYXS], env=xenstored.env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "ok\n", (r.stdout, r.stderr)
