"""Run rows: one helper creates and logs them for refresh, back-fill and expiry."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from recommender.models import Cluster, RefreshRun
from recommender.services.refresh.backfill import backfill_cluster
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.runs import start_run

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def cluster(db, settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 3
    return Cluster.objects.create(name="sim-runs", kind=Cluster.Kind.SIMULATED)


def test_start_run_stores_a_running_row_and_logs_it(cluster, caplog):
    caplog.set_level(logging.INFO, logger="recommender.services.runs")

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
    caplog.set_level(logging.INFO, logger="recommender.services.runs")

    backfill = backfill_cluster(cluster_id=cluster.pk, now=NOW, days=1)
    refresh = refresh_cluster(cluster_id=cluster.pk, now=NOW)

    assert f"backfill of cluster sim-runs shard '*' (run {backfill.pk}) started" in (
        caplog.text
    )
    assert f"refresh of cluster sim-runs shard '*' (run {refresh.pk}) started" in (
        caplog.text
    )
