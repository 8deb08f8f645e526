"""A real Celery worker (Redis broker, PostgreSQL) runs a refresh end to end, and the
sharded fan-out: the shards it queues run on that worker too."""

from __future__ import annotations

import time
import uuid
from datetime import datetime

import pytest
from django.core.cache import cache

from recommender.models import (
    Checkpoint,
    Cluster,
    OomKill,
    Recommendation,
    RefreshRun,
    Workload,
)
from recommender.tasks import CLAIM_KEY
from recommender.tasks import refresh_all_clusters as refresh_all_clusters_task
from recommender.tasks import refresh_cluster as refresh_cluster_task
from tests.integration.workers import (
    require_postgres_and_redis,
    start_worker,
    stop_worker,
    two_workers_on_one_queue,
)

pytestmark = pytest.mark.integration


ENV = {
    "VPAWEB_SIMULATION_WORKLOADS": "6",
    "VPAWEB_SIMULATION_HISTORY_DAYS": "0.25",
    # Every fed checkpoint written every cycle: the tests count the writes.
    "VPAWEB_CHECKPOINT_INTERVAL_S": "0",
    # A whole-cluster refresh does its own first contact here (the fan-out of first
    # contacts to shard tasks: tests/integration/test_first_contact_shards.py).
    "VPAWEB_FIRST_CONTACT_BY_SHARD": "0",
}


@pytest.fixture
def worker(transactional_db):
    """A `celery worker --pool solo` on a private queue, using the test database.

    The private queue is also the worker's default queue (tests/integration/worker_app),
    so what its tasks queue (the fan-out's shards) runs on it too, and nowhere else.
    """
    require_postgres_and_redis()
    queue = f"vpaweb-test-{uuid.uuid4().hex[:8]}"
    process = start_worker(queue, env=ENV)
    try:
        yield queue
    finally:
        stop_worker(process)


@pytest.fixture
def two_workers(transactional_db):
    """Two worker processes consuming one private queue: tasks run side by side."""
    with two_workers_on_one_queue(ENV) as queue:
        yield queue


def test_a_worker_runs_the_refresh_task_and_rows_appear(worker, settings):
    settings.SIMULATION_WORKLOADS = 6
    cluster = Cluster.objects.create(name="sim-worker", kind=Cluster.Kind.SIMULATED)

    result = refresh_cluster_task.apply_async(
        args=[cluster.pk, "2026-11-21T12:00:00+00:00"], queue=worker
    )
    summary = result.get(timeout=120)

    run = RefreshRun.objects.get(pk=summary["run_id"])
    assert run.status == RefreshRun.Status.SUCCEEDED
    assert Workload.objects.filter(cluster=cluster).count() == 6
    assert Recommendation.objects.filter(container__workload__cluster=cluster).exists()
    # The worker ran it, not this process: nothing ran eagerly here.
    assert not settings.CELERY_TASK_ALWAYS_EAGER
    deadline = time.monotonic() + 5
    while run.finished_at is None and time.monotonic() < deadline:
        run.refresh_from_db()
    assert run.finished_at is not None


NOON = "2026-11-21T12:00:00+00:00"


def wait_for(condition, *, what, timeout_s=120.0):
    """Poll ``condition`` until it returns something true; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.2)
    return value


def finished_runs(cluster, *, count):
    """The cluster's `count` refresh runs once all of them finished, else None."""
    runs = list(RefreshRun.objects.filter(cluster=cluster).order_by("pk"))
    if len(runs) == count and all(run.finished_at for run in runs):
        return runs
    return None


def checkpoint_versions(cluster):
    """{(namespace, container id): checkpoint version} of the cluster."""
    rows = Checkpoint.objects.filter(container__workload__cluster=cluster)
    return {
        (namespace, container_id): version
        for container_id, namespace, version in rows.values_list(
            "container_id", "container__workload__namespace", "version"
        )
    }


def written_per_namespace(before, after):
    """{namespace: checkpoints written} between two snapshots; fails on a checkpoint
    written twice (two shards both writing one namespace)."""
    written: dict[str, int] = {}
    for (namespace, container_id), version in after.items():
        old = before.get((namespace, container_id), 0)
        if version != old:
            assert version == old + 1, f"container {container_id} written twice"
            written[namespace] = written.get(namespace, 0) + 1
    return written


def claims_held(cluster, namespaces):
    keys = [
        CLAIM_KEY.format(cluster_id=cluster.pk, shard=shard)
        for shard in [*namespaces, "*"]
    ]
    return sorted(key for key in keys if cache.get(key) is not None)


def test_a_worker_runs_the_sharded_fan_out_and_each_shard_writes_its_namespace(
    worker,
):
    cluster = Cluster.objects.create(name="sim-fan-out", kind=Cluster.Kind.SIMULATED)
    # A claim left in this Redis db by an earlier run must not skip a shard here.
    cache.delete(CLAIM_KEY.format(cluster_id=cluster.pk, shard="*"))
    try:
        # Never discovered: one whole-cluster task, queued by the worker, run by it.
        first = refresh_all_clusters_task.apply_async(args=[NOON], queue=worker)
        assert first.get(timeout=120) == {
            "queued": [cluster.pk],
            "failed": [],
            "skipped": [],
        }
        (whole,) = wait_for(
            lambda: finished_runs(cluster, count=1), what="the whole-cluster refresh"
        )
        assert (whole.shard, whole.status) == ("", RefreshRun.Status.SUCCEEDED)
        namespaces = sorted(
            set(
                Workload.objects.filter(cluster=cluster, is_active=True).values_list(
                    "namespace", flat=True
                )
            )
        )
        assert len(namespaces) >= 2
        cache.delete_many(
            [CLAIM_KEY.format(cluster_id=cluster.pk, shard=ns) for ns in namespaces]
        )
        before = checkpoint_versions(cluster)

        # Discovered five minutes ago: one shard task per namespace.
        sharded = refresh_all_clusters_task.apply_async(
            args=["2026-11-21T12:05:00+00:00"], queue=worker
        ).get(timeout=120)

        assert sharded == {
            "queued": [[cluster.pk, ns] for ns in namespaces],
            "failed": [],
            "skipped": [],
        }
        runs = wait_for(
            lambda: finished_runs(cluster, count=1 + len(namespaces)),
            what=f"{len(namespaces)} shard refreshes",
        )
        shards = [run for run in runs if run.pk != whole.pk]
        assert sorted(run.shard for run in shards) == namespaces
        assert {run.status for run in shards} == {RefreshRun.Status.SUCCEEDED}
        # Each shard wrote its own namespace's checkpoints, and only those: the
        # checkpoints each one counts are exactly its namespace's new versions.
        written = written_per_namespace(before, checkpoint_versions(cluster))
        assert set(written) == set(namespaces)
        assert {run.shard: run.counts["checkpoints_written"] for run in shards} == (
            written
        )
        cluster.refresh_from_db()
        assert cluster.last_discovered_at.isoformat() == NOON
        # Every shard gave its claim back as it ended.
        deadline = time.monotonic() + 10
        while claims_held(cluster, namespaces) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert claims_held(cluster, namespaces) == []

        # One shard's refresh is still queued or running (its claim is held).
        busy, *free = namespaces
        busy_key = CLAIM_KEY.format(cluster_id=cluster.pk, shard=busy)
        assert cache.add(busy_key, 1, timeout=60)
        before = checkpoint_versions(cluster)

        again = refresh_all_clusters_task.apply_async(
            args=["2026-11-21T12:06:00+00:00"], queue=worker
        ).get(timeout=120)

        assert again == {
            "queued": [[cluster.pk, ns] for ns in free],
            "failed": [],
            "skipped": [[cluster.pk, busy]],
        }
        wait_for(
            lambda: finished_runs(cluster, count=1 + len(namespaces) + len(free)),
            what=f"{len(free)} shard refreshes",
        )
        assert RefreshRun.objects.filter(cluster=cluster, shard=busy).count() == 1
        written = written_per_namespace(before, checkpoint_versions(cluster))
        assert set(written) == set(free)
        # The held claim is still held: only its holder's end releases it.
        assert claims_held(cluster, namespaces) == [busy_key]
    finally:
        namespaces = Workload.objects.filter(cluster=cluster).values_list(
            "namespace", flat=True
        )
        cache.delete_many(
            [
                CLAIM_KEY.format(cluster_id=cluster.pk, shard=shard)
                for shard in {"*", *namespaces}
            ]
        )


def test_two_workers_on_overlapping_shards_double_count_nothing(two_workers, settings):
    """A whole-cluster refresh and every shard twice, at one ``now``, on two workers
    at once: every sample and OOM kill counts once, as in one in-process refresh."""
    settings.SIMULATION_WORKLOADS = 6
    settings.SIMULATION_HISTORY_DAYS = 0.25
    shared = Cluster.objects.create(name="sim-two-workers", kind=Cluster.Kind.SIMULATED)
    alone = Cluster.objects.create(name="sim-one-process", kind=Cluster.Kind.SIMULATED)
    refresh_cluster_task.apply_async(args=[shared.pk, NOON], queue=two_workers).get(
        timeout=120
    )
    refresh_cluster_in_process(cluster_id=alone.pk, now=datetime.fromisoformat(NOON))
    namespaces = sorted(
        set(Workload.objects.filter(cluster=shared).values_list("namespace", flat=True))
    )
    assert len(namespaces) >= 2
    before = checkpoint_versions(shared)
    later = "2026-11-21T12:10:00+00:00"  # the checkpoints are due: all are written

    results = [
        refresh_cluster_task.apply_async(args=[shared.pk, later], queue=two_workers)
    ] + [
        refresh_cluster_task.apply_async(
            args=[shared.pk, later], kwargs={"namespace": ns}, queue=two_workers
        )
        for ns in namespaces * 2
    ]
    for result in results:
        result.get(timeout=180)
    refresh_cluster_in_process(cluster_id=alone.pk, now=datetime.fromisoformat(later))

    runs = RefreshRun.objects.filter(cluster=shared)
    assert runs.count() == 2 + 2 * len(namespaces)
    assert {run.status for run in runs} == {RefreshRun.Status.SUCCEEDED}
    # Each checkpoint was written exactly once after first contact (a second write of
    # the same samples would be version + 2) ...
    after = checkpoint_versions(shared)
    assert set(written_per_namespace(before, after)) == set(namespaces)
    assert all(after[key] == before[key] + 1 for key in before)
    # ... and the state equals one process refreshing once: nothing counted twice.
    assert state_of(shared) == state_of(alone)


def refresh_cluster_in_process(*, cluster_id, now):
    from recommender.services.refresh.cycle import refresh_cluster

    run = refresh_cluster(cluster_id=cluster_id, now=now)
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error


def state_of(cluster):
    """Checkpoint bytes, OOM kills and latest recommendations, by names."""
    checkpoints = sorted(
        (
            c.container.workload.namespace,
            c.container.workload.name,
            c.container.name,
            bytes(c.state),
            c.sample_count,
        )
        for c in Checkpoint.objects.filter(
            container__workload__cluster=cluster
        ).select_related("container__workload")
    )
    ooms = sorted(
        OomKill.objects.filter(container__workload__cluster=cluster).values_list(
            "container__workload__name", "container__name", "pod", "occurred_at"
        )
    )
    recommendations = sorted(
        (r.container.workload.name, r.container.name, r.values_tuple())
        for r in Recommendation.objects.filter(
            container__workload__cluster=cluster
        ).select_related("container__workload")
    )
    return checkpoints, ooms, recommendations
