"""One updater per cluster with two real Celery workers (Redis broker, PostgreSQL):
the database lease lets exactly one worker act for a cluster, the other answers
"not leader", and no change is applied twice. A holder that stops renewing loses
the lease after its time-to-live, and the other worker takes over."""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from recommender.models import (
    AuditEvent,
    Cluster,
    Policy,
    ResizeChange,
    UpdaterLock,
    Workload,
)
from recommender.services.actuation import control
from recommender.services.refresh.cycle import refresh_cluster
from recommender.tasks import update_cluster as update_cluster_task
from tests.integration.workers import (
    require_postgres_and_redis,
    start_worker,
    stop_worker,
)

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
NOON = datetime.fromisoformat("2026-11-21T12:00:00+00:00")


def _wait_until_both_answer(timeout_s: float = 60.0) -> None:
    """Both workers consume before any task is sent (else one could take them all)."""
    from vpaweb.celery import app

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=1.0) or []
        names = {name.split("@")[0] for reply in replies for name in reply}
        if {"w1", "w2"} <= names:
            return
    pytest.fail("the two test workers did not answer a ping within 60 s")


@pytest.fixture
def two_workers(transactional_db):
    """Two `celery worker --pool solo` processes on one private queue."""
    require_postgres_and_redis()
    queue = f"vpaweb-updater-{uuid.uuid4().hex[:8]}"
    env = {
        "VPAWEB_SIMULATION_WORKLOADS": "12",
        "VPAWEB_SIMULATION_HISTORY_DAYS": "0.25",
        # 6 h of simulated history: act on it (the gate is tested elsewhere).
        "VPAWEB_MIN_HISTORY_HOURS": "0",
    }
    processes = [
        start_worker(queue, env=env, hostname=f"{name}@%h") for name in ("w1", "w2")
    ]
    try:
        _wait_until_both_answer()
        yield queue
    finally:
        for process in processes:
            stop_worker(process)


def test_two_workers_one_leader_and_no_change_applied_twice(two_workers, settings):
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 0.25
    settings.MIN_HISTORY_HOURS = 0
    cluster = Cluster.objects.create(
        name="sim-leader", kind=Cluster.Kind.SIMULATED, actuation_allowed=True
    )
    refresh_cluster(cluster_id=cluster.pk, now=NOON)
    acting = Workload.objects.filter(cluster=cluster, replicas__gte=2)
    Policy.objects.filter(workload__in=acting).update(
        mode="InPlaceOrRecreate", approval="automatic"
    )
    # Many cycles at once, spread over both workers (solo pools: one task each).
    results = [
        update_cluster_task.apply_async(
            args=[cluster.pk, NOON.isoformat()], queue=two_workers
        )
        for _ in range(8)
    ]
    reports = [result.get(timeout=180) for result in results]
    holders = {r["holder"] for r in reports}
    leaders = {r["holder"] for r in reports if not r["not_leader"]}
    assert len(leaders) == 1, reports
    assert len(holders) == 2, "both workers should have taken tasks"
    assert UpdaterLock.objects.get(cluster=cluster).holder in leaders
    changes = ResizeChange.objects.filter(workload__cluster=cluster)
    assert changes.exists()
    # Every change moved to applying at most once: one attempt, one audit event.
    assert set(changes.values_list("attempts", flat=True)) <= {0, 1}
    applies = AuditEvent.objects.filter(action="change.apply").values_list(
        "object_id", flat=True
    )
    assert len(applies) == len(set(applies))

    # The leader dies (stops renewing): after the lease's time-to-live the other
    # worker (any caller) takes over.
    (leader,) = leaders
    later = NOON + timedelta(seconds=control.lock_ttl_s() + 1)
    takeover = update_cluster_task.apply_async(
        args=[cluster.pk, later.isoformat()], queue=two_workers
    ).get(timeout=180)
    assert not takeover["not_leader"]
    UpdaterLock.objects.filter(cluster=cluster).update(holder="dead-worker")
    assert not control.acquire_lock(
        cluster_id=cluster.pk, holder=leader, now=later + timedelta(seconds=1)
    )
    assert control.acquire_lock(
        cluster_id=cluster.pk,
        holder=leader,
        now=later + timedelta(seconds=control.lock_ttl_s() * 2),
    )
