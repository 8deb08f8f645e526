"""Installing a Debian package a test needs (Chromium, Prometheus, VictoriaMetrics,
PostgreSQL, Redis).

``install(packages, present)`` returns at once when ``present()`` holds; otherwise it
installs under an exclusive lock, so the suite's parallel processes (xdist workers,
the SQLite and PostgreSQL runs of ``make test``, the fault suite) never run apt-get at
the same time: the one that waited finds the package there. It answers whether
``present()`` holds at the end; callers report a missing service themselves."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

LOCK = Path("/tmp/vpaweb-tests-apt.lock")


def install(
    packages: list[str], present: Callable[[], bool], *, recommends: bool = False
) -> bool:
    if present():
        return True
    apt = shutil.which("apt-get")
    if apt is None:
        return False
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    options = [] if recommends else ["--no-install-recommends"]
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Another process may have installed it while this one waited.
        for command in (
            [apt, "install", "-y", "-q", *options, *packages],
            [apt, "update", "-q"],
            [apt, "install", "-y", "-q", *options, *packages],
        ):
            if present():
                return True
            try:
                done = subprocess.run(
                    command, env=env, capture_output=True, text=True, timeout=900
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                logger.warning("cannot run %s: %s", " ".join(command[:2]), exc)
                return False
            if done.returncode != 0:
                logger.warning("%s failed: %s", " ".join(command), done.stderr[-500:])
    return present()
