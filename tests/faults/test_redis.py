"""Redis (broker, results, cache) down for 30 s under a real worker: queueing fails
at once with an error, the pages that need no cache keep answering, the worker
survives and reconnects, and the next cycle stores each checkpoint exactly once."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from recommender.models import Cluster, RefreshRun
from recommender.tasks import refresh_all_clusters as refresh_all_clusters_task
from tests.faults.conftest import poll
from tests.integration.test_refresh_worker import (
    checkpoint_versions,
    refresh_cluster_in_process,
    state_of,
)

pytestmark = pytest.mark.faults

NOON = "2026-11-21T12:00:00+00:00"
LATER = "2026-11-21T12:05:00+00:00"
DOWN_S = 30.0
ENV = {
    "VPAWEB_REFRESH_INTERVAL_S": "5",
    "VPAWEB_SIMULATION_WORKLOADS": "6",
    "VPAWEB_SIMULATION_HISTORY_DAYS": "0.25",
    "VPAWEB_CHECKPOINT_INTERVAL_S": "0",
}
PAGES = ("/healthz", "/readyz", "/", "/runs/", "/api/v1/clusters/")


def test_redis_down_for_30_s_then_the_worker_reconnects_and_the_next_cycle_runs(
    own_redis, workers, settings, client, django_user_model
):
    settings.REFRESH_INTERVAL_S = 5
    settings.SIMULATION_WORKLOADS = 6
    settings.SIMULATION_HISTORY_DAYS = 0.25
    settings.CHECKPOINT_INTERVAL_S = 0
    cluster = Cluster.objects.create(name="sim-redis", kind=Cluster.Kind.SIMULATED)
    alone = Cluster.objects.create(
        name="sim-uninterrupted", kind=Cluster.Kind.SIMULATED, is_enabled=False
    )
    client.force_login(django_user_model.objects.create_superuser("root", "", "pw"))
    queue, worker = workers(ENV)
    refresh_all_clusters_task.apply_async(args=[NOON], queue=queue).get(timeout=120)
    poll(
        lambda: RefreshRun.objects.filter(
            cluster=cluster, status=RefreshRun.Status.SUCCEEDED
        ).exists(),
        what="the first cycle",
    )
    before = checkpoint_versions(cluster)
    up = {path: client.get(path).status_code for path in PAGES}

    own_redis.stop()
    down_at = time.monotonic()
    # What the user sees meanwhile (the pages read the database, not Redis) ...
    down = {path: client.get(path).status_code for path in PAGES}
    # ... and a cycle cannot be queued: the beat's send fails at once, with an error.
    tick = time.monotonic()
    with pytest.raises(Exception) as caught:
        refresh_all_clusters_task.apply_async(args=[LATER], queue=queue)
    queue_error_s = time.monotonic() - tick
    time.sleep(max(0.0, DOWN_S - (time.monotonic() - down_at)))
    assert worker.poll() is None, "the worker must survive a broker outage"

    own_redis.start()  # empty, as a restarted Redis without persistence
    up_at = time.monotonic()
    summary = poll(
        lambda: refresh_all_clusters_task.apply_async(args=[LATER], queue=queue).get(
            timeout=60
        ),
        what="a cycle queued and run after Redis returned",
        timeout_s=180,
    )
    assert summary["failed"] == summary["skipped"] == []
    poll(
        lambda: (
            RefreshRun.objects.filter(
                cluster=cluster, status=RefreshRun.Status.SUCCEEDED
            ).count()
            == 1 + len(summary["queued"])
        ),
        what="the cycle after the outage",
        timeout_s=120,
    )
    recovered_s = time.monotonic() - up_at
    print(
        f"Redis down {DOWN_S:g} s: pages {down} (up: {up}); queueing failed in "
        f"{queue_error_s:.2f} s with {type(caught.value).__name__}: {caught.value}; "
        f"a cycle ran {recovered_s:.1f} s after Redis returned"
    )
    assert down == up
    assert not RefreshRun.objects.filter(status=RefreshRun.Status.RUNNING).exists()
    # Each checkpoint written exactly once by the cycle after the outage ...
    after = checkpoint_versions(cluster)
    assert all(after[key] == before[key] + 1 for key in before)
    # ... and the state equals an uninterrupted process's.
    for now in (NOON, LATER):
        refresh_cluster_in_process(cluster_id=alone.pk, now=datetime.fromisoformat(now))
    assert state_of(cluster) == state_of(alone)
