"""Run rows: one helper creates and logs them for refresh, back-fill and expiry."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from recommender.models import Cluster, RefreshRun
from recommender.services.operations.runs import (
    heartbeat,
    reap_lost_runs,
    recorded_run,
    start_run,
)
from recommender.services.refresh.backfill import backfill_cluster
from recommender.services.refresh.cycle import refresh_cluster

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def cluster(db, settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 3
    return Cluster.objects.create(name="sim-runs", kind=Cluster.Kind.SIMULATED)


def test_start_run_stores_a_running_row_and_logs_it(cluster, caplog):
    caplog.set_level(logging.INFO, logger="recommender.services.operations.runs")

    run = start_run(kind=RefreshRun.Kind.BACKFILL, cluster=cluster, namespace="shop")

    stored = RefreshRun.objects.get(pk=run.pk)
    assert (stored.cluster, stored.kind, stored.shard, stored.status) == (
        cluster,
        RefreshRun.Kind.BACKFILL,
        "shop",
        RefreshRun.Status.RUNNING,
    )
    assert f"backfill of cluster sim-runs shard 'shop' (run {run.pk}) started" in (
        caplog.text
    )


def test_refresh_and_backfill_start_their_runs_through_it(cluster, caplog):
    caplog.set_level(logging.INFO, logger="recommender.services.operations.runs")

    backfill = backfill_cluster(cluster_id=cluster.pk, now=NOW, days=1)
    refresh = refresh_cluster(cluster_id=cluster.pk, now=NOW)

    assert f"backfill of cluster sim-runs shard '*' (run {backfill.pk}) started" in (
        caplog.text
    )
    assert f"refresh of cluster sim-runs shard '*' (run {refresh.pk}) started" in (
        caplog.text
    )


def _running(kind, *, minutes_ago, cluster=None):
    return RefreshRun.objects.create(
        kind=kind,
        cluster=cluster,
        started_at=timezone.now() - timedelta(minutes=minutes_ago),
    )


def test_a_run_left_running_by_a_killed_worker_is_reaped_by_the_next_of_its_kind(
    cluster, settings
):
    settings.CELERY_TASK_TIME_LIMIT = 600
    lost = _running(RefreshRun.Kind.REFRESH, minutes_ago=11, cluster=cluster)
    young = _running(RefreshRun.Kind.REFRESH, minutes_ago=9, cluster=cluster)
    other_kind = _running(RefreshRun.Kind.BACKFILL, minutes_ago=60, cluster=cluster)

    refresh_cluster(cluster_id=cluster.pk, now=NOW)

    lost.refresh_from_db()
    assert lost.status == RefreshRun.Status.FAILED
    assert lost.error.startswith("worker lost:")
    assert "(600 s)" in lost.error
    assert lost.finished_at is not None
    young.refresh_from_db()
    other_kind.refresh_from_db()
    assert young.status == other_kind.status == RefreshRun.Status.RUNNING


def test_a_run_whose_heartbeat_stopped_for_one_refresh_interval_is_reaped(
    cluster, settings
):
    """A killed worker costs at most one interval: its row is reaped once its
    heartbeat is one refresh interval old, long before the task time limit."""
    settings.CELERY_TASK_TIME_LIMIT = 900
    settings.REFRESH_INTERVAL_S = 60
    now = timezone.now()
    silent = _running(RefreshRun.Kind.REFRESH, minutes_ago=2, cluster=cluster)
    beating = _running(RefreshRun.Kind.REFRESH, minutes_ago=2, cluster=cluster)
    RefreshRun.objects.filter(pk=silent.pk).update(
        heartbeat_at=now - timedelta(seconds=61)
    )
    RefreshRun.objects.filter(pk=beating.pk).update(
        heartbeat_at=now - timedelta(seconds=20)
    )

    assert reap_lost_runs(kind=RefreshRun.Kind.REFRESH, now=now) == 1

    silent.refresh_from_db()
    beating.refresh_from_db()
    assert silent.status == RefreshRun.Status.FAILED
    assert silent.error.startswith("worker lost:")
    assert "its last heartbeat 0:01:01 ago" in silent.error
    assert beating.status == RefreshRun.Status.RUNNING


def test_a_running_run_renews_its_heartbeat_and_stops_when_it_ends(settings):
    settings.REFRESH_INTERVAL_S = 0.2  # a beat every 0.05 s
    beats = []

    with heartbeat(lambda: beats.append(1), name="test"):
        deadline = time.monotonic() + 5
        while len(beats) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    count = len(beats)
    time.sleep(0.2)

    assert count >= 3
    assert len(beats) == count


def test_a_failing_beat_is_logged_and_the_next_one_tries_again(settings, caplog):
    settings.REFRESH_INTERVAL_S = 0.2
    beats = []

    def beat():
        beats.append(1)
        if len(beats) == 1:
            raise ConnectionError("redis away")

    with heartbeat(beat, name="claim x"):
        deadline = time.monotonic() + 5
        while len(beats) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)

    assert len(beats) >= 2
    assert "heartbeat of claim x failed: redis away" in caplog.text


def test_reaping_is_a_compare_and_swap(cluster, settings):
    settings.CELERY_TASK_TIME_LIMIT = 60
    lost = _running(RefreshRun.Kind.EXPIRE, minutes_ago=5)

    assert reap_lost_runs(kind=RefreshRun.Kind.EXPIRE, now=timezone.now()) == 1
    # A second reaper (another worker starting at the same moment) finds nothing.
    assert reap_lost_runs(kind=RefreshRun.Kind.EXPIRE, now=timezone.now()) == 0
    lost.refresh_from_db()
    assert lost.status == RefreshRun.Status.FAILED


def test_a_failing_body_fails_the_run_with_its_phase_and_timings(cluster):
    with (
        pytest.raises(RuntimeError),
        recorded_run(kind=RefreshRun.Kind.REFRESH, cluster=cluster) as recorder,
    ):
        recorder.counts["seen"] = 2
        with recorder.phases("discover"):
            pass
        with recorder.phases("ingest"):
            raise RuntimeError("disk full")

    run = RefreshRun.objects.get(pk=recorder.run.pk)
    assert run.status == RefreshRun.Status.FAILED
    assert run.error == "ingest failed: RuntimeError: disk full"
    assert run.counts == {"seen": 2}
    # The failed phase is timed too (try/finally), with the total.
    assert set(run.timings) == {"discover_s", "ingest_s", "total_s"}


def test_a_finished_body_succeeds_with_its_counts(cluster):
    with recorded_run(kind=RefreshRun.Kind.EXPIRE) as recorder:
        recorder.counts = {"checked": 3}
        recorder.progress(0.5)
        assert RefreshRun.objects.get(pk=recorder.run.pk).progress == 0.5

    run = RefreshRun.objects.get(pk=recorder.run.pk)
    assert (run.status, run.progress, run.counts) == (
        RefreshRun.Status.SUCCEEDED,
        1.0,
        {"checked": 3},
    )
