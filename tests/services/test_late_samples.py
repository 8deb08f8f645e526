"""Usage that reaches the source late (a scrape gap, remote-write samples) is read by
a later cycle when ``VPAWEB_LATE_SAMPLES_S`` covers the delay, and counted once: the
checkpoints equal those of a run that had every sample on time."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.core.management import call_command

from recommender.cluster.simulated import build_fleet
from recommender.models import Checkpoint, Cluster, RefreshRun
from recommender.services.refresh import backfill, cycle
from recommender.services.refresh.cycle import refresh_cluster
from recommender.sources.base import UsageGrid
from recommender.sources.simulated import SimulatedUsageSource

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
# The first cycle runs while the last 5 minutes of half the series are missing.
MISSING_S = 300.0


class LateSource(SimulatedUsageSource):
    """The simulation, whose even-numbered series have no samples after
    ``arrived_until_s`` yet (they arrive later)."""

    arrived_until_s = float("inf")

    def fetch_usage(self, **kwargs: object) -> UsageGrid:
        grid = super().fetch_usage(**kwargs)  # type: ignore[arg-type]
        late = np.zeros_like(grid.cpu_cores, dtype=bool)
        late[::2, :] = grid.timestamp_s[None, :] > self.arrived_until_s
        return UsageGrid(
            grid.series,
            grid.timestamp_s,
            np.where(late, np.nan, grid.cpu_cores),
            np.where(late, np.nan, grid.memory_bytes),
        )


@pytest.fixture
def sources(settings, monkeypatch):
    """Cluster ``late`` reads LateSource, every other the plain simulation."""
    settings.SIMULATION_SEED = 5
    settings.SIMULATION_WORKLOADS = 6
    settings.SIMULATION_HISTORY_DAYS = 0.05
    settings.CHECKPOINT_INTERVAL_S = 0  # every cycle writes every checkpoint
    settings.FIRST_CONTACT_CHUNK_CONTAINERS = 0
    fleet = build_fleet(settings.SIMULATION_SEED, settings.SIMULATION_WORKLOADS)
    late = LateSource(fleet=fleet)

    def source_for(cluster: Cluster) -> SimulatedUsageSource:
        return late if cluster.name == "late" else SimulatedUsageSource(fleet=fleet)

    monkeypatch.setattr(cycle, "usage_source_for", source_for)
    monkeypatch.setattr(backfill, "usage_source_for", source_for)
    return late


def states(cluster: Cluster) -> dict[tuple[str, str], tuple[bytes, int, datetime]]:
    """Each container's stored checkpoint, by workload and container name."""
    return {
        (c.container.workload.name, c.container.name): (
            bytes(c.state),
            c.sample_count,
            c.last_sample_at,
        )
        for c in Checkpoint.objects.filter(
            container__workload__cluster=cluster
        ).select_related("container__workload")
    }


def run_both(late: LateSource) -> tuple[RefreshRun, RefreshRun]:
    """A cycle while samples are missing, then one after they arrived; and the same
    two cycles with every sample on time. Returns the second cycles' runs."""
    on_time = Cluster.objects.create(name="on-time", kind="simulated")
    delayed = Cluster.objects.create(name="late", kind="simulated")
    later = NOW + timedelta(minutes=2)
    for moment, arrived_until_s in ((NOW, NOW.timestamp() - MISSING_S), (later, None)):
        late.arrived_until_s = (
            float("inf") if arrived_until_s is None else arrived_until_s
        )
        runs = []
        for cluster in (on_time, delayed):
            run = refresh_cluster(cluster_id=cluster.pk, now=moment)
            assert run.status == RefreshRun.Status.SUCCEEDED, run.error
            runs.append(run)
    return runs[0], runs[1]


def hidden_samples(late: LateSource) -> int:
    """The samples the first cycle missed (CPU and memory each count)."""
    grid = SimulatedUsageSource.fetch_usage(
        late,
        namespace=None,
        start_s=NOW.timestamp() - MISSING_S,
        end_s=NOW.timestamp(),
        step_s=60.0,
    )
    return int(
        np.count_nonzero(~np.isnan(grid.cpu_cores[::2]))
        + np.count_nonzero(~np.isnan(grid.memory_bytes[::2]))
    )


@pytest.mark.django_db
def test_late_samples_within_the_setting_are_counted_once(settings, sources):
    settings.LATE_SAMPLES_S = 600
    on_time_run, delayed_run = run_both(sources)
    on_time, delayed = on_time_run.cluster, delayed_run.cluster
    # The second cycle says how many samples it found that the first had missed.
    assert delayed_run.counts["late_samples"] == hidden_samples(sources) > 0
    assert on_time_run.counts["late_samples"] == 0
    expected = states(on_time)
    assert expected and all(count > 0 for _, count, _ in expected.values())
    assert states(delayed) == expected
    # The checkpoints hold what lies before the last 10 minutes only.
    later = NOW + timedelta(minutes=2)
    assert {at for _, _, at in expected.values()} == {later - timedelta(minutes=10)}


@pytest.mark.django_db
def test_without_the_setting_late_samples_are_lost(settings, sources):
    settings.LATE_SAMPLES_S = 0
    on_time_run, delayed_run = run_both(sources)
    assert "late_samples" not in delayed_run.counts
    expected, got = states(on_time_run.cluster), states(delayed_run.cluster)
    assert got.keys() == expected.keys()
    assert sum(got[k][1] for k in got) < sum(expected[k][1] for k in expected)


@pytest.mark.django_db
def test_the_backfill_command_reports_the_late_samples_it_filled(settings, sources):
    settings.LATE_SAMPLES_S = 600
    cluster = Cluster.objects.create(name="late", kind="simulated")
    sources.arrived_until_s = NOW.timestamp() - MISSING_S
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    sources.arrived_until_s = float("inf")
    out = io.StringIO()
    call_command(
        "backfill",
        cluster="late",
        now="2026-11-21T12:02:00Z",
        stdout=out,
        stderr=io.StringIO(),
    )
    assert f", {hidden_samples(sources)} late samples filled," in out.getvalue()
