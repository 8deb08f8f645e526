"""A flood of comparisons never holds back the control loops: with real workers, one
on the control queue and one on the heavy queue (as docs/deploy.md runs them), the
next refresh and updater cycle start and finish while the flood is still queued."""

from __future__ import annotations

import time
import uuid

import pytest

from recommender.models import Cluster, RefreshRun
from recommender.services.connections import cluster_adapter_for
from recommender.services.replay.namespace_compare import new_token, stored
from recommender.tasks import compare_namespace as compare_namespace_task
from recommender.tasks import refresh_cluster as refresh_cluster_task
from recommender.tasks import update_cluster as update_cluster_task
from tests.integration.workers import (
    require_postgres_and_redis,
    start_worker,
    stop_worker,
)

pytestmark = pytest.mark.integration

FLOOD = 20
ENV = {"VPAWEB_SIMULATION_WORKLOADS": "6", "VPAWEB_SIMULATION_HISTORY_DAYS": "0.25"}


@pytest.fixture
def queues(transactional_db):
    """A control worker and a heavy worker, each on a private queue of its own."""
    require_postgres_and_redis()
    control = f"vpaweb-test-control-{uuid.uuid4().hex[:8]}"
    heavy = f"vpaweb-test-heavy-{uuid.uuid4().hex[:8]}"
    processes = [
        start_worker(control, env=ENV, hostname=f"{control}@%h"),
        start_worker(heavy, env=ENV, hostname=f"{heavy}@%h"),
    ]
    try:
        yield control, heavy
    finally:
        for process in processes:
            stop_worker(process)


def test_a_flood_of_comparisons_leaves_refresh_and_updater_on_time(queues, settings):
    control, heavy = queues
    settings.SIMULATION_WORKLOADS = 6
    cluster = Cluster.objects.create(name="sim-flood", kind=Cluster.Kind.SIMULATED)
    namespace = next(
        w.namespace for w in cluster_adapter_for(cluster).discover().workloads if w.pods
    )
    tokens = []
    for days in range(FLOOD):  # all different: none deduplicated
        token = new_token()
        params = {
            "cluster_id": cluster.pk,
            "namespace": namespace,
            "profile_a": "vpa",
            "profile_b": "adaptive-margin",
            "days": 4 + days / 10,
            "worst": 5,
        }
        # Where settings.CELERY_TASK_ROUTES sends it (tests/test_task_routes.py).
        compare_namespace_task.apply_async(args=[token, params], queue=heavy)
        tokens.append(token)
    # The heavy worker is busy with the flood before the control loops are due.
    deadline = time.monotonic() + 120
    while (stored(tokens[0]) or {}).get("state") == "queued":
        assert time.monotonic() < deadline, "the heavy worker never started"
        time.sleep(0.2)

    refresh = refresh_cluster_task.apply_async(args=[cluster.pk], queue=control)
    update = update_cluster_task.apply_async(args=[cluster.pk], queue=control)
    summary = refresh.get(timeout=180)
    assert update.get(timeout=180)["cluster"] == cluster.name

    run = RefreshRun.objects.get(pk=summary["run_id"])
    assert run.status == RefreshRun.Status.SUCCEEDED
    # Both cycles ran while most of the flood still waited on its own queue.
    waiting = [t for t in tokens if (stored(t) or {}).get("state") == "queued"]
    assert len(waiting) >= FLOOD // 2, [stored(t) for t in tokens]
