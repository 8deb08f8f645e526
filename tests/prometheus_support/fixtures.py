"""pytest fixtures around the real Prometheus: import them into a test module to use."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import service_missing
from tests.prometheus_support.openmetrics import (
    FAMILIES,
    SeriesSpec,
    small_fleet,
    write_openmetrics,
)
from tests.prometheus_support.server import (
    PrometheusServer,
    create_blocks,
    ensure_installed,
)

# The history ends here (a multiple of 60, in the past): services take `now` as a
# parameter, so nothing depends on the wall clock.
END_S = 1_794_960_000
DAYS = 8


@dataclass
class LoadedPrometheus:
    """A running Prometheus holding the history of ``specs``."""

    server: PrometheusServer
    specs: list[SeriesSpec]
    end_s: int
    days: int

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def start_s(self) -> int:
        return self.end_s - self.days * 86_400


def loaded_prometheus(
    tmp_path_factory: pytest.TempPathFactory,
    families: tuple[str, ...],
    extra: str = "",
) -> Iterator[LoadedPrometheus]:
    """A running Prometheus with the small fleet's ``families`` and ``extra``
    exposition text (other series, e.g. node costs)."""
    binaries = ensure_installed()
    if binaries is None:
        service_missing("prometheus and promtool (Debian package 'prometheus')")
    prometheus, promtool = binaries
    work = tmp_path_factory.mktemp("prometheus")
    specs = small_fleet(end_s=END_S, days=DAYS)
    exposition = work / "history.om"
    write_openmetrics(exposition, specs, families, extra)
    create_blocks(promtool, exposition, work / "data")
    exposition.unlink()
    server = PrometheusServer(prometheus, work / "data").start()
    try:
        yield LoadedPrometheus(server, specs, END_S, DAYS)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def prometheus_with_history(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LoadedPrometheus]:
    """A real Prometheus with 8 days of the small fleet's cAdvisor and KSM history."""
    yield from loaded_prometheus(tmp_path_factory, tuple(FAMILIES))


@pytest.fixture(scope="module")
def prometheus_cadvisor_only(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LoadedPrometheus]:
    """The same 8 days with the kubelet's cAdvisor series only: no kube-state-metrics,
    so no OOM series (a normal setup)."""
    yield from loaded_prometheus(tmp_path_factory, ("cpu", "memory"))
