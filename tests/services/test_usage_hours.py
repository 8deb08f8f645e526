"""The refresh stores each container's hourly usage (the workload page's chart) from
the samples it reads: what the source answers for those hours, each sample once,
whether checkpoints wait for their schedule, the worker keeps its engine rows or
restarts every minute, late samples settle, or a checkpoint is rebuilt from history.
Retention prunes the hours."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from recommender.models import Checkpoint, Cluster, Container, RefreshRun, UsageHour
from recommender.services.connections import usage_source_for
from recommender.services.operations.retention import prune_history
from recommender.services.refresh import warm_state
from recommender.services.refresh.cycle import refresh_cluster

# 40 minutes before an hour's end: the cycles below cross into the next hour.
NOW = datetime(2026, 11, 21, 12, 20, tzinfo=UTC)
HOUR_S = 3600.0

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 8
    settings.SIMULATION_HISTORY_DAYS = 0.1  # 2.4 h: three partial or whole hours
    settings.CHECKPOINT_INTERVAL_S = 300  # checkpoints wait: samples are read again


def stored_hours(cluster: Cluster) -> dict[tuple[int, float], tuple[float, ...]]:
    """(container id, hour end) -> the stored columns."""
    return {
        (row[0], row[1].timestamp()): tuple(row[2:])
        for row in UsageHour.objects.filter(
            container__workload__cluster=cluster
        ).values_list(
            "container_id",
            "ends_at",
            "cpu_max_cores",
            "cpu_sum_cores",
            "cpu_samples",
            "memory_max_bytes",
            "memory_sum_bytes",
            "memory_samples",
        )
    }


def source_hours(
    cluster: Cluster, start_s: float, end_s: float
) -> dict[tuple[int, float], tuple[float, ...]]:
    """The same columns computed here from the source's one-minute grid of each
    workload's pods over ``(start_s, end_s]``: per hour, the max, sum and count of the
    samples of every pod of the container (the old chart's max and mean over pods,
    at the hour)."""
    source = usage_source_for(cluster)
    out = {}
    for container in Container.objects.filter(
        workload__cluster=cluster, checkpoint__isnull=False
    ).select_related("workload"):
        w = container.workload
        grid = source.fetch_workload_usage(
            workloads=[(w.namespace, w.kind, w.name)],
            start_s=start_s,
            end_s=end_s,
            step_s=60.0,
        )
        rows = [
            i for i, key in enumerate(grid.series) if key.container == container.name
        ]
        if not rows:
            continue
        hours = np.ceil(grid.timestamp_s / HOUR_S) * HOUR_S
        for end in np.unique(hours):
            cols = hours == end
            cpu = grid.cpu_cores[rows][:, cols]
            memory = grid.memory_bytes[rows][:, cols]
            if np.isnan(cpu).all() and np.isnan(memory).all():
                continue
            out[(container.pk, float(end))] = (
                np.nanmax(cpu) if not np.isnan(cpu).all() else None,
                float(np.nansum(cpu)),
                int(np.count_nonzero(~np.isnan(cpu))),
                np.nanmax(memory) if not np.isnan(memory).all() else None,
                float(np.nansum(memory)),
                int(np.count_nonzero(~np.isnan(memory))),
            )
    return out


def assert_same(stored, expected) -> None:
    assert stored.keys() == expected.keys()
    for key, want in expected.items():
        got = stored[key]
        assert got[2] == want[2] and got[5] == want[5], key  # counts: each sample once
        assert got[0] == pytest.approx(want[0]) and got[3] == pytest.approx(want[3])
        assert got[1] == pytest.approx(want[1], rel=1e-9), key
        assert got[4] == pytest.approx(want[4], rel=1e-9), key


@pytest.mark.parametrize("regime", ["warm", "restarted", "late samples", "rebuilt"])
def test_stored_hours_equal_the_source_each_sample_once(settings, regime):
    if regime == "late samples":
        settings.LATE_SAMPLES_S = 300
    cluster = Cluster.objects.create(name=f"usage-{regime}", kind="simulated")
    # A first contact at 12:20, then a cycle a minute from 12:45 to 13:09: across the
    # hour, checkpoints every 5 minutes.
    minutes = [0, *range(25, 50)]
    for minute in minutes:
        if regime == "restarted":
            warm_state.forget_all()  # a new process every minute: re-reads
        if regime == "rebuilt" and minute == 33:
            # A new histogram key (a profile edit): the next cycle rebuilds every
            # checkpoint from the whole history, read again from the source.
            Checkpoint.objects.filter(container__workload__cluster=cluster).update(
                histogram_key="[1, 2, 3]"
            )
        run = refresh_cluster(
            cluster_id=cluster.pk, now=NOW + timedelta(minutes=minute)
        )
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    # One last cycle writes every checkpoint (and so every hour pending).
    settings.CHECKPOINT_INTERVAL_S = 0
    end = NOW + timedelta(minutes=minutes[-1] + 1)
    run = refresh_cluster(cluster_id=cluster.pk, now=end)
    assert run.counts["usage_hours_written"] > 0
    watermarks = set(
        Checkpoint.objects.filter(container__workload__cluster=cluster).values_list(
            "last_sample_at", flat=True
        )
    )
    (through,) = watermarks
    first_s = NOW.timestamp() - settings.SIMULATION_HISTORY_DAYS * 86400.0

    stored = stored_hours(cluster)
    expected = source_hours(cluster, first_s, through.timestamp())

    # 09:56 to 13:10: the hours ending 10:00, 11:00, 12:00, 13:00 and 14:00.
    assert len({hour for _, hour in expected}) == 5
    assert_same(stored, expected)


def test_a_cycle_adds_its_hours_in_one_statement_whatever_the_fleet(settings):
    """The hours go with the checkpoints in one upsert, however many containers."""
    settings.CHECKPOINT_INTERVAL_S = 0  # every cycle writes every checkpoint

    def upserts(workloads: int) -> tuple[int, int]:
        settings.SIMULATION_WORKLOADS = workloads
        cluster = Cluster.objects.create(name=f"fleet-{workloads}", kind="simulated")
        refresh_cluster(cluster_id=cluster.pk, now=NOW)
        with CaptureQueriesContext(connection) as queries:
            run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
        # Writes only: a batch workload's running hours read the stored hours (on
        # PostgreSQL in a parenthesized UNION ALL: pods.stored_history).
        found = [
            q
            for q in queries.captured_queries
            if '"recommender_usagehour"' in q["sql"]
            and not q["sql"].lstrip("( \n").upper().startswith("SELECT")
        ]
        return len(found), run.counts["usage_hours_written"]

    small, small_hours = upserts(4)
    large, large_hours = upserts(20)
    assert small == large == 1
    assert large_hours > small_hours > 0


def test_a_container_first_seen_gets_its_history_hours_at_first_contact():
    cluster = Cluster.objects.create(name="first", kind="simulated")
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    per_container = defaultdict(int)
    for container_id, _ in stored_hours(cluster):
        per_container[container_id] += 1
    checkpoints = Checkpoint.objects.filter(container__workload__cluster=cluster)
    assert set(per_container) <= set(checkpoints.values_list("container_id", flat=True))
    # 2.4 h back from 12:20: the hours ending 10:00 (4 minutes), 11:00, 12:00, 13:00.
    assert max(per_container.values()) == 4


def test_retention_prunes_hours_past_their_days(settings):
    settings.RETENTION_USAGE_DAYS = 9
    cluster = Cluster.objects.create(name="pruned", kind="simulated")
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    kept = stored_hours(cluster)
    assert kept
    container_id = next(iter(kept))[0]
    old = NOW - timedelta(days=9, hours=2)
    UsageHour.objects.create(
        container_id=container_id, ends_at=old, cpu_max_cores=1.0, cpu_samples=1
    )

    run = prune_history(now=NOW)

    assert run.counts["usage_hours"] == 1
    assert not UsageHour.objects.filter(ends_at=old).exists()
    assert stored_hours(cluster) == kept
