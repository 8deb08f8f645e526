"""A cluster's first contact spread over real Celery workers: the whole-cluster refresh
queues one task per namespace new to it, and each task discovers, stores and first
contacts its namespace; two worker processes run them side by side, and the stored
state (discovery's rows too) equals one process's serial first contact."""

from __future__ import annotations

from datetime import datetime

import pytest
from celery.result import AsyncResult
from django.core.cache import cache

from recommender.models import Checkpoint, Cluster, RefreshRun, Workload
from recommender.tasks import CLAIM_KEY
from recommender.tasks import refresh_cluster as refresh_cluster_task
from tests.integration.test_refresh_worker import (
    NOON,
    refresh_cluster_in_process,
    state_of,
)
from tests.integration.workers import (
    two_workers_on_one_queue,
)
from tests.services.test_refresh_chunks import discovery_of

pytestmark = pytest.mark.integration

ENV = {
    "VPAWEB_SIMULATION_WORKLOADS": "40",
    "VPAWEB_SIMULATION_HISTORY_DAYS": "0.25",
    # Chunks within each shard too: a namespace's first contact is several windows.
    "VPAWEB_FIRST_CONTACT_CHUNK_CONTAINERS": "8",
}


@pytest.fixture
def two_workers(transactional_db):
    """Two worker processes consuming one private queue (also their default queue,
    where the whole-cluster refresh queues its shards)."""
    with two_workers_on_one_queue(ENV) as queue:
        yield queue


def test_first_contact_runs_as_shards_on_two_workers_and_equals_the_serial_one(
    two_workers, settings
):
    settings.SIMULATION_WORKLOADS = 40
    settings.SIMULATION_HISTORY_DAYS = 0.25
    shared = Cluster.objects.create(name="sim-sharded", kind=Cluster.Kind.SIMULATED)
    alone = Cluster.objects.create(name="sim-serial", kind=Cluster.Kind.SIMULATED)
    cache.delete(CLAIM_KEY.format(cluster_id=shared.pk, shard="*"))
    try:
        whole = refresh_cluster_task.apply_async(
            args=[shared.pk, NOON], queue=two_workers
        ).get(timeout=120)

        # Every namespace was new: the whole-cluster pass stored none of its
        # workloads and fed nothing; it left each namespace, discovery and upsert
        # included, to a task of its own.
        assert whole["counts"]["workloads"] == 0
        assert whole["counts"]["workloads_new"] == 0
        assert whole["counts"]["samples"] == 0
        namespaces = [ns for ns, _ in whole["first_contact_shards"]]
        assert len(namespaces) >= 2
        assert whole["counts"]["first_contact_shards"] == len(namespaces)
        shards = [
            AsyncResult(task_id).get(timeout=180)
            for _, task_id in whole["first_contact_shards"]
        ]

        # Each namespace ran once, as a task of its own, on both worker processes.
        assert {shard["status"] for shard in shards} == {"succeeded"}
        assert len({shard["worker"] for shard in shards}) == 2
        runs = RefreshRun.objects.filter(cluster=shared).exclude(shard="")
        assert sorted(runs.values_list("shard", flat=True)) == namespaces
        assert (
            sorted(
                set(
                    Workload.objects.filter(cluster=shared).values_list(
                        "namespace", flat=True
                    )
                )
            )
            == namespaces
        )
        # Within a shard, a namespace larger than a chunk went in several windows.
        chunks = [shard["counts"].get("first_contact_chunks", 1) for shard in shards]
        assert sum(chunks) > len(namespaces)
        assert not Checkpoint.objects.filter(
            container__workload__cluster=shared, last_sample_at__isnull=True
        ).exists()
        # Nothing queued twice, and every claim given back.
        assert all(not shard["first_contact_shards"] for shard in shards)
        assert not any(
            cache.get(CLAIM_KEY.format(cluster_id=shared.pk, shard=ns))
            for ns in [*namespaces, "*"]
        )

        # The same checkpoints, OOM kills and recommendations as one serial pass.
        refresh_cluster_in_process(
            cluster_id=alone.pk, now=datetime.fromisoformat(NOON)
        )
        assert state_of(shared) == state_of(alone)
        assert discovery_of(shared) == discovery_of(alone)
        assert discovery_of(shared)[0]
    finally:
        cache.delete_many(
            [
                CLAIM_KEY.format(cluster_id=shared.pk, shard=shard)
                for shard in [
                    "*",
                    *Workload.objects.values_list("namespace", flat=True),
                ]
            ]
        )
