"""A real Prometheus for tests and benchmarks: install, load history, start, stop.

Follows docs/prometheus.md: Debian's package (installed here
when missing), history loaded with ``promtool tsdb create-blocks-from openmetrics``
and ``--max-block-duration=192h`` into an empty directory, the server bound to
127.0.0.1 on a free port with its own config (no scrape targets unless given) and a
long retention.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from tests import apt

logger = logging.getLogger(__name__)

CONFIG = "global: {scrape_interval: 1m, evaluation_interval: 1m}\nscrape_configs: []\n"


def ensure_installed() -> tuple[str, str] | None:
    """Paths of ``prometheus`` and ``promtool``, installing Debian's package if missing.

    Returns None when they are absent and cannot be installed (no root, no apt, no
    network); the caller turns that into ``service_missing``.
    """

    def found() -> bool:
        return all(shutil.which(name) for name in ("prometheus", "promtool"))

    if not apt.install(["prometheus"], found):
        return None
    return shutil.which("prometheus"), shutil.which("promtool")  # type: ignore[return-value]


def create_blocks(promtool: str, openmetrics: Path, data_dir: Path) -> None:
    """Load an OpenMetrics file into an empty TSDB directory (few large blocks)."""
    if data_dir.exists():
        # Back-filling twice into one directory makes overlapping duplicate blocks.
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    done = subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--max-block-duration=192h",
            str(openmetrics),
            str(data_dir),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"promtool failed: {done.stderr.strip()[-2000:]}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PrometheusServer:
    """One Prometheus process over a data directory; start() and stop() may repeat."""

    binary: str
    data_dir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    # The configuration file's text: no scrape targets unless a test gives some.
    config: str = CONFIG
    # More command-line flags (e.g. --web.config.file).
    args: tuple[str, ...] = ()
    # The credentials its readiness probe needs, when the flags above ask for some.
    auth: tuple[str, str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout_s: float = 60.0) -> PrometheusServer:
        """Start and wait until ready; the same port is reused on a restart."""
        if not self.port:
            self.port = free_port()
        config = self.data_dir.parent / f"{self.data_dir.name}.prometheus.yml"
        config.write_text(self.config)
        log = (self.data_dir.parent / f"{self.data_dir.name}.prometheus.log").open("ab")
        self.process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data_dir}",
                "--storage.tsdb.retention.time=3650d",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
                *self.args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited with {self.process.returncode}; see {log.name}"
                )
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1, auth=self.auth).ok:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"prometheus was not ready within {timeout_s} s")

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL) and wait for it."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
