"""Samples reaching a real Prometheus late are read by the next cycle and counted once.

Prometheus starts with a day of the small fleet's cAdvisor history in which the
``shop/web`` pods' last minutes are missing; a cycle runs; then those minutes arrive
(a TSDB block of them, as a delayed remote write or a retried scrape would add them)
and the next cycle runs. With ``VPAWEB_LATE_SAMPLES_S`` covering the delay, the stored
checkpoints equal, byte for byte, those of cycles that had every sample on time; with
0 (the default), the late minutes are never read.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recommender.models import Checkpoint, Cluster, RefreshRun
from recommender.services.refresh.cycle import refresh_cluster
from tests.conftest import service_missing
from tests.k8s_fake.server import FakeApiServer, write_kubeconfig
from tests.prometheus_support.fixtures import END_S
from tests.prometheus_support.k8s_objects import objects_for
from tests.prometheus_support.openmetrics import (
    FAMILIES,
    SeriesSpec,
    family_text,
    small_fleet,
)
from tests.prometheus_support.server import (
    PrometheusServer,
    create_blocks,
    ensure_installed,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# The late pods' samples after this reach Prometheus only after the first cycle.
GAP_S = END_S - 15 * 60
FIRST_S = END_S - 10 * 60  # the first cycle: 5 of its minutes are missing
LATE_SAMPLES_S = 600


def is_late(spec: SeriesSpec) -> bool:
    return (spec.namespace, spec.workload) == ("shop", "web")


def exposition(specs: list[SeriesSpec], *, late: bool) -> str:
    """The cpu and memory families: the late pods' samples after GAP_S (``late``),
    or everything else."""
    text = []
    for family in ("cpu", "memory"):
        name, kind = FAMILIES[family]
        text.append(f"# TYPE {name} {kind}\n")
        for spec in specs:
            for line in family_text(family, spec).splitlines(keepends=True):
                after_gap = int(line.rsplit(" ", 1)[1]) > GAP_S
                if (is_late(spec) and after_gap) == late:
                    text.append(line)
    return "".join(text) + "# EOF\n"


class LatePrometheus:
    """A real Prometheus whose late samples arrive on ``deliver_late()``."""

    def __init__(self, work: Path) -> None:
        binaries = ensure_installed()
        if binaries is None:
            service_missing("prometheus and promtool (Debian package 'prometheus')")
        self.binary, self.promtool = binaries
        self.work = work
        self.specs = small_fleet(end_s=END_S, days=1)
        (work / "on-time.om").write_text(exposition(self.specs, late=False))
        create_blocks(self.promtool, work / "on-time.om", work / "data")
        self.server = PrometheusServer(self.binary, work / "data").start()

    def deliver_late(self) -> None:
        """Add the late samples as a block of their own and restart Prometheus."""
        (self.work / "late.om").write_text(exposition(self.specs, late=True))
        create_blocks(self.promtool, self.work / "late.om", self.work / "late")
        self.server.stop()
        for block in (self.work / "late").iterdir():
            shutil.move(str(block), str(self.work / "data" / block.name))
        self.server.start()


@pytest.fixture
def prometheus(tmp_path: Path, settings, monkeypatch) -> Iterator[LatePrometheus]:
    loaded = LatePrometheus(tmp_path)
    api = FakeApiServer(objects_for(loaded.specs, live_at_s=END_S)).start()
    write_kubeconfig(tmp_path / "kubeconfig", {"fake": api}, current="fake")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    settings.PROMETHEUS_URL = loaded.server.url
    settings.PROMETHEUS_BACKFILL_DAYS = 0.5
    settings.CHECKPOINT_INTERVAL_S = 0  # every cycle stores every checkpoint
    yield loaded
    loaded.server.stop()
    api.stop()


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def cycle(
    cluster: Cluster, seconds: float, settings, late_samples_s: int
) -> RefreshRun:
    settings.LATE_SAMPLES_S = late_samples_s
    run = refresh_cluster(cluster_id=cluster.pk, now=at(seconds))
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    return run


def states(cluster: Cluster) -> dict[tuple[str, str, str], tuple[bytes, int]]:
    return {
        (
            c.container.workload.namespace,
            c.container.workload.name,
            c.container.name,
        ): (bytes(c.state), c.sample_count)
        for c in Checkpoint.objects.filter(
            container__workload__cluster=cluster
        ).select_related("container__workload")
    }


def test_late_samples_are_read_once_and_equal_an_on_time_run(prometheus, settings):
    def cluster(name: str) -> Cluster:
        return Cluster.objects.create(
            name=name, kind=Cluster.Kind.KUBERNETES, context="fake"
        )

    settled, unsettled = cluster("settled"), cluster("unsettled")
    cycle(settled, FIRST_S, settings, LATE_SAMPLES_S)
    cycle(unsettled, FIRST_S, settings, 0)
    prometheus.deliver_late()
    second = cycle(settled, END_S, settings, LATE_SAMPLES_S)
    # The 5 minutes (GAP_S, FIRST_S] of 3 series, CPU and memory, filled.
    assert second.counts["late_samples"] == 5 * 3 * 2
    cycle(unsettled, END_S, settings, 0)
    # The same two cycles, every sample on time.
    on_time, on_time_unsettled = cluster("on-time"), cluster("on-time-unsettled")
    for moment in (FIRST_S, END_S):
        cycle(on_time, moment, settings, LATE_SAMPLES_S)
        cycle(on_time_unsettled, moment, settings, 0)

    expected = states(on_time)
    assert len(expected) == 4
    assert states(settled) == expected
    # Without the setting the late pods' minutes were read while missing, never again.
    lost = states(unsettled)
    full = states(on_time_unsettled)
    for key in full:
        if key[:2] == ("shop", "web"):
            assert lost[key][1] < full[key][1], key
        else:
            assert lost[key] == full[key], key
