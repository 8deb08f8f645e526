"""A PostgreSQL server and a Redis server of the fault suite's own, on free ports.

The faults stop and restart them, so they are never the shared servers (5432, 6379):
``initdb`` into a temporary directory and ``pg_ctl`` (Debian's binaries under
``/usr/lib/postgresql/<version>/bin``, run as the ``postgres`` user when we are root,
since PostgreSQL refuses to run as root), and ``redis-server`` without persistence.
Debian's packages are installed when missing, as tests/prometheus_support/server.py
does for Prometheus.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests import apt

logger = logging.getLogger(__name__)

PACKAGES = {"postgresql": "initdb", "redis-server": "redis-server"}


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _postgres_bin() -> Path | None:
    """The newest Debian PostgreSQL ``bin`` directory with initdb and pg_ctl."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0,
    )
    return found[-1].parent if found else None


def _found() -> dict[str, bool]:
    return {
        "postgresql": _postgres_bin() is not None,
        "redis-server": shutil.which("redis-server") is not None,
    }


def ensure_installed() -> list[str]:
    """Install Debian's packages for what is missing; the names still missing
    (no root, no apt, no network), which the caller reports as missing services."""
    missing = [name for name, ok in _found().items() if not ok]
    if missing:
        apt.install(missing, lambda: all(_found().values()))
    return [name for name, ok in _found().items() if not ok]


def _wait_for_port(port: int, *, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing answers on 127.0.0.1:{port} after {timeout_s:g} s")


@dataclass
class OwnPostgres:
    """A PostgreSQL server in ``data_dir`` on ``port``: stop, start, restart it."""

    bin_dir: Path
    data_dir: Path
    port: int

    @property
    def url(self) -> str:
        """The DATABASE_URL of its ``faults`` database (Django creates test_faults)."""
        return f"postgres://postgres@127.0.0.1:{self.port}/faults"

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    @classmethod
    def create(cls, root: Path) -> OwnPostgres:
        """initdb a new server under ``root`` (trust auth, no fsync: a test server)."""
        bin_dir = _postgres_bin()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL's initdb is not installed")
        root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(root, user="postgres")
        server = cls(bin_dir=bin_dir, data_dir=root / "data", port=free_port())
        server._run(
            "initdb", "-D", str(server.data_dir), "-A", "trust", "-U", "postgres"
        )
        return server

    def start(self) -> None:
        """Start it and wait until it accepts connections."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 "
            f"-c unix_socket_directories={self.data_dir} -c fsync=off "
            "-c full_page_writes=off -c synchronous_commit=off"
        )
        log = self.data_dir / "server.log"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(log),
            "-o",
            options,
            "-w",
            "start",
        )
        _wait_for_port(self.port)

    def stop(self) -> None:
        """Stop it now (``-m fast``: open connections are cut, as in a crash)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-w", "-m", "fast", "stop")

    def restart(self) -> None:
        """Stop and start it (every open connection is cut)."""
        self.stop()
        self.start()


@dataclass
class OwnRedis:
    """A ``redis-server`` on ``port``, without persistence: stop and start it."""

    port: int
    work_dir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it and wait until it answers."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.work_dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for_port(self.port)

    def stop(self) -> None:
        """Kill it (what a crash or a lost node does: no goodbye to the clients)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=20)
        self.process = None


# The servers of this process's run (tests/faults/__main__.py starts them before
# pytest, in the same process): the fault fixtures stop and start these.
RUNNING: dict[str, OwnPostgres | OwnRedis] = {}
