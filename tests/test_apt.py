"""tests/apt.py: parallel processes that need the same missing package run apt-get one
at a time, and the one that waited finds the package installed (a fake apt-get on PATH
records its runs; two apt-get at once would fail on dpkg's lock)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

FAKE_APT = """#!/bin/sh
# Records each run; a second run while one is going fails, as dpkg's lock makes it.
echo "$1" >> "{log}"
[ -e "{busy}" ] && {{ echo "E: Could not get lock" >&2; exit 100; }}
touch "{busy}"; sleep 1
[ "$1" = install ] && touch "{installed}"
rm -f "{busy}"
"""

CALLER = """
import sys
from pathlib import Path
from tests import apt
installed = Path(sys.argv[1])
print(apt.install(["pkg"], installed.exists))
"""


def test_two_processes_install_a_missing_package_once(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log, busy, installed = tmp_path / "log", tmp_path / "busy", tmp_path / "installed"
    fake = bin_dir / "apt-get"
    fake.write_text(FAKE_APT.format(log=log, busy=busy, installed=installed))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    root = Path(__file__).resolve().parents[1]
    callers = [
        subprocess.Popen(
            [sys.executable, "-c", CALLER, str(installed)],
            env=env,
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    answers = [caller.communicate(timeout=60)[0].strip() for caller in callers]
    assert answers == ["True", "True"]
    assert log.read_text().split() == ["install"]
