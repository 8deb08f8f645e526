"""PostgreSQL restarted in the middle of a refresh on a real worker: the run fails
naming the lost connection (or is reaped as its worker's), the task's retry stores the
cycle, and the state equals one uninterrupted refresh."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from django.db import connection

from recommender.models import Cluster, RefreshRun
from recommender.tasks import refresh_all_clusters as refresh_all_clusters_task
from recommender.tasks import refresh_cluster as refresh_cluster_task
from tests.faults.conftest import poll
from tests.integration.test_refresh_worker import refresh_cluster_in_process, state_of

pytestmark = pytest.mark.faults

NOON = "2026-11-21T12:00:00+00:00"
INTERVAL_S = 5
# Enough work that the refresh is still running when PostgreSQL restarts (as in
# test_killed_worker.py: 40 workloads could finish within the half second before).
WORKLOADS = 120
ENV = {
    "VPAWEB_REFRESH_INTERVAL_S": str(INTERVAL_S),
    "VPAWEB_SIMULATION_WORKLOADS": str(WORKLOADS),
    "VPAWEB_SIMULATION_HISTORY_DAYS": "2",
    "VPAWEB_CHECKPOINT_INTERVAL_S": "0",
}


def use_env(settings) -> None:
    """This process simulates the same cluster as the workers."""
    settings.REFRESH_INTERVAL_S = INTERVAL_S
    settings.SIMULATION_WORKLOADS = WORKLOADS
    settings.SIMULATION_HISTORY_DAYS = 2
    settings.CHECKPOINT_INTERVAL_S = 0


def test_a_postgresql_restart_mid_refresh_fails_the_run_and_the_retry_recovers(
    own_postgres, workers, settings, caplog
):
    use_env(settings)
    cluster = Cluster.objects.create(name="sim-pg-restart", kind=Cluster.Kind.SIMULATED)
    alone = Cluster.objects.create(
        name="sim-uninterrupted", kind=Cluster.Kind.SIMULATED, is_enabled=False
    )
    queue, _worker = workers(ENV)
    result = refresh_cluster_task.apply_async(args=[cluster.pk, NOON], queue=queue)
    poll(
        lambda: RefreshRun.objects.filter(
            cluster=cluster, status=RefreshRun.Status.RUNNING
        ).exists(),
        what="the refresh to start",
    )
    time.sleep(0.5)

    restarted_at = time.monotonic()
    own_postgres.restart()
    connection.close()

    # The task's retry (transient database errors: backoff 5-10 s) stores the cycle.
    summary = result.get(timeout=180)
    recovered_s = time.monotonic() - restarted_at
    assert summary["status"] == RefreshRun.Status.SUCCEEDED
    # The next cycle runs as usual and ends whatever the restart left RUNNING.
    time.sleep(INTERVAL_S + 1)
    before = RefreshRun.objects.filter(cluster=cluster).order_by("pk").last()
    fanout = refresh_all_clusters_task.apply_async(args=[NOON], queue=queue).get(
        timeout=120
    )
    # The fan-out only queues the cycle's tasks: wait for a run of each, and for every
    # run to end, read in one query (a run starting between two reads was missed).
    queued = len(fanout["queued"])

    def ended_runs() -> list[RefreshRun] | None:
        runs = list(RefreshRun.objects.filter(cluster=cluster).order_by("pk"))
        newer = [run for run in runs if before is None or run.pk > before.pk]
        running = any(run.status == RefreshRun.Status.RUNNING for run in runs)
        return None if running or len(newer) < queued else runs

    runs = poll(ended_runs, what="every run to end")
    # What the user sees on the runs page: the interrupted run failed, naming the
    # lost connection (or its worker, when the failure could not be stored), then
    # succeeded runs.
    first, *later = runs
    assert first.status == RefreshRun.Status.FAILED
    assert (
        "connection" in first.error
        or "terminating" in first.error
        or first.error.startswith("worker lost:")
    ), first.error
    assert later
    assert {run.status for run in later} == {RefreshRun.Status.SUCCEEDED}
    print(f"PostgreSQL restart: recovered {recovered_s:.1f} s after; {first.error}")

    # Nothing lost or counted twice.
    refresh_cluster_in_process(cluster_id=alone.pk, now=datetime.fromisoformat(NOON))
    assert state_of(cluster) == state_of(alone)
