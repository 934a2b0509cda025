# SPDX-License-Identifier: MIT
"""The `xen` fixture: one boot of real Xen per session, parsed.

tests/xen/check.sh (make check-xen) boots once and passes the run
directory in $XBD_XEN_RUN; run alone, the fixture boots itself (images
from build-images.sh must exist in $XBD_XEN_OUT).  The scenario in dom0
(guest/scenario.sh) only acts and prints; every check is here.
"""
import os
import re
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LINE = re.compile(r"XBDXEN-(\w+) (\S+) \| (.*?) \| (.*?)\r?$")
TIME = re.compile(r"XBDXEN-TIME (\S+) secs=([\d.]+) rc=(\d+)")


class XenRun:
    """Parsed serial log: results[phase][label] = [reply, ...] in order."""

    def __init__(self, rundir):
        self.rundir = rundir
        with open(os.path.join(rundir, "serial.log"), "rb") as f:
            self.log = f.read().decode("utf-8", "replace")
        self.results, self.commands, self.times = {}, {}, {}
        for line in self.log.splitlines():
            m = LINE.search(line)
            if m:
                phase, label, cmd, reply = m.groups()
                self.results.setdefault(phase, {}).setdefault(label, []).append(reply)
                self.commands.setdefault(phase, {})[label] = cmd
            m = TIME.search(line)
            if m:
                self.times[m.group(1)] = (float(m.group(2)), int(m.group(3)))

    def replies(self, phase, label):
        got = self.results.get(phase, {}).get(label)
        assert got, f"no {phase} {label} line in {self.rundir}/serial.log"
        return got

    def reply(self, phase, label):
        """The (last) reply to a command, as a list of words."""
        return self.replies(phase, label)[-1].split()

    def ok(self, phase, label):
        words = self.reply(phase, label)
        assert words[:1] == ["ok"], f"{phase} {label}: {' '.join(words)}"
        return words[1:]

    def err(self, phase, label):
        words = self.reply(phase, label)
        assert words[:1] == ["err"], f"{phase} {label}: {' '.join(words)}"
        return int(words[1])

    def time(self, label):
        assert label in self.times, f"no XBDXEN-TIME {label}"
        return self.times[label]


@pytest.fixture(scope="session")
def xen():
    rundir = os.environ.get("XBD_XEN_RUN")
    if not rundir:
        out = os.environ.get("XBD_XEN_OUT") or os.path.join(HERE, "..", "..", "build", "xen")
        rundir = os.path.join(out, "run")
        subprocess.run(["bash", os.path.join(HERE, "run.sh"), "--out", rundir],
                       check=False, env=dict(os.environ, XBD_XEN_OUT=out))
    return XenRun(rundir)
