"""A real VictoriaMetrics (Debian's ``victoria-metrics``) for tests: install, start on a
free port of 127.0.0.1, load the same history as the Prometheus of fixtures.py, stop.

The history is the same exposition promtool loads into Prometheus, sent to
``/api/v1/import/prometheus`` (the text format, timestamps in milliseconds) and made
searchable with ``/internal/force_flush``. ``-search.latencyOffset`` is 0 and the
cache is off, so a query sees every sample at once, as Prometheus' back-filled blocks.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests import apt
from tests.conftest import service_missing
from tests.prometheus_support.fixtures import DAYS, END_S, LoadedPrometheus
from tests.prometheus_support.openmetrics import (
    FAMILIES,
    openmetrics_chunks,
    small_fleet,
)
from tests.prometheus_support.server import free_port


def ensure_installed() -> str | None:
    """The ``victoria-metrics`` binary, installing Debian's package if missing."""
    if not apt.install(
        ["victoria-metrics"], lambda: bool(shutil.which("victoria-metrics"))
    ):
        return None
    return shutil.which("victoria-metrics")


def prometheus_text(openmetrics: str) -> str:
    """OpenMetrics sample lines (timestamps in seconds) as the Prometheus text format
    VictoriaMetrics imports (timestamps in milliseconds); comments dropped."""
    out = []
    for line in openmetrics.splitlines():
        if not line or line.startswith("#"):
            continue
        series, value, timestamp_s = line.rsplit(" ", 2)
        out.append(f"{series} {value} {round(float(timestamp_s) * 1000)}\n")
    return "".join(out)


@dataclass
class VictoriaMetricsServer:
    """One victoria-metrics process over a data directory."""

    binary: str
    data_dir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    # More command-line flags (e.g. -httpAuth.username).
    args: tuple[str, ...] = ()
    # The credentials its readiness probe needs, when the flags above ask for some.
    auth: tuple[str, str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout_s: float = 60.0) -> VictoriaMetricsServer:
        if not self.port:
            self.port = free_port()
        log = (self.data_dir.parent / "victoria-metrics.log").open("ab")
        self.process = subprocess.Popen(
            [
                self.binary,
                f"-storageDataPath={self.data_dir}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=100y",
                "-search.latencyOffset=0s",
                "-search.disableCache",
                "-loggerLevel=ERROR",
                *self.args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"victoria-metrics exited: {log.name}")
            try:
                if requests.get(f"{self.url}/health", timeout=1, auth=self.auth).ok:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"victoria-metrics was not ready within {timeout_s} s")

    def load(self, text: str) -> None:
        """Import Prometheus text-format samples and make them searchable."""
        answer = requests.post(
            f"{self.url}/api/v1/import/prometheus", data=text.encode(), timeout=300
        )
        answer.raise_for_status()
        requests.get(f"{self.url}/internal/force_flush", timeout=60).raise_for_status()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def victoria_with_history(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LoadedPrometheus]:
    """A real VictoriaMetrics with the 8 days of prometheus_with_history."""
    binary = ensure_installed()
    if binary is None:
        service_missing("victoria-metrics (Debian package 'victoria-metrics')")
    work = tmp_path_factory.mktemp("victoria")
    specs = small_fleet(end_s=END_S, days=DAYS)
    server = VictoriaMetricsServer(binary, work / "data").start()
    try:
        server.load(
            prometheus_text("".join(openmetrics_chunks(specs, tuple(FAMILIES), "")))
        )
        yield LoadedPrometheus(server, specs, END_S, DAYS)  # type: ignore[arg-type]
    finally:
        server.stop()
