"""A worker SIGKILLed mid-refresh costs at most one refresh interval: its shard claim
lapses within an interval (a heartbeat renews it only while the worker lives), the next
fan-out queues the shard again, the next run reaps the killed one's RUNNING row, and the
stored state equals one uninterrupted refresh: nothing lost, nothing counted twice."""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime

import pytest
from django.core.cache import cache

from recommender.models import Cluster, RefreshRun
from recommender.tasks import CLAIM_KEY
from recommender.tasks import refresh_all_clusters as refresh_all_clusters_task
from tests.faults.conftest import poll
from tests.integration.test_refresh_worker import refresh_cluster_in_process, state_of

pytestmark = pytest.mark.faults

NOON = "2026-11-21T12:00:00+00:00"
INTERVAL_S = 5  # VPAWEB_REFRESH_INTERVAL_S's minimum: the claim lives this long
# Enough work that the refresh is still running when the worker is killed (40 workloads
# once finished within the half second before the kill on a quiet machine).
WORKLOADS = 120
ENV = {
    "VPAWEB_REFRESH_INTERVAL_S": str(INTERVAL_S),
    "VPAWEB_SIMULATION_WORKLOADS": str(WORKLOADS),
    "VPAWEB_SIMULATION_HISTORY_DAYS": "2",
    "VPAWEB_CHECKPOINT_INTERVAL_S": "0",
    # A whole-cluster refresh does its own first contact here (the fan-out of first
    # contacts to shard tasks: tests/integration/test_first_contact_shards.py).
    "VPAWEB_FIRST_CONTACT_BY_SHARD": "0",
}


def kill_mid_refresh(process, cluster):
    """SIGKILL the worker once its refresh of ``cluster`` is RUNNING; the row."""
    run = poll(
        lambda: RefreshRun.objects.filter(
            cluster=cluster, status=RefreshRun.Status.RUNNING
        ).first(),
        what="the refresh to start",
    )
    time.sleep(0.5)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=20)
    killed_at = time.monotonic()
    run.refresh_from_db()
    assert run.status == RefreshRun.Status.RUNNING, "the refresh ended before the kill"
    return run, killed_at


def test_a_worker_killed_mid_refresh_costs_at_most_one_interval(workers, settings):
    settings.REFRESH_INTERVAL_S = INTERVAL_S
    settings.SIMULATION_WORKLOADS = WORKLOADS
    settings.SIMULATION_HISTORY_DAYS = 2
    settings.CHECKPOINT_INTERVAL_S = 0
    cluster = Cluster.objects.create(name="sim-killed", kind=Cluster.Kind.SIMULATED)
    alone = Cluster.objects.create(
        name="sim-uninterrupted", kind=Cluster.Kind.SIMULATED
    )
    Cluster.objects.filter(pk=alone.pk).update(is_enabled=False)
    claim = CLAIM_KEY.format(cluster_id=cluster.pk, shard="*")
    cache.delete(claim)
    queue, first = workers(ENV)
    try:
        refresh_all_clusters_task.apply_async(args=[NOON], queue=queue)
        killed, killed_at = kill_mid_refresh(first, cluster)
        assert cache.get(claim) is not None, "the running refresh holds its claim"

        # The claim lapses within one interval of the kill (was: the task time limit).
        poll(
            lambda: cache.get(claim) is None,
            what="the killed worker's claim to lapse",
            timeout_s=INTERVAL_S * 3,
        )
        assert time.monotonic() - killed_at <= INTERVAL_S + 2

        # The next cycle queues the shard again (not "skipped"), and it runs.
        workers(ENV)
        fan_out = refresh_all_clusters_task.apply_async(args=[NOON], queue=queue)
        summary = fan_out.get(timeout=120)
        # Whole, or in namespace shards if the killed run had stored its discovery.
        assert summary["skipped"] == summary["failed"] == []
        assert summary["queued"]
        poll(
            lambda: (
                RefreshRun.objects.filter(
                    cluster=cluster, status=RefreshRun.Status.SUCCEEDED
                ).count()
                == len(summary["queued"])
            ),
            what="the next refresh",
            timeout_s=180,
        )
        # Its start reaped the killed run's row, which says what happened.
        killed.refresh_from_db()
        assert killed.status == RefreshRun.Status.FAILED
        assert killed.error.startswith("worker lost:")
        assert RefreshRun.objects.filter(cluster=cluster).count() == 1 + len(
            summary["queued"]
        )

        # Nothing lost or counted twice: the same state as one uninterrupted refresh.
        refresh_cluster_in_process(
            cluster_id=alone.pk, now=datetime.fromisoformat(NOON)
        )
        assert state_of(cluster) == state_of(alone)
    finally:
        cache.delete(claim)
